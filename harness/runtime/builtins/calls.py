"""Top-level built-in functions: ``log(msg)``, ``emit(event, payload=None)``,
``assert(cond, msg)`` and ``sleep(ms)`` (ai-harness's names).

``log`` is also the module of ``log.info``; ``assert`` is a reserved word in
Starlark. The runtime renames those two calls before parsing (``surface.RENAMED_CALLS``,
:func:`rename_calls`), so scripts can write them as ai-harness scripts do.
"""

from __future__ import annotations

import io
import re
import time
import tokenize
from functools import lru_cache
from typing import Any

from harness import surface
from harness.errors import BuiltinError
from harness.runtime.builtins.log import info
from harness.runtime.context import CallContext

MAX_SLEEP_MS = 60_000
_CANDIDATE = re.compile(r"(?<![\w.])(?:{})\s*\(".format("|".join(surface.RENAMED_CALLS)))


def log_call(ctx: CallContext, msg: Any, **fields: Any) -> None:
    """``log("msg")``: the same record as ``log.info("msg")``; any value is shown as text."""
    info(ctx, msg if isinstance(msg, str) else repr(msg), **fields)


def assert_(ctx: CallContext, cond: Any, msg: Any = "assertion failed") -> None:
    if not cond:
        raise BuiltinError(f"assert: {msg if isinstance(msg, str) else repr(msg)}")


def sleep(ctx: CallContext, ms: Any) -> None:
    """Wait ``ms`` milliseconds; never past the call's deadline (that is an error)."""
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or ms < 0:
        raise BuiltinError(f"sleep: ms must be a number >= 0, got {ms!r}")
    if ms > MAX_SLEEP_MS:
        raise BuiltinError(f"sleep: at most {MAX_SLEEP_MS} ms, got {ms}")
    left = ctx.remaining_ms()
    if left is not None and ms > left:
        raise BuiltinError(
            f"sleep: {ms} ms is longer than the {int(left)} ms left before "
            "the call's deadline; sleep less or raise timeout_ms"
        )
    end = time.monotonic() + ms / 1000.0
    while True:
        now = time.monotonic()
        if now >= end:
            return
        time.sleep(min(end - now, 0.05))


def emit(ctx: CallContext, event: Any, payload: Any = None) -> Any:
    """Fire the ``custom.*`` hooks of ``event``; a block raises, a modify is returned."""
    if not isinstance(event, str) or not event.startswith("custom.") or not event[7:].strip():
        raise BuiltinError(f"emit: event must be a custom.<name> event, got {event!r}")
    if ctx.host is None:
        raise BuiltinError("emit is only available inside a session")
    return ctx.host("emit", {"event": event, "payload": payload, "by": ctx.tool})


@lru_cache(maxsize=1024)
def rename_calls(source: str) -> str:
    """``source`` with ``log(`` / ``assert(`` calls renamed (see the module doc).

    Only names that are called and not reached as attributes; a script that binds
    ``log`` itself (``def log(...)``, ``log = ...``) keeps its own.
    """
    if _CANDIDATE.search(source) is None:
        return source
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError, ValueError):
        return source
    names = [t for t in toks if t.type == tokenize.NAME]
    own = {t.string for i, t in enumerate(names) if i and names[i - 1].string == "def"}
    lines = source.split("\n")
    edits: list[tuple[int, int, int, str]] = []
    sig = [
        t
        for t in toks
        if t.type
        not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE)
    ]
    for i, tok in enumerate(sig):
        new = surface.RENAMED_CALLS.get(tok.string)
        if tok.type != tokenize.NAME or new is None or tok.string in own:
            continue
        if i + 1 >= len(sig) or sig[i + 1].string != "(":
            if i + 1 < len(sig) and sig[i + 1].string == "=" and tok.string == "log":
                return source  # the script rebinds log: leave it alone
            continue
        if i and sig[i - 1].string == ".":
            continue
        (row, col), (_, end) = tok.start, tok.end
        edits.append((row - 1, col, end, new))
    for row, col, end, new in reversed(edits):
        line = lines[row]
        lines[row] = line[:col] + new + line[end:]
    return "\n".join(lines)


FUNCTIONS = {
    "harness_log": log_call,
    "harness_assert": assert_,
    "sleep": sleep,
    "emit": emit,
}
