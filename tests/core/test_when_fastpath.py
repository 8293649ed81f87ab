"""The Python fast path for ``when`` must agree with Starlark on everything it accepts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.config import Config
from harness.runtime.context import CallContext
from harness.runtime.engine import Engine, when_source
from harness.runtime.when import compile_when

ENGINE = Engine()

EXPRESSIONS = [
    'payload["name"] == "echo"',
    'payload["name"] != "echo" and event == "tool.pre"',
    'payload["arguments"]["path"].startswith("/secret")',
    'payload["arguments"].get("n", 0) == 1',
    'payload["arguments"].get("n") == True',
    'payload["arguments"].get("flag") == 1',
    '"rm" in payload["arguments"].get("cmd", "")',
    'payload["name"] in ["a", "echo", "b"]',
    'payload["name"] not in ("a", "b")',
    'len(payload["arguments"]) > 1',
    'not payload["arguments"]',
    'payload["arguments"].get("n", 0) >= 2 or payload["name"] == "x"',
    'payload["missing"] == 1',
    'payload["arguments"]["path"].lower().endswith(".md")',
    'payload["arguments"].get("n", "") < 3',
    '"x" if payload["name"] == "echo" else ""',
    'payload["arguments"].get("cmd") and payload["arguments"]["cmd"].startswith("git")',
    '1 in payload["arguments"].get("list", [])',
    # string-literal comparisons on non-string values (the specialised shapes)
    'payload["arguments"].get("flag") == "True"',
    'payload["arguments"].get("n") != "1"',
    'payload["arguments"]["n"] == "x"',
    'payload["id"] != "c1"',
    'event != "tool.pre"',
]

values = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(
    ["", "git status", "/secret/x", "README.MD", "rm -rf /", "echo"]),
    st.lists(st.one_of(st.integers(0, 2), st.booleans()), max_size=3))
arguments = st.dictionaries(st.sampled_from(["path", "n", "cmd", "flag", "list"]), values,
                            max_size=4)


def starlark_eval(expr: str, payload: dict[str, Any]) -> tuple[str, Any]:
    ctx = CallContext(config=Config())
    out = ENGINE.call("when", when_source(expr), "h.md", 1, "harness_when",
                      ("tool.pre", payload), ctx, 0)
    return out.status, out.value


def fast_eval(expr: str, payload: dict[str, Any]) -> tuple[str, Any]:
    fn = compile_when(expr)
    assert fn is not None, expr
    try:
        return "ok", fn({"event": "tool.pre", "payload": payload})
    except Exception:  # noqa: BLE001 - any failure is a failed hook
        return "error", None


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_expressions_take_the_fast_path(expr: str) -> None:
    assert compile_when(expr) is not None


@settings(max_examples=150, deadline=None)
@given(expr=st.sampled_from(EXPRESSIONS), args=arguments,
       name=st.sampled_from(["echo", "a", "x"]))
def test_fast_path_agrees_with_starlark(expr: str, args: dict[str, Any], name: str) -> None:
    payload = {"id": "c1", "name": name, "arguments": args, "session": "s"}
    slow, fast = starlark_eval(expr, payload), fast_eval(expr, payload)
    assert slow[0] == fast[0], (expr, payload, slow, fast)
    if slow[0] == "ok":
        assert slow[1] == fast[1] and type(slow[1]) is type(fast[1]), (expr, payload, slow, fast)


@pytest.mark.parametrize("expr", ['fs.read("x") == ""', "payload['a'] + 1 == 2", "1 < 2 < 3",
                                  'json.encode(payload) == ""', "[x for x in payload]"])
def test_anything_else_falls_back_to_starlark(expr: str) -> None:
    assert compile_when(expr) is None
