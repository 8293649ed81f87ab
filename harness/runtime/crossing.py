"""Large values crossing the Starlark boundary as one JSON string.

starlark-pyo3 converts a script's return value to Python value by value: about 11 µs
per small dict, 11 ms for the 1,000 matches ``search_files`` returns. Starlark's own
``json.encode`` (Rust) and Python's ``json.loads`` (C) move the same value in about a
sixth of that. So a tool's ``run`` is called through a small wrapper compiled into
its module (:data:`WRAPPER`): a list or dict result is encoded in Starlark, decoded
once in Python, and anything else comes back as before.

Depth: starlark-rust's ``json.encode`` recurses on the native stack with about 27 KiB
per level (a list 300 levels deep overflows 8 MiB: SIGSEGV). The wrapper encodes only
a value it has seen to be at most :data:`MAX_JSON_DEPTH` levels deep: fewer brackets in
its ``repr`` than that, or a level-by-level walk in Starlark (no recursion); anything
deeper takes the plain conversion (which stops at 1,000 levels with an error) and then
the nesting rule (``nesting.value_problem``) in the engine.

Exactness: the wrapper uses the JSON text only when ``json.decode(text) == value`` in
Starlark, i.e. when the value survives the round trip unchanged. Big integers, floats
(shortest round-trip form on both sides), unicode and nesting pass; tuples and
structs (which become lists and dicts), dicts with non-string keys (which JSON
stringifies) and NaN (never equal) take the old path, so the Python value is
always exactly what the old conversion gives. A value ``json.encode`` rejects is a
script fault on both paths (:func:`not_json` words it as the engine does).

The other way, the list of dicts ``fs.grep``, ``fs.glob`` and ``fs.list`` return
(:data:`JSON_BUILTINS`): 2,418 ``fs.glob`` dicts take 10.9 ms through starlark-pyo3.
Starlark's ``json.decode`` sorts each object's keys, so the dicts go over as rows
instead: ``[keys, [[value, ...], ...]]``, rebuilt in Starlark with
``dict(zip(keys, row))`` (key order kept; ~3 ms), or a dict literal for three keys
(half the time of ``dict(zip())``; the keys are distinct, so the dict is the same).
Only when every item is a dict
with the same string keys in the same order and every value a string, bool, None or
an integer within 64 bits (:func:`to_starlark`); anything else keeps the plain
conversion. Tool arguments are small; they keep the plain conversion too.
"""

from __future__ import annotations

import contextvars
import json
import re
from collections.abc import Callable
from typing import Any

import starlark as sl

from harness.runtime import nesting

ENTRY = "harness_run_json"
MIN_JSON_CHARS = 24  # below this (a key or two) the plain conversion is as fast
FILENAME = "<harness-result>"
MAX_JSON_DEPTH = nesting.MAX_VALUE_DEPTH
WRAPPER = f"""
MIN_JSON_CHARS = {MIN_JSON_CHARS}
def __harness_shallow(value):
    level = [value]
    for _ in range({MAX_JSON_DEPTH}):
        inner = []
        for item in level:
            if type(item) == "dict":
                item = item.values()
            for x in item:
                t = type(x)
                if t == "list" or t == "dict":
                    inner.append(x)
                elif t == "tuple" or t == "struct":
                    return False  # never equal to what json.decode makes: the plain path
        if not inner:
            return True
        level = inner
    return False
def {ENTRY}(args):
    value = run(args)
    kind = type(value)
    shown = repr(value) if kind == "list" or kind == "dict" else ""
    if shown and "None: " not in shown and (
        shown.count("[") + shown.count("{{") + shown.count("(") < {MAX_JSON_DEPTH}
        or __harness_shallow(value)
    ):
        text = __harness_native_json.encode(value)
        if len(text) >= MIN_JSON_CHARS and __harness_native_json.decode(text) == value:
            __harness_json(text)
            return None
    return value
"""

_GLOBALS = sl.Globals.extended_by([sl.LibraryExtension.StructType, sl.LibraryExtension.Json])
_box: contextvars.ContextVar[list[str]] = contextvars.ContextVar("harness_json_box")
_loads = json.loads


def _put(text: str) -> None:
    _box.get().append(text)


JSON_BUILTINS = frozenset({"fs.grep", "fs.glob", "fs.list"})  # return lists, never str
MIN_ROWS = 8  # fewer: the plain conversion is as fast
_BUILTIN = """
def __{mod}_{name}(*args, **kwargs):
    got = __{mod}_{name}_rows(*args, **kwargs)
    if type(got) != "string":
        return got
    got = __harness_native_json.decode(got)
    keys = got[0]
    if len(keys) == 3:  # fs.grep, fs.glob(details = True), fs.list: twice as fast
        k0, k1, k2 = keys
        return [{{k0: a, k1: b, k2: c}} for a, b, c in got[1]]
    return [dict(zip(keys, row)) for row in got[1]]
"""
_INT_MIN, _INT_MAX = -(1 << 63), 1 << 63  # json.decode: exact within, a float beyond
_dumps = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, check_circular=False, separators=(",", ":")
).encode


def to_starlark(value: Any) -> Any:
    """A list of uniform flat dicts as the JSON text ``[keys, rows]``, when Starlark's
    ``json.decode`` + ``dict(zip(keys, row))`` rebuilds exactly what starlark-pyo3
    makes of ``value``; otherwise ``value`` itself."""
    if type(value) is not list or len(value) < MIN_ROWS or type(value[0]) is not dict:
        return value
    keys = tuple(value[0])
    if any(type(k) is not str for k in keys):
        return value
    rows: list[list[Any]] = []
    append = rows.append
    for item in value:
        if type(item) is not dict or tuple(item) != keys:
            return value
        row = list(item.values())
        for x in row:
            t = type(x)
            if t is str or t is bool or x is None or (t is int and _INT_MIN <= x < _INT_MAX):
                continue
            return value  # a float (Starlark prints fewer digits), a list, ...
        append(row)
    text = _dumps([keys, rows])
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (an undecodable file name)
            return value
    return text


class RowsResult:
    """A bound built-in whose result is handed over by :func:`to_starlark`."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return to_starlark(self.fn(*args, **kwargs))


def bind_builtin(
    module: sl.Module, dialect: sl.Dialect, mod: str, name: str, fn: Callable[..., Any]
) -> None:
    """``__{mod}_{name}`` in ``module``: ``fn`` through :class:`RowsResult` and a
    Starlark function rebuilding its result (:func:`prepare` called first)."""
    module.add_callable(f"__{mod}_{name}_rows", RowsResult(fn))
    sl.eval(module, sl.parse(FILENAME, _BUILTIN.format(mod=mod, name=name), dialect), _GLOBALS)


def prepare(module: sl.Module, dialect: sl.Dialect) -> None:
    """Keep Starlark's own ``json`` module under a private name; call this before the
    prelude binds ``json`` to the harness built-ins (a Python round trip each)."""
    sl.eval(module, sl.parse(FILENAME, "__harness_native_json = json\n", dialect), _GLOBALS)
    module.add_callable("__harness_json", _put)


def add_wrapper(module: sl.Module, dialect: sl.Dialect) -> bool:
    """Compile :data:`WRAPPER` into ``module`` (evaluated, not frozen; :func:`prepare`
    called first) if it defines a function ``run``; True if it did."""
    try:
        kind = sl.eval(module, sl.parse(FILENAME, "type(run)", dialect), _GLOBALS)
        if kind != "function":
            return False  # no ``run`` function: the plain call reports it as before
        sl.eval(module, sl.parse(FILENAME, WRAPPER, dialect), _GLOBALS)
    except sl.StarlarkError:
        return False
    return True


def call(frozen: sl.FrozenModule, options: sl.EvalOptions, args: tuple[Any, ...]) -> Any:
    """``run(*args)`` through the wrapper: the same value the plain call returns."""
    box: list[str] = []
    token = _box.set(box)
    try:
        value = frozen.call_with(options, ENTRY, *args).value
    finally:
        _box.reset(token)
    if box:
        return _loads(box[0])
    return value


_KEY = re.compile(r"^error: key must be a string", re.MULTILINE)


def not_json(text: str) -> bool:
    """Whether a failure is ``json.encode`` refusing a dict key in the wrapper (the
    plain conversion refuses some keys differently; both are not JSON-compatible)."""
    return bool(_KEY.search(text)) and f"* {FILENAME}:" in text
