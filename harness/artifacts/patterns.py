"""Regular expressions inside JSON Schemas: one linear-time engine wherever they run.

A schema ``pattern`` or ``patternProperties`` key comes from a tool file, a model
(``meta.tool_register``) or an upstream MCP server, and is matched against text a model
or a server chose. A backtracking engine can take years on 60 characters
(``^(\\w+\\s?)*$``) while holding the GIL, so none is ever used (issue 22 item 3):

- jsonschema-rs (the accept path of every call, the metaschema and compile checks) is
  always built through :func:`rs_validator`, with :class:`jsonschema_rs.RegexOptions`:
  Rust's ``regex`` crate, linear in the input (its default, ``fancy-regex``, backtracks);
- pure-Python ``jsonschema`` (which explains a failure in its wording, and which the MCP
  client runs on an upstream server's structured results) reaches ``re.search`` from
  ``pattern``, ``patternProperties``, ``additionalProperties`` and
  ``unevaluatedProperties``. :func:`install` gives those modules an ``re`` whose
  ``search`` is RE2's (:func:`search`); ``tests/security/test_attack3_redos.py`` checks
  that jsonschema reaches ``re`` through nothing else. Its ``regex`` format checks with
  RE2 too (:func:`format_checker`).

A pattern these engines cannot run (lookarounds, backreferences) is refused up front:
:func:`pattern_problem` says why, for ``harness validate`` (file, line, parameter),
``meta.tool_register`` and upstream listings (the tool's name). ECMA-262 escapes RE2
spells differently (``\\uXXXX``, ``\\u{X}``, ``\\cX``) are translated (:func:`to_re2`).
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Iterator, Mapping
from functools import cache, lru_cache
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False

LINEAR_HINT = (
    "harness runs schema patterns with a linear-time engine (RE2), which has no "
    "lookarounds ((?=, (?!, (?<=, (?<!), backreferences (\\1) or possessive repeats; "
    "rewrite the pattern without them"
)


SYNTAX_HINT = (
    "schema patterns use ECMA-262 (JavaScript) syntax as RE2 reads it; escape a literal "
    "( ) [ ] { } with a backslash"
)


class PatternError(ValueError):
    """A pattern the linear-time engines cannot run."""


# -- one engine -----------------------------------------------------------------------


def to_re2(pattern: str) -> str:
    """``pattern`` (ECMA-262 syntax) in RE2 syntax: ``\\uXXXX``, ``\\u{X}`` and ``\\cX``
    become ``\\x{...}``; the rest is the same. (A surrogate pair is refused: Rust's
    engine, which accepts arguments first, refuses it too.)"""
    if "\\" not in pattern:
        return pattern
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        code, used = _escape(pattern, i)
        if code is None:
            out.append(pattern[i : i + 2])
            i += 2
        else:
            out.append(f"\\x{{{code:X}}}")
            i += used
    return "".join(out)


_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")  # fixed patterns: Python's re is safe here
_BRACED = re.compile(r"\{([0-9A-Fa-f]{1,6})\}")


def _escape(pattern: str, i: int) -> tuple[int | None, int]:
    """The code point of the ECMA escape at ``pattern[i]`` and its length, or None."""
    kind = pattern[i + 1]
    if kind == "c" and i + 2 < len(pattern) and pattern[i + 2].isascii():
        if pattern[i + 2].isalpha():
            return ord(pattern[i + 2]) % 32, 3
    if kind != "u":
        return None, 2
    braced = _BRACED.match(pattern, i + 2)
    if braced:
        return int(braced.group(1), 16), 2 + len(braced.group(0))
    if not _HEX4.match(pattern, i + 2):
        return None, 2
    return int(pattern[i + 2 : i + 6], 16), 6


@lru_cache(maxsize=4096)
def compiled(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (cached); :class:`PatternError` if RE2 refuses it."""
    try:
        return re2.compile(to_re2(pattern), options=_OPTIONS)
    except re2.error as exc:
        why = exc.args[0] if exc.args else "refused"
        if isinstance(why, bytes):
            why = why.decode("utf-8", "replace")
        raise PatternError(str(why)) from None


def search(pattern: str, text: str, flags: int = 0) -> Any:
    """``re.search`` with RE2: linear in ``text``, whatever ``pattern`` is."""
    if flags:
        raise PatternError("schema patterns take no flags")
    return compiled(pattern).search(text)


@cache
def rs_options() -> Any:
    import jsonschema_rs

    return jsonschema_rs.RegexOptions()


def rs_validator(schema: Any, **options: Any) -> Any:
    """A jsonschema-rs validator whose patterns run on Rust's linear ``regex`` engine;
    the only way harness builds one."""
    import jsonschema_rs

    return jsonschema_rs.validator_for(schema, pattern_options=rs_options(), **options)


@cache
def pattern_problem(pattern: str) -> str | None:
    """Why harness cannot run ``pattern`` (both engines must compile it), or None."""
    reason = None
    try:
        compiled(pattern)
    except PatternError as exc:
        reason = str(exc)
    if reason is None:
        try:
            rs_validator({"pattern": pattern})
        except Exception:  # noqa: BLE001 - any refusal is the answer
            reason = "Rust's regex engine refuses it"
    if reason is None:
        return None
    hint = LINEAR_HINT if reason.startswith(_BACKTRACKING) else SYNTAX_HINT
    return f"pattern {json.dumps(pattern)} cannot be used ({reason}): {hint}"


# How RE2 refuses what only a backtracking engine runs: lookarounds and atomic groups,
# backreferences (\1, \k<name>), possessive repeats.
_BACKTRACKING = ("invalid perl operator", "invalid escape sequence: \\", "bad repetition operator")


def schema_patterns(schema: Any) -> Iterator[tuple[tuple[Any, ...], str]]:
    """``(key path, pattern)`` of every ``pattern`` and ``patternProperties`` key in
    ``schema``, wherever it nests (``properties``, ``$defs``, ``items``, ...)."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(schema, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, list):
            stack.extend((sub, (*path, i)) for i, sub in enumerate(node))
            continue
        if not isinstance(node, Mapping):
            continue
        for key, value in node.items():
            at = (*path, key)
            if key == "pattern" and isinstance(value, str):
                yield at, value
            elif key == "patternProperties" and isinstance(value, Mapping):
                yield from ((at, p) for p in value if isinstance(p, str))
            if key not in ("enum", "const", "default", "examples"):  # values, not schemas
                stack.append((value, at))


def schema_problem(schema: Any) -> str | None:
    """The first pattern of ``schema`` harness cannot run, explained; None if none."""
    for _path, pattern in schema_patterns(schema):
        why = pattern_problem(pattern)
        if why:
            return why
    return None


# -- pure-Python jsonschema -----------------------------------------------------------

# What jsonschema's keyword modules see as ``re``: RE2's search, the rest of ``re``.
_SHIM = types.SimpleNamespace(**{k: getattr(re, k) for k in dir(re) if not k.startswith("__")})
_SHIM.search = search
# The modules of jsonschema that run schema patterns (through ``re.search`` only).
JSONSCHEMA_PATTERN_MODULES = (
    "jsonschema._keywords",
    "jsonschema._utils",
    "jsonschema._legacy_keywords",
)


@cache
def install() -> Any:
    """Make pure-Python jsonschema run schema patterns with RE2 (once per process);
    returns the ``jsonschema`` module."""
    import importlib

    import jsonschema

    for name in JSONSCHEMA_PATTERN_MODULES:
        importlib.import_module(name).re = _SHIM  # type: ignore[attr-defined]
    return jsonschema


def _is_regex(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    compiled(instance)
    return True


@cache
def format_checker() -> Any:
    """jsonschema's format checker with ``regex`` checked by RE2, not Python's ``re``."""
    jsonschema = install()
    checker = jsonschema.FormatChecker()
    checker.checks("regex", raises=PatternError)(_is_regex)
    return checker


def python_validator(schema: Mapping[str, Any], *, formats: bool = False) -> Any:
    """A pure-Python Draft 2020-12 validator that runs patterns with RE2."""
    jsonschema = install()
    return jsonschema.Draft202012Validator(
        dict(schema), format_checker=format_checker() if formats else None
    )
