"""``cache`` values and ``metrics`` counters of one client scope, kept in a state backend.

Both are scoped like spilled outputs: to the auth identity of the client (or its
connection). Every limit is the backend's (:class:`~harness.state.limits.StateLimits`),
the same for the memory and the redis backend; these classes only turn values into
JSON text and a backend failure into the error a script sees.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from harness.errors import BuiltinError
from harness.state import StateBackend

T = TypeVar("T")


def encode(key: str, value: Any) -> str:
    """``value`` as compact JSON text; raises BuiltinError if not JSON-compatible."""
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise BuiltinError(
            f"cache.set: value for {key[:80]!r} is not JSON-compatible: {exc}"
        ) from None


def _guard(what: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except BuiltinError:
        raise
    except Exception as exc:  # noqa: BLE001 - the script sees a built-in error
        raise BuiltinError(f"{what}: the shared state store failed: {exc}") from None


class BackendCache:
    def __init__(self, backend: StateBackend, scope: str) -> None:
        self._backend = backend
        self._scope = scope

    def get(self, key: str, default: Any = None) -> Any:
        raw = _guard("cache.get", lambda: self._backend.cache_get(self._scope, key))
        return default if raw is None else json.loads(raw)

    def set(self, key: str, value: Any) -> None:
        encoded = encode(key, value)
        _guard("cache.set", lambda: self._backend.cache_set(self._scope, key, encoded))

    def delete(self, key: str) -> bool:
        return _guard("cache.delete", lambda: self._backend.cache_delete(self._scope, key))

    def has(self, key: str) -> bool:
        return _guard("cache.has", lambda: self._backend.cache_has(self._scope, key))

    def clear(self) -> None:
        _guard("cache.clear", lambda: self._backend.cache_clear(self._scope))


class BackendMetrics:
    """The ``metrics`` counters of one client scope, as backend counters."""

    def __init__(self, backend: StateBackend, scope: str) -> None:
        self._backend = backend
        self._scope = scope

    def incr(self, name: str, delta: int = 1) -> int:
        return _guard("metrics.incr", lambda: self._backend.counter_incr(self._scope, name, delta))

    def set(self, name: str, value: int) -> int:
        _guard("metrics.set", lambda: self._backend.counter_set(self._scope, name, value))
        return value

    def get(self, name: str) -> int:
        value = _guard("metrics.get", lambda: self._backend.counter_get(self._scope, name))
        return 0 if value is None else value

    def reset(self, name: str = "") -> None:
        if name:
            _guard("metrics.reset", lambda: self._backend.counter_delete(self._scope, name))
        else:
            _guard("metrics.reset", lambda: self._backend.counter_reset(self._scope))

    def snapshot(self) -> dict[str, int]:
        return _guard("metrics.snapshot", lambda: self._backend.counter_snapshot(self._scope))
