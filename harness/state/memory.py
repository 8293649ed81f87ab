"""The in-process state backend (the default): per-scope dictionaries behind one lock.

Scopes are kept least recently used first. Every write is accounted (bytes and items,
per scope and in total, as ``limits`` defines them) before it is stored: past a
session bound it is refused; past the server-wide cap the least recently used other
scopes are evicted first (remembered, so their next operation says so), then the
writer's own oldest outputs; if that is not enough it is refused. The redis backend
(redis.py) does the same in Lua, with the same limits and messages.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.state.checks import (
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


@dataclass(slots=True)
class _Scope:
    cache: dict[str, str] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, tuple[bytes, float]] = field(default_factory=dict)  # oldest first
    cache_bytes: int = 0
    counter_bytes: int = 0
    output_bytes: int = 0
    touched: float = 0.0

    @property
    def bytes(self) -> int:
        return self.cache_bytes + self.counter_bytes + self.output_bytes

    @property
    def items(self) -> int:
        return len(self.cache) + len(self.counters) + len(self.outputs)


def _cost(key: str, encoded: str) -> int:
    return len(key.encode("utf-8")) + len(encoded.encode("utf-8"))


class MemoryBackend:
    """Everything in this process; lost when it exits."""

    def __init__(
        self, limits: StateLimits = DEFAULT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self._scopes: OrderedDict[str, _Scope] = OrderedDict()  # least recently used first
        self._gone: OrderedDict[str, list[float | bool]] = OrderedDict()  # [when, unsaid]
        self._bytes = 0
        self._items = 0

    # -- scopes, accounting, eviction ----------------------------------------------------

    def _enter(self, scope: str, fn: str, *, consume: bool, create: bool) -> _Scope | None:
        """The scope (touched), after expiring idle ones; None if absent and not created.
        ``consume``: say once that the scope was evicted (cache and counter calls)."""
        now = self._clock()
        self._expire(now)
        tag = scope_tag(scope)
        gone = self._gone.get(tag)
        if consume and gone is not None and gone[1]:
            gone[1] = False
            raise refusal("evicted", fn, self.limits)
        s = self._scopes.get(tag)
        if s is None:
            if not create:
                return None
            s = self._scopes[tag] = _Scope()
        else:
            self._scopes.move_to_end(tag)
        s.touched = now
        return s

    def _settle(self, scope: str) -> None:
        """Forget a scope left empty (a refused first write keeps nothing)."""
        tag = scope_tag(scope)
        s = self._scopes.get(tag)
        if s is not None and s.items == 0:
            del self._scopes[tag]

    def _expire(self, now: float) -> None:
        ttl = self.limits.value_ttl_s
        while self._scopes:
            tag, s = next(iter(self._scopes.items()))
            if s.touched + ttl > now:
                break
            self._drop(tag)
        while self._gone:
            tag, (when, _) = next(iter(self._gone.items()))
            if float(when) + ttl > now and len(self._gone) <= self.limits.evicted_memory:
                break
            del self._gone[tag]

    def _drop(self, tag: str) -> None:
        s = self._scopes.pop(tag)
        self._bytes -= s.bytes
        self._items -= s.items

    def _mark_gone(self, tag: str, unsaid: bool) -> None:
        old = self._gone.pop(tag, None)
        self._gone[tag] = [self._clock(), unsaid or bool(old and old[1])]
        if len(self._gone) > self.limits.evicted_memory:
            self._gone.popitem(last=False)

    def _room(self, scope: str, size: int, items: int) -> bool:
        """Evict least recently used other scopes until ``size`` bytes and ``items``
        more fit under the server-wide cap; False if only this scope is left."""
        tag = scope_tag(scope)
        lim = self.limits
        while self._total() + size > lim.max_bytes or self._items + items > lim.max_items:
            victim = next((t for t in self._scopes if t != tag), None)
            if victim is None:
                return False
            self._drop(victim)
            self._mark_gone(victim, True)
        return True

    def _account(self, size: int, items: int) -> None:
        self._bytes += size
        self._items += items

    def _total(self) -> int:
        """Bytes held: payload, and SCOPE_COST per session holding anything (at rest
        every scope here holds something; a writer's new one counts from the start)."""
        return self._bytes + SCOPE_COST * len(self._scopes)

    def usage(self) -> tuple[int, int]:
        with self._lock:
            return self._total(), self._items

    # -- spilled outputs -----------------------------------------------------------------

    def _drop_oldest_output(self, scope: str, s: _Scope) -> None:
        ref, (data, _) = next(iter(s.outputs.items()))
        del s.outputs[ref]
        s.output_bytes -= len(data) + len(ref)
        self._account(-(len(data) + len(ref)), -1)
        self._mark_gone(scope_tag(scope), False)

    def _prune(self, s: _Scope, now: float) -> None:
        while s.outputs:
            ref, (data, expires) = next(iter(s.outputs.items()))
            if expires > now:
                break
            del s.outputs[ref]
            s.output_bytes -= len(data) + len(ref)
            self._account(-(len(data) + len(ref)), -1)

    def put_output(self, scope: str, ref: str, data: bytes) -> None:
        size = check_output(ref, data, self.limits)
        with self._lock:
            s = self._enter(scope, "read_output", consume=False, create=True)
            assert s is not None
            try:
                self._prune(s, s.touched)
                while s.outputs and s.output_bytes + size > self.limits.session_output_bytes:
                    self._drop_oldest_output(scope, s)
                while not self._room(scope, size, 1):
                    if not s.outputs:
                        raise refusal("full", "read_output", self.limits)
                    self._drop_oldest_output(scope, s)
                s.outputs[ref] = (bytes(data), s.touched + self.limits.spill_ttl_s)
                s.output_bytes += size
                self._account(size, 1)
            finally:
                self._settle(scope)

    def get_output(self, scope: str, ref: str) -> bytes | None:
        with self._lock:
            s = self._enter(scope, "read_output", consume=False, create=False)
            if s is not None:
                self._prune(s, s.touched)
                item = s.outputs.get(ref)
                if item is not None:
                    return item[0]
                self._settle(scope)
            gone = self._gone.get(scope_tag(scope))
            if gone is not None and float(gone[0]) + self.limits.spill_ttl_s > self._clock():
                raise refusal("gone", "read_output", self.limits, ref=ref)
            return None

    # -- cache values --------------------------------------------------------------------

    def cache_get(self, scope: str, key: str) -> str | None:
        with self._lock:
            s = self._enter(scope, "cache.get", consume=True, create=False)
            return None if s is None else s.cache.get(key)

    def cache_items(self, scope: str) -> dict[str, str]:
        """Every (key, encoded value) of a scope: a copy, for MemoryCache.copy."""
        with self._lock:
            s = self._scopes.get(scope)
            return dict(s.cache) if s is not None else {}

    def cache_has(self, scope: str, key: str) -> bool:
        with self._lock:
            s = self._enter(scope, "cache.has", consume=True, create=False)
            return s is not None and key in s.cache

    def cache_set(self, scope: str, key: str, encoded: str) -> None:
        size = check_cache_entry(key, encoded, self.limits)
        lim = self.limits
        with self._lock:
            s = self._enter(scope, "cache.set", consume=True, create=True)
            assert s is not None
            try:
                old = s.cache.get(key)
                was = 0 if old is None else _cost(key, old)
                if old is None and len(s.cache) >= lim.session_cache_entries:
                    raise refusal("entries", "cache.set", lim)
                if s.cache_bytes - was + size > lim.session_cache_bytes:
                    raise refusal("bytes", "cache.set", lim)
                if not self._room(scope, size - was, old is None):
                    raise refusal("full", "cache.set", lim)
                s.cache[key] = encoded
                s.cache_bytes += size - was
                self._account(size - was, old is None)
            finally:
                self._settle(scope)

    def cache_delete(self, scope: str, key: str) -> bool:
        with self._lock:
            s = self._enter(scope, "cache.delete", consume=True, create=False)
            old = None if s is None else s.cache.pop(key, None)
            if s is None or old is None:
                return False
            s.cache_bytes -= _cost(key, old)
            self._account(-_cost(key, old), -1)
            self._settle(scope)
            return True

    def cache_clear(self, scope: str) -> None:
        with self._lock:
            s = self._enter(scope, "cache.clear", consume=True, create=False)
            if s is not None:
                self._account(-s.cache_bytes, -len(s.cache))
                s.cache.clear()
                s.cache_bytes = 0
                self._settle(scope)

    # -- counters ------------------------------------------------------------------------

    def _write_counter(self, fn: str, scope: str, name: str, value: Callable[[int], int]) -> int:
        cost = check_metric_name(fn, name, self.limits)
        with self._lock:
            s = self._enter(scope, fn, consume=True, create=True)
            assert s is not None
            try:
                new = name not in s.counters
                result = check_counter(fn, value(s.counters.get(name, 0)))
                if new and len(s.counters) >= self.limits.session_metrics:
                    raise refusal("metrics", fn, self.limits)
                if new and not self._room(scope, cost, 1):
                    raise refusal("full", fn, self.limits)
                s.counters[name] = result
                if new:
                    s.counter_bytes += cost
                    self._account(cost, 1)
                return result
            finally:
                self._settle(scope)

    def counter_incr(self, scope: str, name: str, by: int = 1) -> int:
        check_counter("metrics.incr", by)
        return self._write_counter("metrics.incr", scope, name, lambda old: old + by)

    def counter_set(self, scope: str, name: str, value: int) -> None:
        check_counter("metrics.set", value)
        self._write_counter("metrics.set", scope, name, lambda old: value)

    def counter_get(self, scope: str, name: str) -> int | None:
        with self._lock:
            s = self._enter(scope, "metrics.get", consume=True, create=False)
            return None if s is None else s.counters.get(name)

    def counter_delete(self, scope: str, name: str) -> None:
        with self._lock:
            s = self._enter(scope, "metrics.reset", consume=True, create=False)
            if s is not None and name in s.counters:
                del s.counters[name]
                cost = len(name.encode("utf-8")) + COUNTER_COST
                s.counter_bytes -= cost
                self._account(-cost, -1)
                self._settle(scope)

    def counter_reset(self, scope: str) -> None:
        with self._lock:
            s = self._enter(scope, "metrics.reset", consume=True, create=False)
            if s is not None:
                self._account(-s.counter_bytes, -len(s.counters))
                s.counters.clear()
                s.counter_bytes = 0
                self._settle(scope)

    def counter_snapshot(self, scope: str) -> dict[str, int]:
        with self._lock:
            s = self._enter(scope, "metrics.snapshot", consume=True, create=False)
            return {} if s is None else dict(sorted(s.counters.items()))

    def close(self) -> None:
        with self._lock:
            self._scopes.clear()
            self._gone.clear()
            self._bytes = self._items = 0
