"""The Python fast path for ``when`` equals Starlark (issue 10, item 4).

Every test here compares with the real interpreter: wherever the fast path answers,
Starlark must give the same status and the same value (same type too: ``True`` is not
``1``, ``1.0`` is not ``1``); where it cannot answer exactly it falls back, and the
runtimes then evaluate the expression in Starlark.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness.config import Config
from harness.runtime.context import CallContext
from harness.runtime.engine import Engine, InProcessRuntime, when_source
from harness.runtime.when import FALLBACK_ERRORS, WHITE_SPACE, compile_when, fast_when

ENGINE = Engine()
FALLBACK = ("fallback", None)

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
    'payload["arguments"].get("flag") == "True"',
    'payload["arguments"].get("n") != "1"',
    'payload["arguments"]["n"] == "x"',
    'payload["id"] != "c1"',
    'event != "tool.pre"',
    'payload["arguments"].get("timeout_ms", 0) > 60000',
    'payload["arguments"].get("cmd", "").strip() == ""',
    'payload["arguments"].get("cmd", "").startswith(("git", "rm"))',
    'payload["arguments"].get("list") == [True]',
    'payload["arguments"].get("list") == [1]',
    'payload["arguments"].get("list") == (1,)',
    'payload["arguments"].get("path", "x") in payload["arguments"]',
    'payload["arguments"].get("list", [])[0]',
    'payload["arguments"]',
    '[payload["name"], (1, "x")]',
]

# Characters where Python and Starlark disagree on whitespace and case.
WS = (
    "\t\n\x0b\x0c\r \x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u200a\u200b\u2028\u2029\u202f"
    "\u205f\u3000\ufeff"
)
TEXT = st.text(alphabet=st.sampled_from(list(WS) + list("abAB/.-é İßΣς𐀀")), max_size=6)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, 2.0, 600000.0, 9007199254740992.0]),
    TEXT,
    st.sampled_from(["", "git status", "/secret/x", "README.MD", "rm -rf /", "echo"]),
)
KEYS = ["path", "n", "cmd", "flag", "list", "timeout_ms"]
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)
    ),
    max_leaves=6,
)
ARGUMENTS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4)
PAYLOADS = st.builds(
    lambda name, args: {"id": "c1", "name": name, "arguments": args, "session": "s"},
    st.sampled_from(["echo", "a", "x"]),
    ARGUMENTS,
)

# Expressions of the supported shapes, built from parts (parenthesised, so the two
# languages cannot read them differently).
LIT_TEXT = st.text(alphabet=st.sampled_from(list(" \t\xa0\u2028abAé İß/")), max_size=4)
LITERALS = st.recursive(
    st.one_of(
        st.integers(-1, 3).map(str),
        st.just("9007199254740993"),
        LIT_TEXT.map(lambda s: f'"{s}"'),
        st.sampled_from(["True", "False", "None"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: "(" + ", ".join(xs) + ",)"),
    ),
    max_leaves=4,
)
ATOMS = st.one_of(
    st.just('payload["name"]'),
    st.just("event"),
    st.just('payload["arguments"]'),
    st.sampled_from(KEYS).map(lambda k: f'payload["arguments"]["{k}"]'),
    st.sampled_from(KEYS).map(lambda k: f'payload["arguments"].get("{k}")'),
    st.tuples(st.sampled_from(KEYS), LITERALS).map(
        lambda kd: f'payload["arguments"].get("{kd[0]}", {kd[1]})'
    ),
    LITERALS,
)
OPS = ["==", "!=", "<", "<=", ">", ">=", "in", "not in"]
EXPRS = st.recursive(
    ATOMS,
    lambda e: st.one_of(
        st.tuples(e, st.sampled_from(OPS), e).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        e.map(lambda x: f"not ({x})"),
        st.tuples(e, st.sampled_from(["and", "or"]), e).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        st.tuples(e, e, e).map(lambda t: f"({t[0]}) if ({t[1]}) else ({t[2]})"),
        e.map(lambda x: f"len({x})"),
        st.tuples(e, st.sampled_from(["lower", "upper", "strip"])).map(
            lambda t: f"({t[0]}).{t[1]}()"
        ),
        st.tuples(e, st.sampled_from(["startswith", "endswith"]), e).map(
            lambda t: f"({t[0]}).{t[1]}({t[2]})"
        ),
        st.tuples(e, e).map(lambda t: f"({t[0]})[{t[1]}]"),
        st.tuples(e, e).map(lambda t: f"({t[0]}).get({t[1]})"),
    ),
    max_leaves=5,
)


def starlark_eval(expr: str, payload: dict[str, Any]) -> tuple[str, Any]:
    ctx = CallContext(config=Config())
    out = ENGINE.call(
        "when", when_source(expr), "h.md", 1, "harness_when", ("tool.pre", payload), ctx, 0
    )
    return ("ok", out.value) if out.status == "ok" else ("error", out.error)


def fast_eval(expr: str, payload: dict[str, Any]) -> tuple[str, Any]:
    fn = compile_when(expr)
    if fn is None:
        return FALLBACK
    try:
        value = fn({"event": "tool.pre", "payload": payload})
    except FALLBACK_ERRORS:
        assert fast_when(expr, "tool.pre", payload, "h.md", 1) is None
        return FALLBACK
    return "ok", value


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types, all the way down (-0.0 is not 0.0 here either)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


def assert_agrees(expr: str, payload: dict[str, Any]) -> None:
    fast = fast_eval(expr, payload)
    if fast == FALLBACK:
        return  # Starlark decides: nothing to compare
    slow = starlark_eval(expr, payload)
    assert slow[0] == "ok", (expr, payload, slow, fast)
    assert same(slow[1], fast[1]), (expr, payload, slow, fast)


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_expressions_take_the_fast_path(expr: str) -> None:
    assert compile_when(expr) is not None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=st.sampled_from(EXPRESSIONS), payload=PAYLOADS)
def test_fast_path_agrees_with_starlark_on_mixed_payloads(
    expr: str, payload: dict[str, Any]
) -> None:
    assert_agrees(expr, payload)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=EXPRS, payload=PAYLOADS)
@example(
    expr='(payload["arguments"]["timeout_ms"]) > (60000)',
    payload={"id": "c1", "name": "x", "arguments": {"timeout_ms": 600000.0}, "session": "s"},
)
def test_fast_path_agrees_with_starlark_on_generated_expressions(
    expr: str, payload: dict[str, Any]
) -> None:
    assert_agrees(expr, payload)


# Disagreements the outside review found (issue 10, item 4), one of each kind.
REVIEW_CASES = [
    ('payload["arguments"]["timeout_ms"] > 60000', {"timeout_ms": 600000.0}),
    ('payload["arguments"]["timeout_ms"] == 600000', {"timeout_ms": 600000.0}),
    ('payload["arguments"]["n"] == 9007199254740993', {"n": 9007199254740992.0}),
    ('payload["arguments"]["n"] in [1, 2]', {"n": 1.0}),
    ('payload["arguments"]["cmd"].strip() == ""', {"cmd": "\x1c"}),
    ('payload["arguments"]["cmd"].strip() == ""', {"cmd": "\x1f rm"}),
    ('payload["arguments"]["cmd"].startswith(["rm"])', {"cmd": "rm -rf /"}),
    ('payload["arguments"]["cmd"].startswith([])', {"cmd": "rm"}),
    ("[True] == [1]", {}),
    ('payload["arguments"]["list"] == [1]', {"list": [True]}),
    ('payload["arguments"]["list"] == (1, 2)', {"list": [1, 2]}),
    ('payload["arguments"]["a"] == payload["arguments"]["b"]', {"a": {"x": 1}, "b": {"x": True}}),
    ('payload["arguments"]["a"] < payload["arguments"]["b"]', {"a": [1], "b": [2]}),
    ('payload["arguments"]["a"] < payload["arguments"]["b"]', {"a": False, "b": True}),
    ('payload["arguments"]["cmd"].lower() == "i̇"', {"cmd": "İ"}),
    ('payload["arguments"]["cmd"].upper()', {"cmd": "ß"}),
    ('1 in payload["arguments"]', {"1": 0}),
    ("1_000 == 1000", {}),
    ('"a" "b" == "ab"', {}),
]


@pytest.mark.parametrize(("expr", "args"), REVIEW_CASES)
def test_review_disagreements_are_gone(expr: str, args: dict[str, Any]) -> None:
    payload = {"id": "c1", "name": "x", "arguments": args, "session": "s"}
    assert_agrees(expr, payload)
    # And through a runtime: the answer is Starlark's, whichever path took it.
    runtime = InProcessRuntime()
    out = runtime.eval_when(
        expr, "h.md", 1, "tool.pre", payload, CallContext(config=Config()), 1000
    )
    slow = starlark_eval(expr, payload)
    assert (out.status == "ok") is (slow[0] == "ok"), (expr, out, slow)
    if slow[0] == "ok":
        assert same(out.value, slow[1])


def test_common_shapes_stay_on_the_fast_path() -> None:
    # Falling back is always correct; it must stay rare for JSON strings and ints.
    payload = {
        "id": "c1",
        "name": "run_command",
        "session": "s",
        "arguments": {"command": "git status", "timeout_ms": 5000},
    }
    for expr in (
        'payload["name"] == "run_command"',
        'payload["name"] in ("a", "b")',
        'payload["arguments"].get("timeout_ms", 0) > 60000',
        '"rm" in payload["arguments"]["command"]',
        'payload["arguments"]["command"].strip().startswith("git")',
    ):
        assert fast_eval(expr, payload) != FALLBACK, expr


def test_strip_removes_exactly_what_starlark_strips() -> None:
    # Every code point once: Starlark strips Unicode White_Space (Rust's trim).
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    found = starlark_eval('[c for c in payload["s"].elems() if not c.strip()]', {"s": text})
    assert found[0] == "ok"
    assert sorted(found[1]) == sorted(WHITE_SPACE)


@pytest.mark.parametrize(
    "expr",
    [
        'fs.read("x") == ""',
        "payload['a'] + 1 == 2",
        "1 < 2 < 3",
        'json.encode(payload) == ""',
        "[x for x in payload]",
        '"a\\tb" == payload["x"]',
        "0x10 == 16",
        "1.5 > 1",
        'payload["a"][-1]',
        'r"x" == "x"',
    ],
)
def test_anything_else_falls_back_to_starlark(expr: str) -> None:
    assert compile_when(expr) is None
