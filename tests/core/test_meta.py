"""meta.tool_register: validated like a file tool, gated by hooks, session-scoped."""

from __future__ import annotations

from collections.abc import Callable

import harness

MakeHarness = Callable[..., harness.Harness]

REGISTRAR = """
---
parameters:
  name: {type: string, required: true}
  script: {type: string, required: true}
script: |
  def run(args):
      return meta.tool_register(args["name"], "A tool made at run time.",
                                {"x": {"type": "integer", "required": True}}, args["script"])
---
Registers a tool.
"""
GOOD = 'def run(args):\n    return args["x"] * 2\n'
GATE = """
---
event: meta.tool_register
script: |
  def handle(event, payload):
      if payload["name"].startswith("evil"):
          return block("evil tools are not welcome")
      return allow()
---
Gate.
"""


def test_registered_tool_lives_for_the_session(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"register": REGISTRAR},
        hooks={"gate": GATE},
        config="meta: {enabled: true, max_tools: 2}\n",
    )
    with h.session() as s:
        r = s.call("register", {"name": "double", "script": GOOD})
        assert r.value == {"name": "double", "registered": True}, r
        assert s.call("double", {"x": 21}).value == 42
        assert s.call("double", {"x": "21"}).is_error  # validated like any tool
    with h.session() as other:
        assert other.call("double", {"x": 1}).error.startswith('unknown tool "double"')  # type: ignore[union-attr]


def test_hook_blocks_a_registration(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"register": REGISTRAR}, hooks={"gate": GATE}, config="meta: {enabled: true}\n"
    )
    with h.session() as s:
        r = s.call("register", {"name": "evil_tool", "script": GOOD})
        assert r.is_error
        assert 'blocked by hook "gate": evil tools are not welcome' in (r.error or "")
        assert s.call("evil_tool", {"x": 1}).is_error


def test_invalid_registration_is_refused_with_the_validate_message(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(tools={"register": REGISTRAR}, config="meta: {enabled: true}\n")
    with h.session() as s:
        r = s.call("register", {"name": "broken", "script": "def run(args):\n    return nope\n"})
        assert r.is_error and 'tool "broken" is invalid' in (r.error or "")
        r = s.call("register", {"name": "1bad", "script": GOOD})
        assert r.is_error and "invalid" in (r.error or "")


def test_cannot_replace_a_file_tool_and_limit_holds(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"register": REGISTRAR}, config="meta: {enabled: true, max_tools: 1}\n")
    with h.session() as s:
        r = s.call("register", {"name": "register", "script": GOOD})
        assert r.is_error and "already exists" in (r.error or "")
        assert not s.call("register", {"name": "one", "script": GOOD}).is_error
        r = s.call("register", {"name": "two", "script": GOOD})
        assert r.is_error and "meta.max_tools = 1" in (r.error or "")


def test_disabled_by_default(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"register": REGISTRAR})
    r = h.call("register", {"name": "double", "script": GOOD})
    assert r.is_error and "meta.tool_register is disabled" in (r.error or "")


def test_registration_works_from_a_worker_process(tmp_path: object) -> None:
    from core_samples import write_project

    root = write_project(
        tmp_path,
        tools={"register": REGISTRAR},  # type: ignore[arg-type]
        config="meta: {enabled: true}\n",
    )
    text = (root / "harness.md").read_text().replace("isolation: inprocess", "isolation: process")
    (root / "harness.md").write_text(text)
    with harness.load(root) as h, h.session() as s:
        r = s.call("register", {"name": "double", "script": GOOD})
        assert r.value == {"name": "double", "registered": True}, r
        assert s.call("double", {"x": 4}).value == 8


COUNTING_GATE = """
---
event: meta.tool_register
script: |
  def handle(event, payload):
      n = metrics.incr("registrations")
      ctx.set("last", payload["name"])
      cache.set("seen", cache.get("seen", 0) + 1)
      if n > 2:
          return block("only 2 registrations per session (this is number %d)" % n)
      return allow()
---
Counts registrations with metrics, ctx and cache (issue 23 class 6).
"""


def test_registration_hook_can_count_with_metrics_ctx_and_cache(
    make_harness: MakeHarness,
) -> None:
    # Before: metrics.* and ctx.* failed with "only available inside a session" in
    # meta.tool_register hooks, so a counting hook blocked every registration.
    h = make_harness(
        tools={"register": REGISTRAR},
        hooks={"gate": COUNTING_GATE},
        config="meta: {enabled: true, max_tools: 5}\n",
    )
    with h.session() as s:
        for name in ("one", "two"):
            r = s.call("register", {"name": name, "script": GOOD})
            assert r.value == {"name": name, "registered": True}, r
        r = s.call("register", {"name": "three", "script": GOOD})
        assert r.is_error
        assert "only 2 registrations per session (this is number 3)" in (r.error or "")
        assert s.metrics.get("registrations") == 3
        assert s.cache.get("seen") == 3


def test_counting_registration_hook_in_worker_processes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The same hook with process isolation: its host runtime is a worker process, and
    # metrics / ctx reach the session through the worker's host channel.
    for kind, name, text in (("tools", "register", REGISTRAR), ("hooks", "gate", COUNTING_GATE)):
        folder = tmp_path / ".harness" / kind
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.md").write_text(text.lstrip("\n"))
    (tmp_path / "harness.md").write_text(
        "---\nruntime: {isolation: process}\nmeta: {enabled: true, max_tools: 5}\n---\nHi.\n"
    )
    with harness.load(tmp_path) as h, h.session() as s:
        for name in ("one", "two"):
            assert s.call("register", {"name": name, "script": GOOD}).value == {
                "name": name,
                "registered": True,
            }
        r = s.call("register", {"name": "three", "script": GOOD})
        assert r.is_error and "(this is number 3)" in (r.error or "")
