"""Every limit on session state: one set (:class:`StateLimits`) for both backends.

:class:`StateLimits` owns each bound (names, keys, values, counts, bytes per session,
bytes and items per server, expiry); checks.py owns every check and refusal message;
the memory and the redis backend enforce the same instance with those checks. Issue 22
item 6: the redis backend used to accept 1 MB metric names, counters that never
expired and 40 MB of cache in one session that the memory backend refused.

A leaf module (config.py reads its defaults and cross-checks).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class StateLimits:
    """Every bound on the state of ``harness serve`` sessions (scopes) and the server.

    The harness.md keys (``state.*``) are named in the comments; the rest are fixed."""

    # one item
    metric_name_chars: int = 256  # a metrics name (a label)
    cache_key_chars: int = 1024  # a cache key
    cache_value_bytes: int = 1 * MIB  # one cache entry: key bytes + JSON text
    output_bytes: int = 32 * MIB  # one spilled output (a bigger one is cut, not kept)
    # one session (one client scope)
    session_metrics: int = 10_000  # counter names
    session_cache_entries: int = 10_000
    session_cache_bytes: int = 16 * MIB  # state.max_session_bytes
    session_output_bytes: int = 64 * MIB  # spilled outputs; the oldest are dropped past it
    # the whole server (every session): least recently used sessions are evicted past it
    max_bytes: int = 256 * MIB  # state.max_bytes
    max_items: int = 200_000  # state.max_keys: cache entries + counters + outputs
    # expiry
    spill_ttl_s: float = 3600.0  # state.spill_ttl_s: a read_output ref
    value_ttl_s: float = 7 * 24 * 3600.0  # state.value_ttl_s: a session left idle
    evicted_memory: int = 10_000  # evicted sessions remembered (to say so once)

    @property
    def spill_ms(self) -> int:
        return max(1, int(self.spill_ttl_s * 1000))

    @property
    def value_ms(self) -> int:
        return max(1, int(self.value_ttl_s * 1000))


DEFAULT = StateLimits()

# harness.md key (state.<key>) -> StateLimits field
CONFIG_KEYS = {
    "max_bytes": "max_bytes",
    "max_keys": "max_items",
    "max_session_bytes": "session_cache_bytes",
    "spill_ttl_s": "spill_ttl_s",
    "value_ttl_s": "value_ttl_s",
}


def from_config(state: Any) -> StateLimits:
    """The limits a ``state`` config section (config.StateConfig) sets."""
    return StateLimits(**{f: getattr(state, k) for k, f in CONFIG_KEYS.items()})


def config_problems(state: Any) -> list[tuple[str, str]]:
    """(key, message) for limits that contradict each other in a ``state`` section."""
    found = []
    if state.max_session_bytes > state.max_bytes:
        found.append(
            (
                "max_session_bytes",
                f"config state.max_session_bytes ({state.max_session_bytes}) is over "
                f"state.max_bytes ({state.max_bytes}), the cap of every session together; "
                "lower it or raise state.max_bytes",
            )
        )
    if state.spill_ttl_s > state.value_ttl_s:
        found.append(
            (
                "spill_ttl_s",
                f"config state.spill_ttl_s ({state.spill_ttl_s}) is over state.value_ttl_s "
                f"({state.value_ttl_s}), after which an idle session's state (its refs "
                "too) is dropped; lower it or raise state.value_ttl_s",
            )
        )
    return found


def limit_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(StateLimits))
