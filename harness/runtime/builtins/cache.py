"""``cache.get/set/delete``: the per-session key/value store (SPEC §7).

The store itself lives with the session (:class:`MemoryCache`); under process
isolation the worker receives a proxy with the same three methods.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from harness.errors import BuiltinError
from harness.runtime.context import CallContext

MAX_ENTRIES = 10_000
MAX_BYTES = 16 * 1024 * 1024
MAX_VALUE_BYTES = 1024 * 1024


def encoded_size(key: str, value: Any) -> int:
    """Bytes a value costs in the store; raises BuiltinError if not JSON-compatible."""
    try:
        size = len(json.dumps(value, separators=(",", ":"), allow_nan=False)) + len(key)
    except (TypeError, ValueError) as exc:
        raise BuiltinError(f"cache.set: value for {key!r} is not JSON-compatible: {exc}") from None
    if size > MAX_VALUE_BYTES:
        raise BuiltinError(
            f"cache.set: value for {key!r} is {size} bytes; the limit is "
            f"{MAX_VALUE_BYTES} bytes per value"
        )
    return size


class MemoryCache:
    """A bounded, thread-safe store of JSON values (copied in and out)."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self._data: dict[str, tuple[str, int]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.max_bytes = max_bytes

    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            item = self._data.get(key)
        return default if item is None else json.loads(item[0])

    def set(self, key: str, value: Any) -> None:
        size = encoded_size(key, value)
        encoded = json.dumps(value, separators=(",", ":"))
        with self._lock:
            old = self._data.get(key)
            new_total = self._bytes - (old[1] if old else 0) + size
            if old is None and len(self._data) >= self.max_entries:
                raise BuiltinError(
                    f"cache.set: the session cache is full ({self.max_entries} keys)"
                )
            if new_total > self.max_bytes:
                raise BuiltinError(f"cache.set: the session cache is full ({self.max_bytes} bytes)")
            self._data[key] = (encoded, size)
            self._bytes = new_total

    def delete(self, key: str) -> bool:
        with self._lock:
            old = self._data.pop(key, None)
            if old:
                self._bytes -= old[1]
            return old is not None

    def has(self, key: str) -> bool:
        with self._lock:
            return key in self._data

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0

    def copy(self) -> MemoryCache:
        """An independent store holding the same values (harness test's second runs)."""
        out = MemoryCache(self.max_entries, self.max_bytes)
        with self._lock:
            out._data, out._bytes = dict(self._data), self._bytes
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
