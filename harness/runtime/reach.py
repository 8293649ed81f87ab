"""Which payload keys a hook script can reach, found statically.

A hook receives the whole event payload, and every value in it is converted into
Starlark on every call: for a ``tool.pre`` hook that only looks at
``payload["name"]``, converting a 100 KB ``content`` argument is pure waste. When
the script touches its payload parameter only as ``payload["key"]`` or
``payload.get("key", ...)`` with literal keys, the hook is handed just those keys:
it cannot tell the difference, because no other key is reachable by any expression
it contains. Any other use of the name (passing it on, iterating it, ``in``,
``modify(payload)``, reassigning it, a second function with the same parameter
name), or anything the scan does not understand, means "the whole payload".
"""

from __future__ import annotations

import ast
import io
import tokenize
from functools import lru_cache
from typing import NamedTuple

import starlark as sl

_SKIP = frozenset(
    {
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.COMMENT,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
        tokenize.ENDMARKER,
    }
)


class HookInputs(NamedTuple):
    """What ``handle(event, payload)`` can observe of its arguments.

    ``event``: whether the event parameter is used at all. ``keys``: the payload
    keys it can read (empty: the payload parameter is never used), None for all.
    An unused parameter is passed as None: the script cannot tell.
    """

    event: bool
    keys: frozenset[str] | None


_ALL = HookInputs(True, None)


@lru_cache(maxsize=1024)
def hook_inputs(script: str, entry: str = "handle") -> HookInputs:
    """Scan ``script`` for what ``entry(event, payload)`` reads (see the module doc)."""
    try:
        toks = [
            t for t in tokenize.generate_tokens(io.StringIO(script).readline) if t.type not in _SKIP
        ]
    except (tokenize.TokenError, SyntaxError, IndentationError, ValueError):
        return _ALL
    params = _params(toks, entry)
    if params is None or params[0] == params[1]:
        return _ALL
    if passthrough(script, entry):  # only redact() uses it, in the caller: never sent
        return HookInputs(True, frozenset())
    event_param, param = params
    keys: set[str] = set()
    declared = False
    event_used = False
    for i, tok in enumerate(toks):
        if tok.type == tokenize.STRING and tok.string.lstrip("rRbBuU")[:1] not in "'\"":
            return _ALL  # an f-string (or something new) could name a parameter inside
        if tok.type != tokenize.NAME or tok.string not in params:
            continue
        if i > 0 and toks[i - 1].type == tokenize.OP and toks[i - 1].string == ".":
            continue  # an attribute called like the parameter (x.payload): not a use
        if _is_declaration(toks, i, entry):
            declared = True
            continue
        if tok.string == event_param:
            event_used = True
            continue
        key = _literal_key(toks, i)
        if key is None:
            return _ALL
        keys.add(key)
    return HookInputs(event_used, frozenset(keys)) if declared else _ALL


def payload_keys(script: str, entry: str = "handle") -> frozenset[str] | None:
    """The payload keys ``entry(event, payload)`` can read, or None for "all of them"."""
    return hook_inputs(script, entry).keys


def _params(toks: list[tokenize.TokenInfo], entry: str) -> tuple[str, str] | None:
    """The parameter names of ``def entry(a, b):``; None for any other shape."""
    found = None
    for i, tok in enumerate(toks):
        if tok.string == "def" and i + 1 < len(toks) and toks[i + 1].string == entry:
            if found is not None:
                return None  # defined twice: the last one wins at run time; do not guess
            shape = [t.string for t in toks[i + 2 : i + 8]]
            names = [t.type for t in toks[i + 3 : i + 6 : 2]]
            if not (
                len(shape) == 6
                and shape[0] == "("
                and shape[2] == ","
                and shape[4] == ")"
                and shape[5] == ":"
                and names == [tokenize.NAME, tokenize.NAME]
            ):
                return None
            found = (shape[1], shape[3])
    return found


def _is_declaration(toks: list[tokenize.TokenInfo], i: int, entry: str) -> bool:
    """Token ``i`` is a parameter in ``def entry(a, b):``."""
    if (
        i >= 3
        and toks[i - 3].string == "def"
        and toks[i - 2].string == entry
        and toks[i - 1].string == "("
    ):
        return True
    return (
        i >= 5
        and toks[i - 5].string == "def"
        and toks[i - 4].string == entry
        and toks[i - 3].string == "("
        and toks[i - 1].string == ","
    )


def _literal_key(toks: list[tokenize.TokenInfo], i: int) -> str | None:
    """The key of ``p["k"]`` or ``p.get("k"`` + ``,`` or ``)`` at token ``i``; else None."""
    rest = [t.string for t in toks[i + 1 : i + 5]]
    if len(rest) >= 3 and rest[0] == "[" and rest[2] == "]":
        lit = toks[i + 2]
    elif (
        len(rest) == 4
        and rest[:3] == [".", "get", "("]
        and i + 5 < len(toks)
        and toks[i + 5].string in (",", ")")
    ):
        lit = toks[i + 4]
    else:
        return None
    if lit.type != tokenize.STRING:
        return None
    try:
        value = ast.literal_eval(lit.string)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


# A hook that reads neither parameter is called through this wrapper, appended to its
# script: a call with no arguments converts nothing into Starlark (each argument
# crossing costs ~0.3-0.5 us, i.e. about a tenth of a whole small call).
NOARGS_ENTRY = "harness_noargs"
_NOARGS_SOURCE = f"\n\ndef {NOARGS_ENTRY}():\n    return handle(0, 0)\n"


class _Unused:
    """Stands for a parameter the script never reads (see ``hook_inputs``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNUSED"


UNUSED: object = _Unused()


@lru_cache(maxsize=1024)
def noargs_source(script: str) -> str | None:
    """``script`` plus the zero-argument entry, or None if the name is taken."""
    if NOARGS_ENTRY in script:
        return None
    return script.rstrip("\n") + "\n" + _NOARGS_SOURCE


# -- payloads handed over as a handle -----------------------------------------------------


class Passthrough:
    """A value a hook can only pass on (see :func:`passthrough`), held in Python.

    Inside Starlark it is an opaque object. The payload of a passthrough hook is not
    sent at all (the handle holds nothing): ``redact()`` answers with a handle to the
    request (its rules and keys), the engine turns the ``modify()`` decision carrying
    it into ``modify({REDACT_REQUEST: ...})``, and the hook chain applies it to the
    payload where the payload is (hooks.py): a large result is neither copied into
    Starlark nor sent to a worker process."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def hand_over(value: object) -> object:
    """``value`` as Starlark sees a handed-over payload: an opaque object."""
    return sl.OpaquePythonObject(Passthrough(value))


_PASS_CALL = ("modify", "(", "redact", "(")


@lru_cache(maxsize=1024)
def passthrough(script: str, entry: str = "handle") -> bool:
    """Whether ``entry(event, payload)`` uses its payload only as
    ``modify(redact(payload, ...))``, with ``modify`` and ``redact`` never rebound:
    then the script cannot observe the payload, only pass it to the built-in."""
    try:
        toks = [
            t for t in tokenize.generate_tokens(io.StringIO(script).readline) if t.type not in _SKIP
        ]
    except (tokenize.TokenError, SyntaxError, IndentationError, ValueError):
        return False
    params = _params(toks, entry)
    if params is None or params[0] == params[1]:
        return False
    param = params[1]
    used = False
    for i, tok in enumerate(toks):
        if tok.type == tokenize.STRING and tok.string.lstrip("rRbBuU")[:1] not in "'\"":
            return False  # an f-string could name the parameter inside
        if tok.type != tokenize.NAME:
            continue
        after = toks[i + 1].string if i + 1 < len(toks) else ""
        if tok.string in ("modify", "redact"):
            before = toks[i - 1].string if i else ""
            if after != "(" or before in (".", "def", "lambda", "for", ","):
                return False  # rebound, passed around or shadowed: do not guess
        elif tok.string == param and not _is_declaration(toks, i, entry):
            if i > 0 and toks[i - 1].string == ".":
                continue  # an attribute called like the parameter
            if tuple(t.string for t in toks[max(i - 4, 0) : i]) != _PASS_CALL or after not in (
                ",",
                ")",
            ):
                return False
            used = True
    return used
