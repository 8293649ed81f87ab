"""Guards see what runs, and a ``when`` decides as Starlark would (issue 10, items 4, 8).

Real hook files, real Starlark, both runtimes. Invariant (docs/hooks.md, "Guards see
what runs"): the tool never receives arguments that a ``tool.pre`` hook able to block
has not seen.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import harness
from harness.hooks import MAX_CHANGES

Make = Callable[[dict[str, str]], harness.Harness]

ECHO = """
---
parameters:
  path: {type: string}
  n: {type: integer}
  timeout_ms: {type: number}
script: |
  def run(args):
      return {"args": args, "guard_runs": cache.get("guard_runs", 0),
              "late_runs": cache.get("late_runs", 0)}
---
Echo the arguments back, with how often the counting hooks ran.
"""


def hook(
    body: str, *, priority: int = 100, when: str | None = None, on_error: str | None = None
) -> str:
    lines = ["---", "event: tool.pre", f"priority: {priority}"]
    if when is not None:
        lines.append(f"when: '{when}'")
    if on_error is not None:
        lines.append(f"on_error: {on_error}")
    lines += ["script: |", "  def handle(event, payload):"]
    lines += ["      " + line for line in textwrap.dedent(body).strip().splitlines()]
    lines += ["---", "A hook.", ""]
    return "\n".join(lines)


GUARD = hook(
    """
    cache.set("guard_runs", cache.get("guard_runs", 0) + 1)
    if "forbidden" in payload["arguments"].get("path", ""):
        return block("forbidden paths are off limits")
    return allow()
""",
    priority=10,
)
NORMALISE = hook(
    """
    a = dict(payload["arguments"])
    a["path"] = a.get("path", "").replace("@", "")
    return modify({"arguments": a})
""",
    priority=50,
)
LATE = hook(
    """
    cache.set("late_runs", cache.get("late_runs", 0) + 1)
    return allow()
""",
    priority=900,
)


@pytest.fixture(params=["inprocess", "process"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Make]:
    opened: list[harness.Harness] = []

    def make(hooks: dict[str, str]) -> harness.Harness:
        (tmp_path / ".harness" / "tools").mkdir(parents=True, exist_ok=True)
        (tmp_path / ".harness" / "hooks").mkdir(parents=True, exist_ok=True)
        (tmp_path / "harness.md").write_text(
            f"---\nruntime: {{isolation: {request.param}}}\n---\nA test agent.\n"
        )
        (tmp_path / ".harness" / "tools" / "echo.md").write_text(textwrap.dedent(ECHO).lstrip())
        for name, text in hooks.items():
            (tmp_path / ".harness" / "hooks" / f"{name}.md").write_text(text)
        h = harness.load(tmp_path)
        opened.append(h)
        return h

    yield make
    for h in opened:
        h.close()


def test_a_later_modify_cannot_smuggle_arguments_past_a_guard(project: Make) -> None:
    h = project({"guard": GUARD, "normalise": NORMALISE})
    with h.session("s1") as s:
        r = s.call("echo", {"path": "forb@idden/x"})
    assert r.is_error and r.blocked_by == "guard", r
    assert r.error == 'blocked by hook "guard": forbidden paths are off limits'


def test_the_guard_runs_again_only_when_a_later_hook_changed_the_arguments(project: Make) -> None:
    h = project({"guard": GUARD, "normalise": NORMALISE, "late": LATE})
    with h.session("s1") as s:
        r = s.call("echo", {"path": "a@b"})  # changed by normalise: the guard sees "ab"
        assert not r.is_error, r
        assert r.value["args"]["path"] == "ab"
        assert (r.value["guard_runs"], r.value["late_runs"]) == (2, 1)
    with h.session("s2") as s:
        r = s.call("echo", {"path": "ab"})  # nothing to change: one pass
        assert (r.value["guard_runs"], r.value["late_runs"]) == (1, 1)


def test_one_non_idempotent_modify_runs_once(project: Make) -> None:
    bump = hook(
        """
        a = dict(payload["arguments"])
        a["n"] = a.get("n", 0) + 1
        return modify({"arguments": a})
    """,
        priority=50,
    )
    h = project({"guard": GUARD, "bump": bump})
    assert h.call("echo", {"n": 1}).value["args"]["n"] == 2


@pytest.mark.parametrize("kind", ["flip-flop", "counter"])
def test_modifications_that_never_settle_end_with_a_clear_error(project: Make, kind: str) -> None:
    if kind == "flip-flop":
        first = hook('return modify({"arguments": {"path": "one"}})', priority=10)
        second = hook('return modify({"arguments": {"path": "two"}})', priority=20)
    else:
        bump = """
            a = dict(payload["arguments"])
            a["n"] = a.get("n", 0) + 1
            return modify({"arguments": a})
        """
        first, second = hook(bump, priority=10), hook(bump, priority=20)
    h = project({"first": first, "second": second})
    r = h.call("echo", {"path": "x", "n": 0})
    assert r.is_error and r.blocked_by in ("first", "second"), r
    assert r.error is not None
    assert r.error.startswith("tool.pre hooks do not settle: hook ")
    assert f"changed the payload {MAX_CHANGES + 1} times in one call" in r.error
    assert "idempotent" in r.error
    # Nothing is left behind: the next call gets the same answer.
    again = h.call("echo", {"path": "x", "n": 0})
    assert again.is_error and again.error == r.error


# -- item 4: a capping hook whose ``when`` the old fast path answered wrongly ----------

CAP = hook(
    """
    a = dict(payload["arguments"])
    a["timeout_ms"] = 60000
    return modify({"arguments": a})
""",
    when='payload["arguments"].get("timeout_ms", 0) > 60000',
    on_error="allow",
)


@pytest.mark.parametrize("value", [600000.0, 600000, 60000.5])
def test_a_float_timeout_cannot_skip_a_capping_hook(project: Make, value: float) -> None:
    h = project({"cap": CAP})
    r = h.call("echo", {"timeout_ms": value})
    assert not r.is_error, r
    assert r.value["args"]["timeout_ms"] == 60000


def test_a_float_under_the_cap_is_left_alone(project: Make) -> None:
    h = project({"cap": CAP})
    assert h.call("echo", {"timeout_ms": 5000.0}).value["args"]["timeout_ms"] == 5000.0
