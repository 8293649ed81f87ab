"""``cache.get/set/delete``: the per-session key/value store (docs/spec.md §7).

The store itself lives with the session (:class:`MemoryCache`, or the state backend
of ``harness serve``); under process isolation the worker receives a proxy with the
same methods.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.errors import BuiltinError
from harness.runtime.context import CallContext
from harness.state.cache import BackendCache, encode
from harness.state.checks import check_cache_entry
from harness.state.limits import DEFAULT
from harness.state.memory import MemoryBackend

# The limits are harness/state/limits.py's (one set for every store of session state).
MAX_ENTRIES = DEFAULT.session_cache_entries
MAX_BYTES = DEFAULT.session_cache_bytes
MAX_VALUE_BYTES = DEFAULT.cache_value_bytes


def encoded_size(key: str, value: Any) -> int:
    """Bytes a value costs in the store; raises BuiltinError if not JSON-compatible or
    over the per-value limit (checked in a worker before anything crosses the pipe)."""
    return check_cache_entry(key, encode(key, value), DEFAULT)


class MemoryCache(BackendCache):
    """One session's cache in a private memory backend: the same limits and messages as
    the cache of ``harness serve`` sessions (either backend)."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        limits = replace(
            DEFAULT,
            session_cache_entries=max_entries,
            session_cache_bytes=max_bytes,
            max_bytes=max(max_bytes, DEFAULT.max_bytes),
        )
        self._memory = MemoryBackend(limits)
        super().__init__(self._memory, "session")

    @property
    def max_entries(self) -> int:
        return self._backend.limits.session_cache_entries

    @max_entries.setter
    def max_entries(self, n: int) -> None:
        self._backend.limits = replace(self._backend.limits, session_cache_entries=n)

    @property
    def max_bytes(self) -> int:
        return self._backend.limits.session_cache_bytes

    @max_bytes.setter
    def max_bytes(self, n: int) -> None:
        lim = self._backend.limits
        self._backend.limits = replace(lim, session_cache_bytes=n, max_bytes=max(n, lim.max_bytes))

    def copy(self) -> MemoryCache:
        """An independent store holding the same values (harness test's second runs)."""
        out = MemoryCache(self.max_entries, self.max_bytes)
        for key, encoded in self._memory.cache_items(self._scope).items():
            out._memory.cache_set(out._scope, key, encoded)
        return out


def _store(ctx: CallContext) -> Any:
    if ctx.cache is None:
        raise BuiltinError("cache is not available outside a session")
    return ctx.cache


def _key(name: str, key: Any) -> str:
    if not isinstance(key, str):
        raise BuiltinError(f"{name}: key must be a string, got {type(key).__name__}")
    return key


def get(ctx: CallContext, key: Any, default: Any = None) -> Any:
    return _store(ctx).get(_key("cache.get", key), default)


def set_(ctx: CallContext, key: Any, value: Any) -> Any:
    """Store ``value``; returns it (ai-harness's ``cache.set`` does)."""
    _store(ctx).set(_key("cache.set", key), value)
    return value


def delete(ctx: CallContext, key: Any) -> bool:
    """Remove ``key``; whether it was there."""
    return bool(_store(ctx).delete(_key("cache.delete", key)))


def has(ctx: CallContext, key: Any) -> bool:
    return bool(_store(ctx).has(_key("cache.has", key)))


def clear(ctx: CallContext) -> None:
    _store(ctx).clear()


FUNCTIONS = {
    "cache.get": get,
    "cache.set": set_,
    "cache.delete": delete,
    "cache.has": has,
    "cache.clear": clear,
}
