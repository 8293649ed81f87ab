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
    def __init__(self, url: str, *, namespace: str = "harness", client: Any | None = None) -> None:
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - installed with harness[redis]
            raise StateError(
                "state.backend redis needs redis-py: pip install 'harness[redis]'"
            ) from exc
        self.url = url
        self.ns = namespace
        self._r: Any = (
            client
            if client is not None
            else redis.Redis.from_url(
                url, socket_timeout=10, socket_connect_timeout=5, health_check_interval=30
            )
        )
        try:
            self._r.ping()
        except redis.RedisError as exc:
            raise StateError(
                f"state: cannot reach Redis at {_safe(url)}: {exc}; start it or "
                "fix state.url in harness.md"
            ) from None
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

    def delete_value(self, key: str) -> bool:
        return bool(self._r.delete(self._k("value:" + key)))

    def has_value(self, key: str) -> bool:
        return bool(self._r.exists(self._k("value:" + key)))

    def clear_values(self, prefix: str) -> None:
        pattern = _glob_escape(self._k("value:" + prefix)) + "*"
        batch: list[Any] = []
        for key in self._r.scan_iter(match=pattern, count=500):
            batch.append(key)
            if len(batch) >= 500:
                self._r.unlink(*batch)
                batch.clear()
        if batch:
            self._r.unlink(*batch)

    # -- counters ------------------------------------------------------------------------

    def incr(self, name: str, by: float = 1) -> float:
        if isinstance(by, int):  # exact 64-bit integers (metrics), not doubles
            return int(self._r.hincrby(self._counters, name, by))
        return _num(self._r.hincrbyfloat(self._counters, name, by))

    def set_counter(self, name: str, value: float) -> None:
        self._r.hset(
            self._counters, name, str(value) if isinstance(value, int) else repr(float(value))
        )

    def get_counter(self, name: str) -> float | None:
        value = self._r.hget(self._counters, name)
        return None if value is None else _num(value)

    def delete_counter(self, name: str) -> None:
        self._r.hdel(self._counters, name)

    def reset_counters(self, prefix: str = "") -> None:
        names = [
            n
            for n, _ in self._r.hscan_iter(
                self._counters, match=_glob_escape(prefix) + "*", count=500
            )
        ]
        if names:
            self._r.hdel(self._counters, *names)

    def snapshot_counters(self, prefix: str = "") -> dict[str, float]:
        raw = self._r.hscan_iter(self._counters, match=_glob_escape(prefix) + "*", count=500)
        return {k.decode(): _num(v) for k, v in sorted(raw)}

    def close(self) -> None:
        self._r.close()


def _num(value: Any) -> float:
    text = value.decode() if isinstance(value, bytes) else str(value)
    if text.lstrip("-").isdigit():
        return int(text)  # exact, beyond 2**53
    number = float(text)
    return int(number) if number.is_integer() else number


def _glob_escape(text: str) -> str:
    """``text`` as a literal in a Redis MATCH pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _safe(url: str) -> str:
    """The URL without a password."""
    if "@" in url:
        scheme, _, rest = url.partition("://")
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url
