"""Shared state of a serving process: spilled outputs, ``cache`` values, counters.

One :class:`StateBackend` per server. The memory backend keeps everything in the
process (the default); the redis backend (``state: {backend: redis, url: ...}`` in
harness.md) keeps it in Redis, so several ``harness serve`` replicas behind a load
balancer see the same refs, cache values and counters. ``spills`` builds the
``read_output`` store on top of a backend.
"""

from __future__ import annotations

from typing import Protocol


class StateBackend(Protocol):
    """Byte blobs with an expiry, scoped values, and counters.

    Every method is synchronous and thread-safe (tool calls run on worker threads).
    """

    # -- blobs (spilled outputs) -------------------------------------------------------
    def put_blob(self, key: str, data: bytes, ttl_s: float) -> None: ...
    def get_blob(self, key: str) -> bytes | None: ...
    def delete_blob(self, key: str) -> None: ...

    # -- values (cache.get/set/delete/has/clear, JSON text) ----------------------------------------
    def get_value(self, key: str) -> str | None: ...
    def set_value(self, key: str, encoded: str) -> None: ...
    def delete_value(self, key: str) -> bool: ...  # whether the key existed
    def has_value(self, key: str) -> bool: ...
    def clear_values(self, prefix: str) -> None: ...

    # -- counters (metrics) ----------------------------------------------------------------
    def incr(self, name: str, by: float = 1) -> float: ...
    def set_counter(self, name: str, value: float) -> None: ...
    def get_counter(self, name: str) -> float | None: ...
    def delete_counter(self, name: str) -> None: ...
    def reset_counters(self, prefix: str = "") -> None: ...
    def snapshot_counters(self, prefix: str = "") -> dict[str, float]: ...

    def close(self) -> None: ...


def open_backend(
    kind: str = "memory", url: str | None = None, *, namespace: str = "harness"
) -> StateBackend:
    """The backend named by ``state.backend`` (``memory`` or ``redis``)."""
    if kind == "memory":
        from harness.state.memory import MemoryBackend

        return MemoryBackend()
    if kind == "redis":
        from harness.state.redis import RedisBackend

        return RedisBackend(url or "redis://127.0.0.1:6379/0", namespace=namespace)
    raise ValueError(f'unknown state backend "{kind}"; use memory or redis')
