"""``cache`` values and ``metrics`` counters kept in a state backend (shared by replicas).

Both are scoped like spilled outputs: to the auth identity of the client (or its
connection). The per-value size limit is the one of the in-process cache; the limit on
metric names is the one of the in-process :class:`MetricsStore`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

from harness.errors import BuiltinError
from harness.runtime.builtins.cache import encoded_size
from harness.runtime.builtins.session_state import MAX_METRICS
from harness.state import StateBackend

T = TypeVar("T")


def scope_tag(scope: str) -> str:
    """A fixed-length, key-safe tag for a client scope (identities may hold anything)."""
    return hashlib.sha256(scope.encode("utf-8")).hexdigest()[:24]


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
        self._prefix = "cache:" + scope_tag(scope) + ":"

    def get(self, key: str, default: Any = None) -> Any:
        raw = _guard("cache.get", lambda: self._backend.get_value(self._prefix + key))
        return default if raw is None else json.loads(raw)

    def set(self, key: str, value: Any) -> None:
        encoded_size(key, value)  # JSON-compatible and within the per-value limit
        encoded = json.dumps(value, separators=(",", ":"))
        _guard("cache.set", lambda: self._backend.set_value(self._prefix + key, encoded))

    def delete(self, key: str) -> bool:
        return _guard("cache.delete", lambda: self._backend.delete_value(self._prefix + key))

    def has(self, key: str) -> bool:
        return _guard("cache.has", lambda: self._backend.has_value(self._prefix + key))

    def clear(self) -> None:
        _guard("cache.clear", lambda: self._backend.clear_values(self._prefix))


class BackendMetrics:
    """The ``metrics`` counters of one client scope, as backend counters."""

    def __init__(self, backend: StateBackend, scope: str, max_names: int = MAX_METRICS) -> None:
        self._backend = backend
        self._prefix = "metrics:" + scope_tag(scope) + ":"
        self.max_names = max_names

    def _room(self, fn: str, name: str) -> None:
        if self._backend.get_counter(self._prefix + name) is not None:
            return
        if len(self._backend.snapshot_counters(self._prefix)) >= self.max_names:
            raise BuiltinError(f"{fn}: this session already has {self.max_names} metrics")

    def incr(self, name: str, delta: int = 1) -> int:
        def run() -> int:
            self._room("metrics.incr", name)
            return int(self._backend.incr(self._prefix + name, delta))

        return _guard("metrics.incr", run)

    def set(self, name: str, value: int) -> int:
        def run() -> int:
            self._room("metrics.set", name)
            self._backend.set_counter(self._prefix + name, value)
            return value

        return _guard("metrics.set", run)

    def get(self, name: str) -> int:
        value = _guard("metrics.get", lambda: self._backend.get_counter(self._prefix + name))
        return 0 if value is None else int(value)

    def reset(self, name: str = "") -> None:
        if name:
            _guard("metrics.reset", lambda: self._backend.delete_counter(self._prefix + name))
        else:
            _guard("metrics.reset", lambda: self._backend.reset_counters(self._prefix))

    def snapshot(self) -> dict[str, int]:
        raw = _guard("metrics.snapshot", lambda: self._backend.snapshot_counters(self._prefix))
        cut = len(self._prefix)
        return {k[cut:]: int(v) for k, v in sorted(raw.items())}
