"""The state backends (memory, and redis against a real server) behave alike."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from harness.errors import BuiltinError
from harness.state import StateBackend, open_backend
from harness.state.cache import BackendCache, BackendMetrics
from harness.state.limits import StateLimits
from harness.state.redis import StateError
from harness.state.spills import SpillStore


def test_outputs_expire(make: Callable[..., StateBackend]) -> None:
    backend = make(StateLimits(spill_ttl_s=1.0))
    backend.put_output("s", "out-a", b"\x00data\xff")
    assert backend.get_output("s", "out-a") == b"\x00data\xff"
    assert backend.get_output("t", "out-a") is None  # another scope
    time.sleep(1.3)
    assert backend.get_output("s", "out-a") is None
    assert backend.usage() == (0, 0)


def test_counters(backend: StateBackend) -> None:
    assert backend.counter_get("s", "calls") is None
    assert backend.counter_incr("s", "calls") == 1
    assert backend.counter_incr("s", "calls", 2) == 3
    backend.counter_set("s", "tool.echo", 7)
    assert backend.counter_get("s", "tool.echo") == 7
    assert backend.counter_snapshot("s") == {"calls": 3, "tool.echo": 7}
    assert backend.counter_snapshot("other") == {}
    backend.counter_delete("s", "tool.echo")
    assert backend.counter_snapshot("s") == {"calls": 3}
    backend.counter_reset("s")
    assert backend.counter_snapshot("s") == {}
    assert backend.usage() == (0, 0)


def test_spill_refs_are_scoped_and_unguessable(backend: StateBackend) -> None:
    store = SpillStore(backend, ttl_s=60)
    ref = store.put("token:alice", "héllo" * 10)
    assert ref.startswith("out-") and len(ref) >= 24
    assert store.get("token:alice", ref) == ("héllo" * 10).encode()
    assert store.get("token:bob", ref) is None
    assert store.get("token:alice", "out-1") is None
    assert store.get("token:alice", "../../etc") is None
    assert len({store.put("s", "x") for _ in range(50)}) == 50


def test_cache_values_are_scoped(backend: StateBackend) -> None:
    a, b = BackendCache(backend, "token:alice"), BackendCache(backend, "token:bob")
    a.set("k", {"n": [1, 2]})
    assert a.get("k") == {"n": [1, 2]}
    assert b.get("k", "none") == "none"
    a.delete("k")
    assert a.get("k") is None
    with pytest.raises(BuiltinError, match="not JSON-compatible"):
        a.set("bad", {1, 2})
    with pytest.raises(BuiltinError, match="limit is"):
        a.set("huge", "x" * (2 * 1024 * 1024))


def test_cache_has_clear_and_delete_answer_like_the_session_cache(backend: StateBackend) -> None:
    a, b = BackendCache(backend, "token:alice"), BackendCache(backend, "token:bob")
    a.set("k*", 1)  # glob characters in keys are literal
    a.set("k1", 2)
    b.set("k1", 3)
    assert a.has("k*") is True and a.has("nope") is False
    assert a.delete("k*") is True
    assert a.delete("k*") is False
    a.set("k*", 1)
    a.clear()
    assert a.has("k1") is False and a.has("k*") is False
    assert b.get("k1") == 3  # another scope's values survive clear()


def test_metrics_are_scoped_exact_and_bounded(make: Callable[..., StateBackend]) -> None:
    backend = make()
    a, b = BackendMetrics(backend, "token:alice"), BackendMetrics(backend, "token:bob")
    assert a.get("calls") == 0
    assert a.incr("calls") == 1
    assert a.incr("calls", 4) == 5
    assert a.incr("calls_total", 2**62) == 2**62  # exact beyond 2**53
    assert a.incr("calls_total", 5) == 2**62 + 5
    assert a.set("gauge", -3) == -3
    assert b.incr("calls") == 1
    assert a.snapshot() == {"calls": 5, "calls_total": 2**62 + 5, "gauge": -3}
    a.reset("calls")  # exactly that name, not every name it prefixes
    assert a.snapshot() == {"calls_total": 2**62 + 5, "gauge": -3}
    a.reset()
    assert a.snapshot() == {}
    assert b.snapshot() == {"calls": 1}
    small = BackendMetrics(make(StateLimits(session_metrics=2)), "token:carol")
    small.incr("one")
    small.incr("two")
    small.incr("two")  # an existing name is always fine
    with pytest.raises(BuiltinError, match="already has 2 metrics"):
        small.incr("three")


def test_a_failing_store_is_a_builtin_error_naming_the_function(redis_url: str) -> None:
    backend = open_backend("redis", redis_url, namespace=f"t-{uuid.uuid4().hex[:8]}")
    backend.close()
    backend._r.connection_pool.connection_kwargs["port"] = 1  # type: ignore[attr-defined]
    backend._r.connection_pool.reset()  # type: ignore[attr-defined]
    with pytest.raises(BuiltinError, match="metrics.incr: the shared state store failed"):
        BackendMetrics(backend, "s").incr("x")
    with pytest.raises(BuiltinError, match="cache.has: the shared state store failed"):
        BackendCache(backend, "s").has("x")


def test_unreachable_redis_is_one_clear_error() -> None:
    with pytest.raises(StateError, match=r"cannot reach Redis at redis://127\.0\.0\.1:1/0"):
        open_backend("redis", "redis://127.0.0.1:1/0")
    with pytest.raises(ValueError, match='unknown state backend "etcd"'):
        open_backend("etcd")
