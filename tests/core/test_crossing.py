"""Tool results crossing the Starlark boundary as JSON (runtime/crossing.py): always
exactly the value the plain starlark-pyo3 conversion gives."""

from __future__ import annotations

import math
from typing import Any

import pytest
import starlark as sl
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.config import Config
from harness.runtime import crossing, engine
from harness.runtime.context import CallContext
from harness.runtime.engine import Engine

ENGINE = Engine()
ECHO = 'def run(args):\n    return args["v"]\n'


def _ctx() -> CallContext:
    return CallContext(config=Config(), tool="t")


def typed(v: Any) -> Any:
    """A form where 1, 1.0, True, 0.0 and -0.0 all differ (== does not tell them apart)."""
    if isinstance(v, float):
        return ("float", repr(v))
    if isinstance(v, dict):
        return ("dict", [(typed(k), typed(x)) for k, x in v.items()])
    if isinstance(v, list | tuple):
        return (type(v).__name__, [typed(x) for x in v])
    return (type(v).__name__, v)


def both(source: str, args: dict[str, Any]) -> tuple[Any, Any]:
    """(the engine's result, the plain conversion's result) of ``run(args)``."""
    got = ENGINE.call("tool", source, "t.md", 1, "run", (args,), _ctx(), 5000)
    # the first list or dict result switches the module to the wrapper: call again
    again = ENGINE.call("tool", source, "t.md", 1, "run", (args,), _ctx(), 5000)
    assert (again.status, typed(again.value)) == (got.status, typed(got.value))
    frozen = ENGINE.compile("tool", source, "t.md", 1)
    try:
        plain: Any = frozen.call("run", args)
    except Exception as exc:  # noqa: BLE001 - compared as an error below
        plain = exc
    return got, plain


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 80), max_value=1 << 80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
)
# Python dicts reach Starlark with string keys only; other keys: the literals below.
keys = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(values)
def test_same_value_as_the_plain_conversion(v: Any) -> None:
    got, plain = both(ECHO, {"v": v})
    if isinstance(plain, Exception):  # e.g. a bare float("inf"): an error on both paths
        assert got.status == "error"
        return
    assert got.status == "ok", got.error
    assert typed(got.value) == typed(plain)


def test_large_lists_of_dicts_take_the_json_path(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def spy(text: str) -> Any:
        seen.append(text)
        return crossing.json.loads(text)

    monkeypatch.setattr(crossing, "_loads", spy)
    rows = [
        {"path": f"d/é{i}.py", "line": i, "text": "x" * i, "n": 1 << 60, "f": i / 7}
        for i in range(500)
    ]
    got, plain = both(ECHO + "# rows\n", {"v": rows})  # plain first, then wrapped
    assert got.value == rows == plain
    assert typed(got.value) == typed(rows)
    assert len(seen) == 1  # the second call: decoded once, in Python


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("(1, [2, (3,)])", [1, [2, [3]]]),
        ("struct(a = 1, b = (2,))", {"a": 1, "b": [2]}),
        ("{1: 2, True: 3, 1.5: 4}", {1: 3, 1.5: 4}),  # True == 1 as a Starlark key
        ("[float('nan'), float('inf')]", [None, None]),
        ("{'a': float('nan')}", {"a": None}),
        ("'text'", "text"),
        ("None", None),
        ("(1 << 70)", 1 << 70),
        ("{'a': {None: 1}, 'b': 'x' * 30}", {"a": {None: 1}, "b": "x" * 30}),
        ("['None: ', {'n': None}, 'y' * 30]", ["None: ", {"n": None}, "y" * 30]),
    ],
)
def test_values_json_would_change_take_the_plain_path(expr: str, expected: Any) -> None:
    got, plain = both(f"def run(args):\n    return {expr}\n", {})
    assert got.status == "ok", got.error
    assert typed(got.value) == typed(plain)
    assert got.value == expected or (isinstance(expected, float) and math.isnan(got.value))


@pytest.mark.parametrize(
    ("expr", "kind"),
    [
        ("[1, {'f': len}]", "function"),
        ("range(3)", "range"),
    ],
)
def test_values_that_are_not_json_are_script_errors(expr: str, kind: str) -> None:
    src = f"def run(args):\n    return {expr} if args else [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
    assert ENGINE.call("tool", src, "t.md", 1, "run", ({},), _ctx(), 5000).status == "ok"
    got = ENGINE.call("tool", src, "t.md", 1, "run", ({"x": 1},), _ctx(), 5000)  # wrapped
    assert ENGINE.compile("tool", src, "t.md", 1) in ENGINE._json_run
    assert got.status == "error"
    assert got.error == f"run() returned a value that is not JSON-compatible ({kind})"


def test_a_key_json_refuses_is_an_error_on_both_paths() -> None:
    src = "def run(args):\n    return {(1, 2): 3} if args else [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
    plain = ENGINE.call("tool", src, "u.md", 1, "run", ({"x": 1},), _ctx(), 5000)
    assert plain.status == "crash"  # starlark-pyo3 raises TypeError("unhashable type")
    assert ENGINE.call("tool", src, "u.md", 1, "run", ({},), _ctx(), 5000).status == "ok"
    got = ENGINE.call("tool", src, "u.md", 1, "run", ({"x": 1},), _ctx(), 5000)
    assert got.status == "error"
    assert got.error == (
        "run() returned a value that is not JSON-compatible (a dict key that is not a string)"
    )


@pytest.mark.parametrize("source", ["x = 1\n", "run = 1\n", "def other(args):\n    return 1\n"])
def test_no_run_function_is_reported_as_before(source: str) -> None:
    got, plain = both(source, {})
    assert got.status == "error"
    assert isinstance(plain, Exception)
    assert got.error == engine._failure(plain, "run", 0.0, 5000).error
    assert "harness" not in (got.error or "")


def test_faults_inside_run_keep_their_location() -> None:
    src = "def run(args):\n    x = [1]\n    return x[5]\n"
    got = ENGINE.call("tool", src, "tools/t.md", 10, "run", ({},), _ctx(), 5000)
    assert got.status == "error"
    assert got.error is not None and got.error.endswith("(at tools/t.md:12)")


def test_only_tools_returning_lists_or_dicts_switch_to_the_wrapper() -> None:
    src = 'def run(args):\n    return args["a"] + 1\n'
    for _ in range(3):
        assert ENGINE.call("tool", src, "t.md", 1, "run", ({"a": 1},), _ctx(), 5000).value == 2
    frozen = ENGINE.compile("tool", src, "t.md", 1)
    assert frozen in ENGINE._json_able and frozen not in ENGINE._json_run
    src = 'def run(args):\n    return {"a": [args["a"]] * 50}\n'
    first = ENGINE.call("tool", src, "t.md", 1, "run", ({"a": 1},), _ctx(), 5000)
    again = ENGINE.call("tool", src, "t.md", 1, "run", ({"a": 1},), _ctx(), 5000)
    assert first.value == again.value == {"a": [1] * 50}
    assert ENGINE.compile("tool", src, "t.md", 1) in ENGINE._json_run


# -- built-in results going into Starlark -------------------------------------------


def _into(value: Any) -> tuple[str, str]:
    """repr in Starlark of ``value`` handed over by a rows built-in and by a plain one
    (repr shows key order, and tells 1 from 1.0 and True)."""
    module = sl.Module()
    crossing.prepare(module, sl.Dialect.standard())
    crossing.bind_builtin(module, sl.Dialect.standard(), "t", "via", lambda: value)
    module.add_callable("__t_raw", lambda: value)
    src = "def run():\n    return [repr(__t_via()), repr(__t_raw())]\n"
    sl.eval(module, sl.parse("x", src, sl.Dialect.standard()), crossing._GLOBALS)
    via, raw = module.freeze().call("run")
    return via, raw


_row_keys = st.lists(keys, min_size=0, max_size=4, unique=True)
# A cell's kind decides whether rows are used (to_starlark); a nested cell only has to be
# there (any list or dict cell means the plain conversion, on both sides of the
# comparison), how deep it nests does not matter here: the deep values are
# test_same_value_as_the_plain_conversion's. One level keeps an example cheap to draw.
_cells = scalars | st.lists(scalars, max_size=3) | st.dictionaries(keys, scalars, max_size=3)


@st.composite
def _lists_of_dicts(draw: st.DrawFn) -> list[Any]:
    ks = draw(_row_keys)
    n = draw(st.integers(0, 12))
    rows = [
        dict(zip(ks, draw(st.lists(_cells, min_size=len(ks), max_size=len(ks))), strict=True))
        for _ in range(n)
    ]
    if rows and draw(st.booleans()):  # sometimes not uniform: reordered or extra keys
        i = draw(st.integers(0, len(rows) - 1))
        rows[i] = (
            dict(reversed(list(rows[i].items())))
            if draw(st.booleans())
            else {**rows[i], "extra": 1}
        )
    return rows


@settings(max_examples=300, deadline=None)
@given(_lists_of_dicts())
def test_builtin_results_reach_starlark_unchanged(value: list[Any]) -> None:
    try:
        via, raw = _into(value)
    except sl.StarlarkError:
        return  # e.g. NaN inside: starlark-pyo3 cannot take it either way
    assert via == raw


@pytest.mark.parametrize(
    ("value", "used"),
    [
        ([{"path": f"é/{i}", "line": i, "text": 'x\u2028\x00🎉"\\'} for i in range(8)], True),
        ([{"z": 1, "a": (1 << 63) - 1, "m": -(1 << 63), "n": None, "b": True}] * 9, True),
        ([{"n": 1 << 63}] * 9, False),
        ([{"f": 0.5}] * 9, False),
        ([{"l": [1]}] * 9, False),
        ([{"path": "a"}] * 7, False),
        ([{"path": "bad\udcff.py"}] * 9, False),
        ([{"a": 1, "b": 2}] * 4 + [{"b": 2, "a": 1}] * 5, False),
    ],
)
def test_rows_are_used_only_where_exact(value: list[Any], used: bool) -> None:
    assert isinstance(crossing.to_starlark(value), str) is used
    if "\udcff" in str(value[0].get("path")):  # starlark-pyo3 refuses it either way
        module = sl.Module()
        module.add_callable("raw", lambda: value)
        with pytest.raises(sl.StarlarkError, match="surrogate"):
            sl.eval(module, sl.parse("x", "raw()", sl.Dialect.standard()), crossing._GLOBALS)
        with pytest.raises(sl.StarlarkError, match="surrogate"):
            _into(value)
        return
    via, raw = _into(value)
    assert via == raw


def test_non_string_keys_never_go_as_rows() -> None:
    value = [{1: 2}] * 9
    assert crossing.to_starlark(value) is value


def test_search_builtins_through_a_script_match_the_python_results(tmp_path: Any) -> None:
    from harness.runtime.builtins import fs

    (tmp_path / "a").mkdir()
    for i in range(12):
        (tmp_path / "a" / f"x{i}.py").write_text("import os\nx = 1\nimport é\n" * 5)
    (tmp_path / "a" / "sub").mkdir()
    ctx = CallContext(config=Config(root=tmp_path, workspace=tmp_path), tool="t")
    src = (
        'def run(args):\n    r = [fs.grep("import", max_matches = 1000),\n'
        '         fs.glob("**/*", details = True), fs.list("a")]\n'
        "    return [r, [[repr(x) for x in part] for part in r]]\n"
    )
    got = ENGINE.call("tool", src, "t.md", 1, "run", ({},), ctx, 5000)
    assert got.status == "ok", got.error
    expected = [
        fs.grep(ctx, "import", max_matches=1000),
        fs.glob(ctx, "**/*", details=True),
        fs.list_(ctx, "a"),
    ]
    assert got.value[0] == expected
    assert all(isinstance(crossing.to_starlark(part), str) for part in expected)  # as rows
    assert [list(d) for part in got.value[0] for d in part] == [
        list(d) for part in expected for d in part
    ]  # key order kept
    bad = ENGINE.call(
        "tool", 'def run(args):\n    return fs.grep("(")\n', "t.md", 4, "run", ({},), ctx, 5000
    )
    assert bad.status == "error"
    assert bad.error is not None and bad.error.startswith('fs.grep: invalid RE2 pattern "("')
    assert bad.error.endswith("(at t.md:5)")
