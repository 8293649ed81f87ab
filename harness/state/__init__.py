"""Shared state of a serving process: spilled outputs, ``cache`` values, counters.

One :class:`StateBackend` per server. The memory backend keeps everything in the
process (the default); the redis backend (``state: {backend: redis, url: ...}`` in
harness.md) keeps it in Redis, so several ``harness serve`` replicas behind a load
balancer see the same refs, cache values and counters. ``spills`` builds the
``read_output`` store on top of a backend, ``cache`` the ``cache``/``metrics`` stores.

Everything is kept per *scope* (a client's identity or connection) and bounded by one
:class:`~harness.state.limits.StateLimits`, enforced by both backends: per item, per
scope, and server-wide, where the least recently used scopes are evicted.
:data:`WRITE_PATHS` names every method that stores something and the limits it
enforces; ``tests/state/test_state_limits.py`` walks it against both backends.
"""

from __future__ import annotations

from typing import Protocol

from harness.state.limits import StateLimits


class StateBackend(Protocol):
    """Per-scope outputs, values and counters with one set of limits.

    Every method is synchronous and thread-safe (tool calls run on worker threads).
    A scope whose state was evicted raises :class:`~harness.state.limits.StateEvicted`
    once on its next cache or counter operation; a ref it lost raises it on read.
    """

    limits: StateLimits

    # -- spilled outputs (read_output) ------------------------------------------------
    def put_output(self, scope: str, ref: str, data: bytes) -> None: ...
    def get_output(self, scope: str, ref: str) -> bytes | None: ...

    # -- cache values (JSON text) ---------------------------------------------------------
    def cache_get(self, scope: str, key: str) -> str | None: ...
    def cache_set(self, scope: str, key: str, encoded: str) -> None: ...
    def cache_delete(self, scope: str, key: str) -> bool: ...  # whether it existed
    def cache_has(self, scope: str, key: str) -> bool: ...
    def cache_clear(self, scope: str) -> None: ...

    # -- counters (metrics: signed 64-bit integers) -------------------------------------
    def counter_incr(self, scope: str, name: str, by: int = 1) -> int: ...
    def counter_set(self, scope: str, name: str, value: int) -> None: ...
    def counter_get(self, scope: str, name: str) -> int | None: ...
    def counter_delete(self, scope: str, name: str) -> None: ...
    def counter_reset(self, scope: str) -> None: ...
    def counter_snapshot(self, scope: str) -> dict[str, int]: ...

    # -- accounting ---------------------------------------------------------------------
    def usage(self) -> tuple[int, int]: ...  # (bytes, items) of every scope together
    def close(self) -> None: ...


# Every method of StateBackend that stores something -> the StateLimits fields it
# enforces (the rest only read or remove). The server-wide bounds hold for all.
SERVER_WIDE = ("max_bytes", "max_items", "value_ttl_s", "evicted_memory")
WRITE_PATHS: dict[str, tuple[str, ...]] = {
    "put_output": ("output_bytes", "session_output_bytes", "spill_ttl_s", *SERVER_WIDE),
    "cache_set": (
        "cache_key_chars",
        "cache_value_bytes",
        "session_cache_entries",
        "session_cache_bytes",
        *SERVER_WIDE,
    ),
    "counter_incr": ("metric_name_chars", "session_metrics", *SERVER_WIDE),
    "counter_set": ("metric_name_chars", "session_metrics", *SERVER_WIDE),
}
READ_PATHS = (
    "get_output",
    "cache_get",
    "cache_delete",
    "cache_has",
    "cache_clear",
    "counter_get",
    "counter_delete",
    "counter_reset",
    "counter_snapshot",
    "usage",
    "close",
)


def open_backend(
    kind: str = "memory",
    url: str | None = None,
    *,
    namespace: str = "harness",
    limits: StateLimits | None = None,
) -> StateBackend:
    """The backend named by ``state.backend`` (``memory`` or ``redis``)."""
    limits = limits or StateLimits()
    if kind == "memory":
        from harness.state.memory import MemoryBackend

        return MemoryBackend(limits)
    if kind == "redis":
        from harness.state.redis import RedisBackend

        return RedisBackend(url or "redis://127.0.0.1:6379/0", namespace=namespace, limits=limits)
    raise ValueError(f'unknown state backend "{kind}"; use memory or redis')
