"""Hooks at run time on real artifacts (docs/spec.md §4); chain order on a fake runtime."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from core_samples import ECHO

import harness
from harness.artifacts.model import HookSpec, Source
from harness.hooks import HookChain
from harness.runtime.context import CallContext, Outcome

MakeHarness = Callable[..., harness.Harness]


def hook(
    event: str,
    body: str,
    *,
    priority: int | None = None,
    when: str | None = None,
    on_error: str | None = None,
    timeout_ms: int | None = None,
) -> str:
    lines = ["---", f"event: {event}"]
    if priority is not None:
        lines.append(f"priority: {priority}")
    if when is not None:
        lines.append(f"when: '{when}'")
    if on_error is not None:
        lines.append(f"on_error: {on_error}")
    if timeout_ms is not None:
        lines.append(f"timeout_ms: {timeout_ms}")
    lines.append("script: |")
    lines.append("  def handle(event, payload):")
    lines.extend("      " + line for line in body.strip().splitlines())
    lines.extend(["---", "A hook.", ""])
    return "\n".join(lines)


def test_priority_zero_runs_first_and_sees_earlier_modifications(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={
            "b_second": hook(
                "tool.pre",
                'a = dict(payload["arguments"])\n'
                'if "-second" not in a["path"]:\n    a["path"] = a["path"] + "-second"\n'
                'return modify({"arguments": a})',
            ),
            "a_default": hook(
                "tool.pre",
                'a = dict(payload["arguments"])\n'
                'if "-third" not in a["path"]:\n    a["path"] = a["path"] + "-third"\n'
                'return modify({"arguments": a})',
                priority=100,
            ),
            "z_first": hook(
                "tool.pre",
                'a = dict(payload["arguments"])\n'
                'if "-first" not in a["path"]:\n    a["path"] = a["path"] + "-first"\n'
                'return modify({"arguments": a})',
                priority=0,
            ),
        },
    )
    # priority 0 first; ties (100) in name order: a_default before b_second. (Each
    # modify is idempotent: after a change the hooks before it run again, see
    # test_hook_guards.py.)
    assert h.call("echo", {"path": "x"}).value["path"] == "x-first-third-second"


def test_block_stops_the_tool_and_post_hooks(make_harness: MakeHarness, tmp_path: Any) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={
            "guard": hook(
                "tool.pre",
                'return block("paths under /secret are off limits")',
                when='payload["arguments"]["path"].startswith("/secret")',
            ),
            "post": hook("tool.post", 'return modify({"result": "post ran"})'),
        },
    )
    r = h.call("echo", {"path": "/secret/x"})
    assert r.is_error and r.blocked_by == "guard"
    assert r.error == 'blocked by hook "guard": paths under /secret are off limits'
    assert h.call("echo", {"path": "ok"}).value == "post ran"


def test_modified_arguments_are_validated_again(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={
            "breaker": hook("tool.pre", 'return modify({"arguments": {"path": 42}})'),
        },
    )
    r = h.call("echo", {"path": "x"})
    assert r.is_error and r.blocked_by == "breaker"
    assert r.error == (
        'hook "breaker" failed: modified arguments are invalid for tool "echo": '
        '$.path: 42 is not of type "string"'
    )


def test_pre_hooks_may_not_change_the_name(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={
            "renamer": hook("tool.pre", 'return modify({"name": "other"})'),
        },
        refused_guards=True,  # validate refuses it (guard-modify-key); the runtime too
    )
    r = h.call("echo", {"path": "x"})
    assert r.is_error
    assert r.error == (
        'hook "renamer" failed: modify() may not change "name" in tool.pre '
        "(may change: args, arguments)"
    )


def test_post_hook_redacts_the_result(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={
            "leak": """
        ---
        script: |
          def run(args):
              return {"out": "key=AKIAABCDEFGHIJKLMNOP ok"}
        ---
        leaks
    """
        },
        hooks={
            "redact": hook(
                "tool.post",
                'r = payload["result"]\n'
                'return modify({"result": {"out": re.sub("AKIA[0-9A-Z]{16}", '
                '"[REDACTED]", r["out"])}})',
            )
        },
    )
    r = h.call("leak", {})
    assert r.value == {"out": "key=[REDACTED] ok"}
    assert "AKIA" not in r.text


def test_post_hook_block_withholds_the_result(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={
            "withhold": hook("tool.post", 'return block("contains customer data")'),
        },
    )
    r = h.call("echo", {"path": "x"})
    assert r.is_error and r.value is None
    assert r.error == 'result withheld by hook "withhold": contains customer data'


def test_post_hook_sees_errors(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={
            "explain": hook(
                "tool.post",
                'if payload["is_error"]:\n'
                '    return modify({"error": "friendlier: " + payload["error"]})\n'
                "return None",
            ),
        },
    )
    r = h.call("echo", {"path": "x", "n": "bad"})
    assert r.is_error  # validation failures never reach post hooks
    assert not r.error.startswith("friendlier")  # type: ignore[union-attr]


def test_failing_hooks_fail_closed(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={
            "broken": hook("tool.pre", 'return payload["missing"]'),
        },
        refused_guards=True,  # validate refuses it (payload-key-unknown); it still fails closed
    )
    r = h.call("echo", {"path": "x"})
    assert r.is_error and r.blocked_by == "broken"
    assert r.error.startswith('hook "broken" failed: ')  # type: ignore[union-attr]
    assert ".harness/hooks/broken.md:" in r.error  # type: ignore[operator]


def test_on_error_allow_lets_the_call_through(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={
            "flaky": hook("tool.pre", 'return payload["missing"]', on_error="allow"),
        },
        refused_guards=True,  # validate refuses it (payload-key-unknown); it still fails closed
    )
    assert not h.call("echo", {"path": "x"}).is_error


def test_garbage_decision_is_a_failure(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"echo": ECHO}, hooks={"garbage": hook("tool.pre", "return 42")})
    r = h.call("echo", {"path": "x"})
    assert r.is_error and "handle() must return" in (r.error or "")


def test_when_that_raises_is_a_failure(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={
            "w": hook("tool.pre", "return None", when='payload["nope"] == 1'),
        },
        refused_guards=True,  # validate refuses it (payload-key-unknown); it still fails closed
    )
    r = h.call("echo", {"path": "x"})
    assert r.is_error and r.error.startswith('hook "w" failed: when: ')  # type: ignore[union-attr]


def test_hook_timeout(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={
            "slow": hook("tool.pre", "for i in range(1000000000):\n    pass", timeout_ms=200),
        },
    )
    r = h.call("echo", {"path": "x"})
    assert r.error == 'hook "slow" failed: timed out after 200 ms'


def test_dict_decisions_work(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={
            "d": hook("tool.pre", 'return {"action": "block", "reason": "dict form"}'),
        },
    )
    assert h.call("echo", {"path": "x"}).error == 'blocked by hook "d": dict form'


# -- chain order on a fake runtime (the seam: no Starlark here) ------------------------


class FakeRuntime:
    def __init__(self, decisions: Mapping[str, Any]) -> None:
        self.decisions = decisions
        self.calls: list[str] = []

    def run_hook(
        self,
        script: str,
        filename: str,
        line: int,
        event: str,
        payload: Mapping[str, Any],
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        self.calls.append(script)
        return Outcome(status="ok", value=self.decisions.get(script))

    def eval_when(self, *a: Any) -> Outcome:
        return Outcome(status="ok", value=True)


def spec(name: str, priority: int) -> HookSpec:
    return HookSpec(
        name=name,
        event="tool.pre",
        script=name,
        priority=priority,
        source=Source(path=f"{name}.md"),
    )


def test_chain_order_is_fixed_at_load_and_stops_at_first_block() -> None:
    chain = HookChain([spec("c", 5), spec("a", 100), spec("b", 0), spec("d", 100)])
    rt = FakeRuntime({"a": {"action": "block", "reason": "stop"}})
    out = chain.run(
        "tool.pre",
        {"arguments": {}},
        rt,  # type: ignore[arg-type]
        lambda h: CallContext(config=harness.Config()),
    )
    assert rt.calls == ["b", "c", "a"]
    assert out.blocked_by == "a" and out.reason == "stop"


def test_a_modify_that_changes_nothing_is_recorded_as_an_allow() -> None:
    chain = HookChain([spec("same", 1), spec("empty", 2), spec("real", 3)])
    rt = FakeRuntime(
        {
            "same": {"action": "modify", "payload": {"arguments": {"a": 1}}},
            "empty": {"action": "modify", "payload": {}},
            "real": {"action": "modify", "payload": {"arguments": {"a": 2}}},
        }
    )
    seen: list[tuple[str, str]] = []
    out = chain.run(
        "tool.pre",
        {"arguments": {"a": 1}},
        rt,  # type: ignore[arg-type]
        lambda h: CallContext(config=harness.Config()),
        on_decision=lambda event, name, action, reason, took: seen.append((name, action)),
    )
    assert seen[:3] == [("same", "allow"), ("empty", "allow"), ("real", "modify")]
    assert out.payload["arguments"] == {"a": 2}


def test_session_events_run_their_hooks(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={
            "get": "---\nscript: |\n  def run(args):\n      return cache.get('started')\n---\nget\n"
        },
        hooks={
            "start": hook("session.start", 'cache.set("started", payload["session"])\nreturn None')
        },
    )
    with h.session("abc") as s:
        assert s.call("get", {}).value == "abc"


def test_custom_events_can_be_fired(make_harness: MakeHarness) -> None:
    h = make_harness(hooks={"deploy_gate": hook("custom.deploy", 'return block("frozen")')})
    with h.session() as s:
        out = s.fire("custom.deploy", {"env": "prod"})
        assert out.blocked_by == "deploy_gate" and out.reason == "frozen"


def test_fire_returns_an_outcome_when_no_hook_handles_the_event(make_harness: MakeHarness) -> None:
    # issue 14, item 4: never None, so callers can read blocked_by unconditionally.
    h = make_harness(hooks={"deploy_gate": hook("custom.deploy", 'return block("frozen")')})
    with h.session("s9") as s:
        out = s.fire("custom.other", {"env": "prod"})
        assert out is not None
        assert out.blocked_by is None and out.reason == "" and not out.failed
        assert out.payload == {"env": "prod", "session": "s9"}
