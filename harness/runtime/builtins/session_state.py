"""``metrics`` (per-session counters) and ``ctx`` (the turn scratchpad) for scripts.

Both stores live with the session, in the parent process; scripts reach them through
``CallContext.host`` (``host("metrics.incr", {...})``), so the same built-ins work
in-process and in worker processes. :class:`MetricsStore` and :class:`Scratchpad` are
the stores; :func:`serve` answers the host requests. A later backend (shared state in
``serve``) only has to offer the same five / six methods.

``ctx`` is ai-harness's per-turn scratchpad: in the agent loop one pad per turn, seeded
with ``"turn"`` (the turn number, from 1); elsewhere one pad per tool call, shared by
its hooks and the tool.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from harness.errors import BuiltinError
from harness.runtime.context import CallContext
from harness.state.cache import BackendMetrics
from harness.state.limits import DEFAULT
from harness.state.memory import MemoryBackend

# The limits are harness/state/limits.py's (one set for every store of session state).
MAX_METRICS = DEFAULT.session_metrics
MAX_METRIC_NAME = DEFAULT.metric_name_chars
MAX_PAD_BYTES = 1024 * 1024


class Metrics(Protocol):
    """A per-session store of integer counters."""

    def incr(self, name: str, delta: int = 1) -> int: ...
    def set(self, name: str, value: int) -> int: ...
    def get(self, name: str) -> int: ...
    def reset(self, name: str = "") -> None: ...
    def snapshot(self) -> dict[str, int]: ...


class MetricsStore(BackendMetrics):
    """One session's counters in a private memory backend: the same limits and
    messages as the metrics of ``harness serve`` sessions (either backend)."""

    def __init__(self, max_names: int = MAX_METRICS) -> None:
        super().__init__(MemoryBackend(replace(DEFAULT, session_metrics=max_names)), "session")

    @property
    def max_names(self) -> int:
        return self._backend.limits.session_metrics

    @max_names.setter
    def max_names(self, n: int) -> None:
        self._backend.limits = replace(self._backend.limits, session_metrics=n)


class Scratchpad:
    """One pad of JSON values (a turn's, or a call's); bounded to MAX_PAD_BYTES."""

    def __init__(self, seed: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(seed or {})
        self._lock = threading.Lock()

    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            return self._data.get(key, default)

    def set(self, key: str, value: Any) -> Any:
        with self._lock:
            trial = {**self._data, key: value}
            try:
                size = len(json.dumps(trial, separators=(",", ":"), allow_nan=False))
            except (TypeError, ValueError) as exc:
                raise BuiltinError(
                    f"ctx.set: value for {key!r} is not JSON-compatible: {exc}"
                ) from None
            if size > MAX_PAD_BYTES:
                raise BuiltinError(
                    f"ctx.set: the scratchpad would hold {size} bytes; the limit is {MAX_PAD_BYTES}"
                )
            self._data[key] = value
            return value

    def has(self, key: str) -> bool:
        with self._lock:
            return key in self._data

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._data.pop(key, _MISSING) is not _MISSING

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._data)


_MISSING = object()


def serve(  # noqa: C901
    method: str, payload: Mapping[str, Any], metrics: Metrics | None, pad: Scratchpad | None
) -> Any:
    """Answer one ``metrics.*`` / ``ctx.*`` host request."""
    family, _, op = method.partition(".")
    if family == "metrics":
        if metrics is None:
            raise BuiltinError("metrics are only available inside a session")
        name = payload.get("name", "")
        if op == "incr":
            return metrics.incr(name, payload.get("delta", 1))
        if op == "set":
            return metrics.set(name, payload["value"])
        if op == "get":
            return metrics.get(name)
        if op == "reset":
            metrics.reset(name)
            return None
        if op == "snapshot":
            return metrics.snapshot()
    elif family == "ctx":
        if pad is None:
            raise BuiltinError(f"ctx.{op}: no turn or call state here")
        key = payload.get("key", "")
        if op == "get":
            return pad.get(key, payload.get("default"))
        if op == "set":
            return pad.set(key, payload.get("value"))
        if op == "has":
            return pad.has(key)
        if op == "delete":
            return pad.delete(key)
        if op == "clear":
            pad.clear()
            return None
        if op == "snapshot":
            return pad.snapshot()
    raise BuiltinError(f"unknown session service {method!r}")


# -- the script side ----------------------------------------------------------------------


def _host(ctx: CallContext, name: str) -> Callable[[str, Mapping[str, Any]], Any]:
    if ctx.host is None:
        raise BuiltinError(f"{name} is only available inside a session")
    return ctx.host


def _name(fn: str, value: Any) -> str:
    if not isinstance(value, str):
        raise BuiltinError(f"{fn}: name must be a string, got {type(value).__name__}")
    return value


def _count(fn: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BuiltinError(f"{fn}: value must be an integer, got {type(value).__name__}")
    if abs(value) >= 2**63:
        raise BuiltinError(f"{fn}: value {value} does not fit in 64 bits")
    return value


def metrics_incr(ctx: CallContext, name: Any, delta: Any = 1) -> int:
    return _host(ctx, "metrics.incr")(
        "metrics.incr",
        {"name": _name("metrics.incr", name), "delta": _count("metrics.incr", delta)},
    )


def metrics_set(ctx: CallContext, name: Any, value: Any) -> int:
    return _host(ctx, "metrics.set")(
        "metrics.set", {"name": _name("metrics.set", name), "value": _count("metrics.set", value)}
    )


def metrics_get(ctx: CallContext, name: Any) -> int:
    return _host(ctx, "metrics.get")("metrics.get", {"name": _name("metrics.get", name)})


def metrics_reset(ctx: CallContext, name: Any = "") -> None:
    _host(ctx, "metrics.reset")("metrics.reset", {"name": _name("metrics.reset", name)})


def metrics_snapshot(ctx: CallContext) -> dict[str, int]:
    return _host(ctx, "metrics.snapshot")("metrics.snapshot", {})


def _key(fn: str, value: Any) -> str:
    if not isinstance(value, str):
        raise BuiltinError(f"{fn}: key must be a string, got {type(value).__name__}")
    return value


def ctx_get(ctx: CallContext, key: Any, default: Any = None) -> Any:
    return _host(ctx, "ctx.get")("ctx.get", {"key": _key("ctx.get", key), "default": default})


def ctx_set(ctx: CallContext, key: Any, value: Any) -> Any:
    return _host(ctx, "ctx.set")("ctx.set", {"key": _key("ctx.set", key), "value": value})


def ctx_has(ctx: CallContext, key: Any) -> bool:
    return _host(ctx, "ctx.has")("ctx.has", {"key": _key("ctx.has", key)})


def ctx_delete(ctx: CallContext, key: Any) -> bool:
    return _host(ctx, "ctx.delete")("ctx.delete", {"key": _key("ctx.delete", key)})


def ctx_clear(ctx: CallContext) -> None:
    _host(ctx, "ctx.clear")("ctx.clear", {})


def ctx_snapshot(ctx: CallContext) -> dict[str, Any]:
    return _host(ctx, "ctx.snapshot")("ctx.snapshot", {})


FUNCTIONS = {
    "metrics.incr": metrics_incr,
    "metrics.set": metrics_set,
    "metrics.get": metrics_get,
    "metrics.reset": metrics_reset,
    "metrics.snapshot": metrics_snapshot,
    "ctx.get": ctx_get,
    "ctx.set": ctx_set,
    "ctx.has": ctx_has,
    "ctx.delete": ctx_delete,
    "ctx.clear": ctx_clear,
    "ctx.snapshot": ctx_snapshot,
}
