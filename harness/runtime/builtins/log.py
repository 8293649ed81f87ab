"""``log.info/warn/error``: structured records to the harness log and audit stream."""

from __future__ import annotations

from typing import Any

from harness.errors import BuiltinError
from harness.runtime.context import CallContext


def _emit(level: str, ctx: CallContext, msg: Any, fields: dict[str, Any]) -> None:
    if not isinstance(msg, str):
        raise BuiltinError(f"log.{level}: msg must be a string, got {type(msg).__name__}")
    if ctx.log is not None:
        # Script fields are nested under "fields": they can never replace a key harness
        # writes (time, session, event, level, message, tool...), so a record cannot be
        # forged (docs/builtins.md).
        record: dict[str, Any] = {"tool": ctx.tool}
        if fields:
            record["fields"] = fields
        if ctx.at:  # the script line of this call (runtime/tracebacks.py)
            record["at"] = ctx.at
        ctx.log(level, msg, record)


def info(ctx: CallContext, msg: Any, **fields: Any) -> None:
    _emit("info", ctx, msg, fields)


def warn(ctx: CallContext, msg: Any, **fields: Any) -> None:
    _emit("warn", ctx, msg, fields)


def error(ctx: CallContext, msg: Any, **fields: Any) -> None:
    _emit("error", ctx, msg, fields)


FUNCTIONS = {"log.info": info, "log.warn": warn, "log.error": error}
