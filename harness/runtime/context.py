"""The per-call context built-ins receive, and the runtime interface the pipeline uses.

Built-in functions are plain Python: ``def read(ctx: CallContext, path, max_bytes=None)``.
The engine binds ``ctx`` for the duration of a call and exposes each function to
Starlark as ``module.name``. A built-in signals a bad call by raising
``harness.errors.BuiltinError`` (or ``JailError``) with the message the script
author should see.

Everything in a CallContext must be picklable except ``cache`` and ``log`` (which
the process pool replaces with proxies in the worker), so the same built-ins run
in-process and in worker processes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from harness.config import Config
from harness.hotpath import slot_maker


class CacheStore(Protocol):
    """Per-session key/value store of JSON-compatible values (docs/spec.md §7 ``cache``)."""

    def get(self, key: str, default: Any = None) -> Any: ...
    def set(self, key: str, value: Any) -> None: ...
    def delete(self, key: str) -> bool | None: ...  # whether the key existed
    def has(self, key: str) -> bool: ...
    def clear(self) -> None: ...


# (level, message, fields) -> None
LogSink = Callable[[str, str, Mapping[str, Any]], None]


@dataclass(slots=True, kw_only=True)
class CallContext:
    config: Config
    session_id: str = ""
    call_id: str = ""
    tool: str = ""
    kind: Literal["tool", "hook", "when"] = "tool"
    # time.monotonic() value after which the call must stop; None = no deadline.
    deadline: float | None = None
    cache: CacheStore | None = None
    log: LogSink | None = None
    # Session services a built-in may ask for (``meta.tool_register``):
    # host(method, payload) -> value. Not picklable: the process pool proxies it.
    host: Callable[[str, Mapping[str, Any]], Any] | None = None
    # Free slot for built-ins that keep per-call state.
    extras: dict[str, Any] = field(default_factory=dict)
    # "file:line" of the script's last print/log call (runtime/tracebacks.py), or "".
    at: str = ""

    def remaining_ms(self) -> float | None:
        """Milliseconds left before the deadline (never negative), or None."""
        if self.deadline is None:
            return None
        return max(0.0, (self.deadline - time.monotonic()) * 1000.0)


# make_context(config, session_id, call_id, tool, cache, log, host): one per call,
# the other fields at their defaults (harness.hotpath).
make_context: Callable[
    [
        Config,
        str,
        str,
        str,
        CacheStore | None,
        LogSink | None,
        Callable[[str, Mapping[str, Any]], Any] | None,
    ],
    CallContext,
] = slot_maker(CallContext, "config", "session_id", "call_id", "tool", "cache", "log", "host")


class Outcome(NamedTuple):
    """What running a script produced.

    A NamedTuple rather than a frozen dataclass: it is made once per script run on
    the hot path, and a tuple is several times cheaper to construct.

    ``status``: ``ok`` (``value`` holds the converted return value), ``error`` (the
    script failed: ``error`` is the message, with script line where known),
    ``timeout``, ``memory`` (the worker hit its memory cap), ``crash`` (the worker
    died; ``error`` says how).
    """

    status: str  # "ok" | "error" | "timeout" | "memory" | "crash"
    value: Any = None
    error: str | None = None
    duration_ms: float = 0.0


class ScriptRuntime(Protocol):
    """Runs tool scripts, hook scripts and ``when`` expressions.

    Implemented in-process by ``runtime.engine.InProcessRuntime`` and by the worker
    pool in ``runtime.workers``. ``timeout_ms`` of 0 means no deadline. Never raises
    for script failures: those are Outcomes.
    """

    def run_tool(
        self,
        script: str,
        filename: str,
        line: int,
        args: Mapping[str, Any],
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome: ...

    def run_hook(
        self,
        script: str,
        filename: str,
        line: int,
        event: object,
        payload: object,
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        """Call ``handle(event, payload)``; either may be ``reach.UNUSED``."""
        ...

    def eval_when(
        self,
        expr: str,
        filename: str,
        line: int,
        event: str,
        payload: Mapping[str, Any],
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        """In Starlark; the hook chain has tried the Python evaluator (``when.fast_value``)."""
        ...

    def close(self) -> None: ...
