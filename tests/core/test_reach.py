"""Hooks are handed only the payload keys they can reach (runtime/reach.py).

The narrowing must be invisible: every hook below decides the same as it would on
the whole payload. Anything the scan cannot prove gets the whole payload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from core_samples import ECHO, write_project
from test_hooks import hook

import harness
from harness.artifacts.model import HookSpec, Source
from harness.hooks import HookChain
from harness.runtime.context import CallContext, Outcome
from harness.runtime.engine import hook_call
from harness.runtime.reach import NOARGS_ENTRY, UNUSED, HookInputs, hook_inputs

MakeHarness = Callable[..., harness.Harness]
ALL = HookInputs(True, None)


def handle(body: str, params: str = "event, payload") -> str:
    return f"def handle({params}):\n" + "".join(f"    {line}\n" for line in body.splitlines())


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (handle("return allow()"), HookInputs(False, frozenset())),
        (handle("return block(event)"), HookInputs(True, frozenset())),
        (
            handle(
                'if payload["name"] == "x":\n    return block("no")\n'
                'return payload.get("arguments", {})'
            ),
            HookInputs(False, frozenset({"name", "arguments"})),
        ),
        (
            handle('return payload["arguments"]["path"]'),
            HookInputs(False, frozenset({"arguments"})),
        ),
        (handle("return s.payload"), HookInputs(False, frozenset())),  # an attribute, not the name
        # the parameters are e and p; payload is an (undefined) global
        (handle('return payload.get("result")', "e, p"), HookInputs(False, frozenset())),
        (handle("return p.get('result')", "e, p"), HookInputs(False, frozenset({"result"}))),
        (handle("# payload is not read here\nreturn None"), HookInputs(False, frozenset())),
        (handle('x = "payload"\nreturn None'), HookInputs(False, frozenset())),
    ],
)
def test_what_a_hook_can_reach(script: str, expected: HookInputs) -> None:
    assert hook_inputs(script) == expected


@pytest.mark.parametrize(
    "script",
    [
        handle("return modify(payload)"),  # passed on whole
        handle("for k in payload:\n    pass"),  # iterated
        handle('return "name" in payload'),  # membership
        handle("return payload[k]"),  # a computed key
        handle('return payload["a" "b"]'),  # implicit concatenation
        handle('return payload.get("a", payload)'),  # the payload as a default
        handle("payload = {}\nreturn payload['x']"),  # reassigned
        handle("return [payload][0]['x']"),  # aliased through a list
        handle("return json.encode(payload)"),  # handed to a built-in
        handle("def inner(payload):\n    return payload\nreturn inner({})"),  # shadowed
        handle("return lambda payload: payload"),  # shadowed by a lambda
        handle("return f'{payload}'"),  # f-string (not Starlark here)
        "def helper(payload):\n    return payload['x']\n" + handle("return helper(payload)"),
        handle("return None", "event, payload, extra = 1"),  # another signature
        handle("return None", "*args"),
        handle("return None") + handle("return payload"),  # defined twice
        "def handle(event, payload):\n    return (\n",  # does not tokenize
        "x = 1\n",  # no handle at all
    ],
)
def test_anything_unproven_gets_the_whole_payload(script: str) -> None:
    assert hook_inputs(script).keys is None


class Recorder:
    """A runtime that records what each hook was handed (the seam: no Starlark)."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, Any]] = []

    def run_hook(
        self,
        script: str,
        filename: str,
        line: int,
        event: Any,
        payload: Any,
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        self.seen.append((event, payload))
        return Outcome(status="ok", value=None)

    def eval_when(self, *a: Any) -> Outcome:
        return Outcome(status="ok", value=True)


def run_chain(script: str, payload: Mapping[str, Any]) -> tuple[Any, Any]:
    spec = HookSpec(name="h", event="tool.pre", script=script, source=Source(path="h.md"))
    rt = Recorder()
    HookChain([spec]).run(
        "tool.pre",
        payload,
        rt,  # type: ignore[arg-type]
        lambda h: CallContext(config=harness.Config()),
    )
    return rt.seen[0]


PAYLOAD = {"id": "c1", "name": "write", "arguments": {"content": "x" * 100_000}, "session": "s"}


def test_a_hook_reading_the_name_is_not_handed_the_arguments() -> None:
    assert run_chain(handle('return block(payload["name"])'), PAYLOAD) == (
        UNUSED,
        {"name": "write"},
    )


def test_unused_parameters_are_handed_a_placeholder() -> None:
    assert run_chain(handle("return allow()"), PAYLOAD) == (UNUSED, UNUSED)
    assert run_chain(handle("return block(event)"), PAYLOAD) == ("tool.pre", UNUSED)


def test_a_hook_reading_nothing_is_called_without_arguments() -> None:
    script = handle("return allow()")
    source, entry, args = hook_call(script, UNUSED, UNUSED)
    assert (entry, args) == (NOARGS_ENTRY, ()) and source.startswith(script)
    # The placeholder of one unused parameter is 0, the cheapest value to convert.
    assert hook_call(script, "tool.pre", UNUSED) == (script, "handle", ("tool.pre", 0))
    # A script that already uses the wrapper's name keeps the plain call.
    taken = script + "harness_noargs = 1\n"
    assert hook_call(taken, UNUSED, UNUSED) == (taken, "handle", (0, 0))


def test_a_hook_using_the_whole_payload_gets_all_of_it() -> None:
    assert run_chain(handle("return modify(payload)"), PAYLOAD) == ("tool.pre", PAYLOAD)


def test_missing_keys_stay_missing() -> None:
    event, seen = run_chain(handle('return payload.get("result", "none")'), PAYLOAD)
    assert seen == {}


# -- end to end: the decisions are the ones the whole payload would give ---------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ('return block(payload["name"] + ":" + str(payload.get("result", "none")))', "echo:none"),
        (
            "return block(str(sorted(payload.keys())))",
            '["args", "arguments", "id", "name", "session"]',
        ),
        ("return block(event)", "tool.pre"),
        ('return block(payload["arguments"]["path"] + "/" + event)', "p/tool.pre"),
        ('return block(str(payload["missing"]))', None),  # a missing key is still an error
    ],
)
def test_narrowed_hooks_decide_as_on_the_whole_payload(
    make_harness: MakeHarness, body: str, reason: str | None
) -> None:
    # A key tool.pre never carries is a validate error (payload-key-unknown); the runtime
    # must still behave as on the whole payload.
    refused = '"missing"' in body or '"result"' in body
    h = make_harness(
        tools={"echo": ECHO}, hooks={"h": hook("tool.pre", body)}, refused_guards=refused
    )
    r = h.call("echo", {"path": "p"})
    if reason is None:
        assert r.error is not None and 'hook "h" failed' in r.error and "missing" in r.error
    else:
        assert r.error == f'blocked by hook "h": {reason}'


def test_a_helper_with_the_same_parameter_name_sees_everything(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={
            "h": (
                "---\nevent: tool.pre\nscript: |\n"
                "  def describe(payload):\n      return str(sorted(payload.keys()))\n"
                "  def handle(event, payload):\n      return block(describe(payload))\n---\nh\n"
            )
        },
    )
    assert h.call("echo", {"path": "p"}).error == (
        'blocked by hook "h": ["args", "arguments", "id", "name", "session"]'
    )


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
def test_hooks_reading_nothing_decide_and_fail_as_written(tmp_path: Path, isolation: str) -> None:
    for body, expected in (
        ('return block("no")', 'blocked by hook "h": no'),
        ('x = 1\nfail("boom")', None),
    ):
        root = tmp_path / f"p{len(body)}"
        write_project(root, tools={"echo": ECHO}, hooks={"h": hook("tool.pre", body)})
        (root / "harness.md").write_text(f"---\nruntime: {{isolation: {isolation}}}\n---\n")
        with harness.load(root) as h:
            err = h.call("echo", {"path": "p"}).error
        if expected is not None:
            assert err == expected
        else:
            # fail() is on line 6 of the hook file (---, event, script, def, x = 1, fail)
            assert (
                err is not None
                and err.startswith('hook "h" failed: boom (at ')
                and err.endswith("h.md:6)")
            ), err
