"""The Redis state backend (``state: {backend: redis, url: ...}``), on redis-py.

Every operation is one call of the Lua script in redis_lua.py, atomic across the
replicas that share the namespace, enforcing the same :class:`StateLimits` as the
memory backend: the size of one input is checked here before it is sent (the same
functions as memory.py), the rest in the script, whose refusal codes become the same
errors (:func:`~harness.state.limits.refusal`). Every key has a TTL.
"""

from __future__ import annotations

from typing import Any

from harness.errors import HarnessError
from harness.state.checks import (
    BUILTIN,
    COUNTER_COST,
    SCOPE_COST,
    check_cache_entry,
    check_counter,
    check_metric_name,
    check_output,
    refusal,
    scope_tag,
)
from harness.state.limits import DEFAULT, StateLimits
from harness.state.redis_lua import SCRIPT


class StateError(HarnessError):
    """The state backend cannot be used (exit status 1)."""

    exit_code = 1


class RedisBackend:
    def __init__(
        self,
        url: str,
        *,
        namespace: str = "harness",
        client: Any | None = None,
        limits: StateLimits = DEFAULT,
    ) -> None:
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - installed with harness-md[redis]
            raise StateError(
                "state.backend redis needs redis-py: pip install 'harness-md[redis]'"
            ) from exc
        self.url = url
        self.ns = namespace
        self.limits = limits
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
        self._script = self._r.register_script(SCRIPT)
        lim = limits
        self._limits_arg = ",".join(
            str(int(v))
            for v in (
                lim.max_bytes,
                lim.max_items,
                lim.session_cache_entries,
                lim.session_cache_bytes,
                lim.session_metrics,
                lim.session_output_bytes,
                lim.spill_ms,
                lim.value_ms,
                lim.evicted_memory,
                COUNTER_COST,
                SCOPE_COST,
            )
        )

    def _run(self, op: str, scope: str, *args: Any, ref: str = "") -> list[Any]:
        reply = self._script(args=[op, self.ns, scope_tag(scope), self._limits_arg, *args])
        status = reply[0].decode()
        if status != "ok":
            raise refusal(status, BUILTIN.get(op, op), self.limits, ref=ref)
        return list(reply[1:])

    def usage(self) -> tuple[int, int]:
        _, size, items = self._script(args=["usage", self.ns, "", self._limits_arg])
        return int(size), int(items)

    # -- spilled outputs -----------------------------------------------------------------

    def put_output(self, scope: str, ref: str, data: bytes) -> None:
        check_output(ref, data, self.limits)
        self._run("put_output", scope, ref, data, ref=ref)

    def get_output(self, scope: str, ref: str) -> bytes | None:
        (data,) = self._run("get_output", scope, ref, ref=ref)
        return None if data is None else bytes(data)

    # -- cache values --------------------------------------------------------------------

    def cache_get(self, scope: str, key: str) -> str | None:
        (value,) = self._run("cache_get", scope, key)
        return None if value is None else bytes(value).decode("utf-8")

    def cache_set(self, scope: str, key: str, encoded: str) -> None:
        check_cache_entry(key, encoded, self.limits)
        self._run("cache_set", scope, key, encoded)

    def cache_delete(self, scope: str, key: str) -> bool:
        (existed,) = self._run("cache_delete", scope, key)
        return bool(existed)

    def cache_has(self, scope: str, key: str) -> bool:
        (found,) = self._run("cache_has", scope, key)
        return bool(found)

    def cache_clear(self, scope: str) -> None:
        self._run("cache_clear", scope)

    # -- counters ------------------------------------------------------------------------

    def counter_incr(self, scope: str, name: str, by: int = 1) -> int:
        check_metric_name("metrics.incr", name, self.limits)
        check_counter("metrics.incr", by)
        (value,) = self._run("counter_incr", scope, name, str(by))
        return int(value)

    def counter_set(self, scope: str, name: str, value: int) -> None:
        check_metric_name("metrics.set", name, self.limits)
        check_counter("metrics.set", value)
        self._run("counter_set", scope, name, str(value))

    def counter_get(self, scope: str, name: str) -> int | None:
        (value,) = self._run("counter_get", scope, name)
        return None if value is None else int(value)

    def counter_delete(self, scope: str, name: str) -> None:
        self._run("counter_delete", scope, name)

    def counter_reset(self, scope: str) -> None:
        self._run("counter_reset", scope)

    def counter_snapshot(self, scope: str) -> dict[str, int]:
        (flat,) = self._run("counter_snapshot", scope)
        pairs = zip(flat[::2], flat[1::2], strict=True)
        return {bytes(k).decode("utf-8"): int(v) for k, v in sorted(pairs)}

    def close(self) -> None:
        self._r.close()


def _safe(url: str) -> str:
    """The URL without a password."""
    if "@" in url:
        scheme, _, rest = url.partition("://")
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url
