"""The in-process state backend (the default): dictionaries behind one lock."""

from __future__ import annotations

import threading
import time

MAX_BLOB_BYTES_TOTAL = 256 * 1024 * 1024  # oldest spills are dropped past this


class MemoryBackend:
    """Everything in this process; lost when it exits."""

    def __init__(self, max_blob_bytes: int = MAX_BLOB_BYTES_TOTAL) -> None:
        self._lock = threading.Lock()
        self._blobs: dict[str, tuple[bytes, float]] = {}  # insertion order = age
        self._blob_bytes = 0
        self._max_blob_bytes = max_blob_bytes
        self._values: dict[str, str] = {}
        self._counters: dict[str, float] = {}

    # -- blobs ---------------------------------------------------------------------------

    def put_blob(self, key: str, data: bytes, ttl_s: float) -> None:
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            old = self._blobs.pop(key, None)
            if old is not None:
                self._blob_bytes -= len(old[0])
            self._blobs[key] = (data, now + ttl_s)
            self._blob_bytes += len(data)
            while self._blob_bytes > self._max_blob_bytes and len(self._blobs) > 1:
                oldest = next(iter(self._blobs))
                self._blob_bytes -= len(self._blobs.pop(oldest)[0])

    def get_blob(self, key: str) -> bytes | None:
        now = time.monotonic()
        with self._lock:
            item = self._blobs.get(key)
            if item is None:
                return None
            if item[1] <= now:
                self._blob_bytes -= len(self._blobs.pop(key)[0])
                return None
            return item[0]

    def delete_blob(self, key: str) -> None:
        with self._lock:
            old = self._blobs.pop(key, None)
            if old is not None:
                self._blob_bytes -= len(old[0])

    def _expire(self, now: float) -> None:
        dead = [k for k, (_, exp) in self._blobs.items() if exp <= now]
        for k in dead:
            self._blob_bytes -= len(self._blobs.pop(k)[0])

    # -- values --------------------------------------------------------------------------

    def get_value(self, key: str) -> str | None:
        with self._lock:
            return self._values.get(key)

    def set_value(self, key: str, encoded: str) -> None:
        with self._lock:
            self._values[key] = encoded

    def delete_value(self, key: str) -> None:
        with self._lock:
            self._values.pop(key, None)

    # -- counters ------------------------------------------------------------------------

    def incr(self, name: str, by: float = 1) -> float:
        with self._lock:
            value = self._counters.get(name, 0) + by
            self._counters[name] = value
            return value

    def set_counter(self, name: str, value: float) -> None:
        with self._lock:
            self._counters[name] = value

    def get_counter(self, name: str) -> float | None:
        with self._lock:
            return self._counters.get(name)

    def reset_counters(self, prefix: str = "") -> None:
        with self._lock:
            for k in [k for k in self._counters if k.startswith(prefix)]:
                del self._counters[k]

    def snapshot_counters(self, prefix: str = "") -> dict[str, float]:
        with self._lock:
            return {k: v for k, v in sorted(self._counters.items()) if k.startswith(prefix)}

    def close(self) -> None:
        with self._lock:
            self._blobs.clear()
            self._blob_bytes = 0
