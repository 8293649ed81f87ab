"""The checks and refusals of session state, by both backends (one wording).

The size checks of one input are functions here (:func:`check_metric_name`,
:func:`check_cache_entry`, :func:`check_output`, :func:`check_counter`); the bounds
that depend on what is stored (counts, bytes, the server-wide cap, eviction) are
refused with :func:`refusal`, by code: memory.py raises it, the Lua script of redis.py
returns the code and redis.py raises it. The bounds are :class:`StateLimits`'.

Accounting (the same in both backends): a cache entry costs its key's UTF-8 bytes plus
its JSON text; a counter its name's bytes plus :data:`COUNTER_COST`; a spilled output
its bytes plus its ref; a session holding anything :data:`SCOPE_COST` more. Items
are entries, counters and outputs.
"""

from __future__ import annotations

import hashlib
from typing import Any

from harness.errors import BuiltinError
from harness.state.limits import DEFAULT, StateLimits

COUNTER_COST = 8  # bytes a counter's value is accounted as (a 64-bit integer)
# bytes a session holding anything is accounted as on top of its items (its own
# dictionaries or keys): many sessions with one tiny item each cannot pass the cap unseen
SCOPE_COST = 1024
COUNTER_MAX = 2**63  # counters are signed 64-bit integers (Redis HINCRBY's range)

# The built-in a script called, for the messages of each backend method.
BUILTIN = {
    "put_output": "read_output",
    "get_output": "read_output",
    "cache_get": "cache.get",
    "cache_set": "cache.set",
    "cache_delete": "cache.delete",
    "cache_has": "cache.has",
    "cache_clear": "cache.clear",
    "counter_incr": "metrics.incr",
    "counter_set": "metrics.set",
    "counter_get": "metrics.get",
    "counter_delete": "metrics.reset",
    "counter_reset": "metrics.reset",
    "counter_snapshot": "metrics.snapshot",
}


def scope_tag(scope: str) -> str:
    """A fixed-length, key-safe tag for a client scope (identities may hold anything)."""
    return hashlib.sha256(scope.encode("utf-8")).hexdigest()[:24]


class StateLimitError(BuiltinError):
    """A write would break a limit of :class:`StateLimits`; nothing was stored."""


class StateEvicted(BuiltinError):
    """The session's state was evicted to keep the server under its cap; call again."""


# -- checks of one input (no stored state needed) -----------------------------------------


def check_metric_name(fn: str, name: Any, limits: StateLimits) -> int:
    """The bytes a counter named ``name`` costs; refuses a name over the limit."""
    if not isinstance(name, str) or len(name) > limits.metric_name_chars:
        size = len(name) if isinstance(name, str) else type(name).__name__
        raise StateLimitError(
            f"{fn}: a metric name has at most {limits.metric_name_chars} "
            f"characters, got {size}; use a short label"
        )
    return len(name.encode("utf-8")) + COUNTER_COST


def check_counter(fn: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= COUNTER_MAX:
        raise refusal("overflow", fn)
    return value


def check_cache_entry(key: Any, encoded: str, limits: StateLimits) -> int:
    """The bytes a cache entry costs; refuses a key or a value over the limits."""
    if not isinstance(key, str) or len(key) > limits.cache_key_chars:
        size = len(key) if isinstance(key, str) else type(key).__name__
        raise StateLimitError(
            f"cache.set: a cache key has at most {limits.cache_key_chars} characters, "
            f"got {size}; use a short key"
        )
    size = len(key.encode("utf-8")) + len(encoded.encode("utf-8"))
    if size > limits.cache_value_bytes:
        raise StateLimitError(
            f"cache.set: value for {key[:80]!r} is {size} bytes; the limit is "
            f"{limits.cache_value_bytes} bytes per value"
        )
    return size


def check_output(ref: str, data: bytes, limits: StateLimits) -> int:
    size = len(data) + len(ref)
    if size > limits.output_bytes:
        raise StateLimitError(
            f"read_output: an output of {size} bytes is over the limit of one kept "
            f"output ({limits.output_bytes} bytes); it is cut, not kept"
        )
    return size


# -- refusals that depend on what is stored (raised by code, by both backends) ------------


def refusal(code: str, fn: str, limits: StateLimits = DEFAULT, ref: str = "") -> BuiltinError:
    """The error for ``code``: a backend raises it (memory) or returns the code (redis)."""
    if code == "metrics":
        return StateLimitError(f"{fn}: this session already has {limits.session_metrics} metrics")
    if code == "entries":
        return StateLimitError(
            f"{fn}: the session cache is full ({limits.session_cache_entries} keys)"
        )
    if code == "bytes":
        return StateLimitError(
            f"{fn}: the session cache is full ({limits.session_cache_bytes} bytes)"
        )
    if code == "full":
        return StateLimitError(
            f"{fn}: the server's session state is full (state.max_bytes {limits.max_bytes} "
            f"bytes, state.max_keys {limits.max_items} items) with this session's own "
            "state alone; delete some of it"
        )
    if code == "overflow":
        return StateLimitError(f"{fn}: a counter holds a signed 64-bit integer; this overflows")
    if code == "evicted":
        return StateEvicted(
            f"{fn}: this session's cache and metrics were evicted to keep the server's "
            "session state under its cap (state.max_bytes / state.max_keys, least recently "
            "used sessions first); call again: they start empty"
        )
    if code == "gone":
        return StateEvicted(
            f'output ref "{ref}" expired: it was dropped to keep session state within its '
            "limits (the server's state.max_bytes / state.max_keys, or the outputs one "
            "session may keep); call the tool again for a new ref"
        )
    raise ValueError(f"unknown state refusal {code!r}")
