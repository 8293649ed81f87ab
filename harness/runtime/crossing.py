"""Large values crossing the Starlark boundary as one JSON string.

starlark-pyo3 converts a script's return value to Python value by value: about 11 µs
per small dict, 11 ms for the 1,000 matches ``search_files`` returns. Starlark's own
``json.encode`` (Rust) and Python's ``json.loads`` (C) move the same value in about a
sixth of that. So a tool's ``run`` is called through a small wrapper compiled into
its module (:data:`WRAPPER`): a list or dict result is encoded in Starlark, decoded
once in Python, and anything else comes back as before.

Exactness: the wrapper uses the JSON text only when ``json.decode(text) == value`` in
Starlark, i.e. when the value survives the round trip unchanged. Big integers, floats
(shortest round-trip form on both sides), unicode and nesting pass; tuples and
structs (which become lists and dicts), dicts with non-string keys (which JSON
stringifies) and NaN (never equal) take the old path, so the Python value is
always exactly what the old conversion gives. A value ``json.encode`` rejects is a
script fault on both paths (:func:`not_json` words it as the engine does).

Not done the other way (built-in results into Starlark): 2,418 ``fs.glob`` dicts take
10.7 ms through starlark-pyo3 against 3.8 ms as ``json.dumps`` + Starlark's
``json.decode``, but that decoder sorts each object's keys, so the dicts a script
sees would iterate (and print) in another order. Tool arguments are small; they keep
the plain conversion too.
"""

from __future__ import annotations

import contextvars
import json
import re
from typing import Any

import starlark as sl

ENTRY = "harness_run_json"
MIN_JSON_CHARS = 24  # below this (a key or two) the plain conversion is as fast
FILENAME = "<harness-result>"
WRAPPER = f"""
MIN_JSON_CHARS = {MIN_JSON_CHARS}
def {ENTRY}(args):
    value = run(args)
    kind = type(value)
    if (kind == "list" or kind == "dict") and "None: " not in repr(value):
        text = __harness_native_json.encode(value)
        if len(text) >= MIN_JSON_CHARS and __harness_native_json.decode(text) == value:
            __harness_json(text)
            return None
    return value
"""

_GLOBALS = sl.Globals.extended_by([sl.LibraryExtension.StructType,
                                   sl.LibraryExtension.Json])
_box: contextvars.ContextVar[list[str]] = contextvars.ContextVar("harness_json_box")
_loads = json.loads


def _put(text: str) -> None:
    _box.get().append(text)


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
