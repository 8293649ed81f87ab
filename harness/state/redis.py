"""The Redis state backend (``state: {backend: redis, url: ...}``), on redis-py.

Keys live under ``<namespace>:``: ``spill:<scope>:<ref>`` (expiring strings),
``value:<key>`` (cache values, JSON text), and one hash ``counters``. Replicas of
one service use the same namespace; two services sharing a Redis use two.
"""

from __future__ import annotations

from typing import Any

from harness.errors import HarnessError

VALUE_TTL_S = 7 * 24 * 3600  # cache values not written for a week are dropped


class StateError(HarnessError):
    """The state backend cannot be used (exit status 1)."""

    exit_code = 1


class RedisBackend:
    def __init__(self, url: str, *, namespace: str = "harness",
                 client: Any | None = None) -> None:
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - installed with harness[redis]
            raise StateError("state.backend redis needs redis-py: pip install "
                             "'harness[redis]'") from exc
        self.url = url
        self.ns = namespace
        self._r: Any = client if client is not None else redis.Redis.from_url(
            url, socket_timeout=10, socket_connect_timeout=5, health_check_interval=30)
        try:
            self._r.ping()
        except redis.RedisError as exc:
            raise StateError(f"state: cannot reach Redis at {_safe(url)}: {exc}; start it or "
                             "fix state.url in harness.md") from None
        self._counters = f"{namespace}:counters"

    def _k(self, key: str) -> str:
        return f"{self.ns}:{key}"

    # -- blobs ---------------------------------------------------------------------------

    def put_blob(self, key: str, data: bytes, ttl_s: float) -> None:
        self._r.set(self._k(key), data, px=max(1, int(ttl_s * 1000)))

    def get_blob(self, key: str) -> bytes | None:
        value = self._r.get(self._k(key))
        return bytes(value) if value is not None else None

    def delete_blob(self, key: str) -> None:
        self._r.delete(self._k(key))

    # -- values --------------------------------------------------------------------------

    def get_value(self, key: str) -> str | None:
        value = self._r.get(self._k("value:" + key))
        return value.decode("utf-8") if value is not None else None

    def set_value(self, key: str, encoded: str) -> None:
        self._r.set(self._k("value:" + key), encoded.encode("utf-8"), ex=VALUE_TTL_S)

    def delete_value(self, key: str) -> None:
        self._r.delete(self._k("value:" + key))

    # -- counters ------------------------------------------------------------------------

    def incr(self, name: str, by: float = 1) -> float:
        return _num(self._r.hincrbyfloat(self._counters, name, by))

    def set_counter(self, name: str, value: float) -> None:
        self._r.hset(self._counters, name, repr(float(value)))

    def get_counter(self, name: str) -> float | None:
        value = self._r.hget(self._counters, name)
        return None if value is None else _num(value)

    def reset_counters(self, prefix: str = "") -> None:
        names = [n for n in self._r.hkeys(self._counters) if n.decode().startswith(prefix)]
        if names:
            self._r.hdel(self._counters, *names)

    def snapshot_counters(self, prefix: str = "") -> dict[str, float]:
        raw = self._r.hgetall(self._counters)
        return {k.decode(): _num(v) for k, v in sorted(raw.items())
                if k.decode().startswith(prefix)}

    def close(self) -> None:
        self._r.close()


def _num(value: Any) -> float:
    number = float(value)
    return int(number) if number.is_integer() else number


def _safe(url: str) -> str:
    """The URL without a password."""
    if "@" in url:
        scheme, _, rest = url.partition("://")
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url
