"""One set of limits (harness/state/limits.py), enforced by both backends alike (issue 22
item 6, and the server-wide bound of item 5).

The walk: every public method of ``StateBackend`` is classified in ``WRITE_PATHS``
(stores something: each listed limit has a case here, run on both backends) or
``READ_PATHS`` (checked to store nothing), and every ``StateLimits`` field is enforced
by some write path. A new write path, or a new limit, without a case fails here.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable
from dataclasses import replace

import pytest

import harness.state as state_pkg
from harness.state import READ_PATHS, WRITE_PATHS, StateBackend
from harness.state.checks import SCOPE_COST, StateEvicted, StateLimitError
from harness.state.limits import StateLimits, limit_names

Make = Callable[..., StateBackend]
BIG = StateLimits(max_bytes=1 << 40, max_items=1 << 30)


# -- one item of each write path, and what an evicted one looks like -----------------------


def write(b: StateBackend, method: str, scope: str, i: int) -> None:
    if method == "put_output":
        b.put_output(scope, f"out-{i:04d}", b"o" * 200)
    elif method == "cache_set":
        b.cache_set(scope, f"k{i:04d}", json.dumps("c" * 200))
    elif method == "counter_incr":
        b.counter_incr(scope, f"m{i:04d}", 3)
    else:
        assert method == "counter_set"
        b.counter_set(scope, f"m{i:04d}", 3)


def read(b: StateBackend, method: str, scope: str, i: int) -> object:
    if method == "put_output":
        return b.get_output(scope, f"out-{i:04d}")
    if method == "cache_set":
        return b.cache_get(scope, f"k{i:04d}")
    return b.counter_get(scope, f"m{i:04d}")


def assert_evicted(b: StateBackend, method: str, scope: str, i: int) -> None:
    """An evicted item says so: a ref on every read, a cache or counter once."""
    with pytest.raises(StateEvicted, match="call (the tool )?again"):
        read(b, method, scope, i)
    if method == "put_output":
        with pytest.raises(StateEvicted, match="expired"):
            read(b, method, scope, i)
    else:
        assert read(b, method, scope, i) is None  # told once; then empty


def cost(make: Make, method: str) -> int:
    """The bytes one item of ``method`` is accounted as (without its session's cost)."""
    probe = make(BIG)
    write(probe, method, "probe", 0)
    one, _ = probe.usage()
    write(probe, method, "probe", 1)
    two, _ = probe.usage()
    assert one - (two - one) == SCOPE_COST
    return two - one


# -- the walk -------------------------------------------------------------------------------


def protocol_methods() -> set[str]:
    return {
        n
        for n, v in vars(state_pkg.StateBackend).items()
        if not n.startswith("_") and inspect.isfunction(v)
    }


def test_every_backend_method_is_a_write_path_or_a_read_path() -> None:
    assert set(WRITE_PATHS).isdisjoint(READ_PATHS)
    unclassified = protocol_methods() - set(WRITE_PATHS) - set(READ_PATHS)
    assert not unclassified, (
        f"StateBackend methods {sorted(unclassified)} are in neither WRITE_PATHS (with the "
        "limits they enforce, and a case in this file) nor READ_PATHS (harness/state)"
    )
    assert set(WRITE_PATHS) | set(READ_PATHS) == protocol_methods()


def test_every_limit_is_enforced_by_a_write_path() -> None:
    enforced = {f for fields in WRITE_PATHS.values() for f in fields}
    assert enforced == set(limit_names())


@pytest.mark.parametrize("method", sorted(READ_PATHS))
def test_read_paths_store_nothing(make: Make, method: str) -> None:
    b = make(BIG)
    for m in WRITE_PATHS:
        write(b, m, "s", 1)
    before = b.usage()
    args = [p for p in inspect.signature(getattr(b, method)).parameters.values()]
    values = {"scope": "s", "ref": "out-0001", "key": "k0001", "name": "m0001"}
    for scope in ("s", "other"):
        call = [values[p.name] if p.name != "scope" else scope for p in args]
        getattr(b, method)(*call)
        if method == "close":
            return
        assert b.usage() <= before, f"{method} stored something"


def pairs() -> list[tuple[str, str]]:
    return sorted((m, f) for m, fields in WRITE_PATHS.items() for f in fields)


@pytest.mark.parametrize(("method", "field"), pairs())
def test_every_write_path_enforces_its_limits(make: Make, method: str, field: str) -> None:
    case = CASES.get(field)
    assert case is not None, f"no case for limit {field} (WRITE_PATHS[{method!r}])"
    case(make, method)


# -- the cases, one per limit ---------------------------------------------------------------


def metric_name_chars(make: Make, method: str) -> None:
    b = make(replace(BIG, metric_name_chars=8))
    fn = {"counter_incr": "metrics.incr", "counter_set": "metrics.set"}[method]
    with pytest.raises(StateLimitError, match=f"^{fn}: a metric name has at most 8 char"):
        getattr(b, method)("s", "n" * 9, 1)
    getattr(b, method)("s", "n" * 8, 1)
    assert b.counter_snapshot("s") == {"n" * 8: 1}


def session_metrics(make: Make, method: str) -> None:
    b = make(replace(BIG, session_metrics=2))
    write(b, method, "s", 1)
    write(b, method, "s", 2)
    write(b, method, "s", 2)  # an existing name is always fine
    write(b, method, "t", 3)  # another session
    with pytest.raises(StateLimitError, match="this session already has 2 metrics$"):
        write(b, method, "s", 3)


def cache_key_chars(make: Make, method: str) -> None:
    b = make(replace(BIG, cache_key_chars=10))
    with pytest.raises(StateLimitError, match="a cache key has at most 10 characters, got 11"):
        b.cache_set("s", "k" * 11, "1")
    b.cache_set("s", "k" * 10, "1")


def cache_value_bytes(make: Make, method: str) -> None:
    b = make(replace(BIG, cache_value_bytes=100))
    with pytest.raises(StateLimitError, match="is 101 bytes; the limit is 100 bytes per value"):
        b.cache_set("s", "k", "v" * 100)
    b.cache_set("s", "k", "v" * 99)


def session_cache_entries(make: Make, method: str) -> None:
    b = make(replace(BIG, session_cache_entries=3))
    for i in range(3):
        write(b, method, "s", i)
    write(b, method, "s", 0)  # replacing is fine
    with pytest.raises(StateLimitError, match=r"cache.set: the session cache is full \(3 keys"):
        write(b, method, "s", 3)
    b.cache_delete("s", "k0000")
    write(b, method, "s", 3)


def session_cache_bytes(make: Make, method: str) -> None:
    one = cost(make, method)
    b = make(replace(BIG, session_cache_bytes=3 * one))
    for i in range(3):
        write(b, method, "s", i)
    with pytest.raises(StateLimitError, match=rf"the session cache is full \({3 * one} bytes"):
        write(b, method, "s", 3)
    write(b, method, "t", 3)  # another session has its own
    b.cache_clear("s")
    write(b, method, "s", 3)
    assert b.usage() == (2 * one + 2 * SCOPE_COST, 2)


def output_bytes(make: Make, method: str) -> None:
    b = make(replace(BIG, output_bytes=1000))
    with pytest.raises(StateLimitError, match="1001 bytes is over the limit of one kept output"):
        b.put_output("s", "out-1", b"x" * 996)
    b.put_output("s", "out-1", b"x" * 995)
    assert b.usage() == (1000 + SCOPE_COST, 1)


def session_output_bytes(make: Make, method: str) -> None:
    one = cost(make, method)
    b = make(replace(BIG, session_output_bytes=3 * one))
    for i in range(5):
        write(b, method, "s", i)
        assert b.usage()[0] <= 3 * one + SCOPE_COST
    assert_evicted(b, method, "s", 0)  # the oldest outputs of the session were dropped
    assert_evicted(b, method, "s", 1)
    assert read(b, method, "s", 4) is not None


def spill_ttl_s(make: Make, method: str) -> None:
    b = make(replace(BIG, spill_ttl_s=1.0))
    write(b, method, "s", 0)
    assert read(b, method, "s", 0) is not None
    time.sleep(1.3)
    assert read(b, method, "s", 0) is None  # expired: unknown, like any old ref
    assert b.usage() == (0, 0)


def value_ttl_s(make: Make, method: str) -> None:
    b = make(replace(BIG, value_ttl_s=1.0, spill_ttl_s=1.0))
    write(b, method, "s", 0)
    write(b, method, "t", 0)
    assert b.usage()[1] == 2
    time.sleep(1.3)
    assert read(b, method, "u", 0) is None  # any operation expires idle sessions
    assert b.usage() == (0, 0)
    assert read(b, method, "s", 0) is None  # expired quietly: not an eviction


def _server_cap(make: Make, method: str, limits: StateLimits) -> StateBackend:
    """Session "old" writes 6 items, "new" 6 more, under a cap of 10 items' worth."""
    b = make(limits)
    for i in range(6):
        write(b, method, "old", i)
    for i in range(6):
        write(b, method, "new", i)
        size, items = b.usage()
        assert size <= limits.max_bytes and items <= limits.max_items
    for i in range(6):
        assert read(b, method, "new", i) is not None
    assert_evicted(b, method, "old", 0)
    return b


def max_bytes(make: Make, method: str) -> None:
    one = cost(make, method)
    _server_cap(make, method, replace(BIG, max_bytes=10 * one + 2 * SCOPE_COST))
    # One session alone over the cap: its own oldest outputs go, anything else is refused.
    b = make(replace(BIG, max_bytes=3 * one + SCOPE_COST))
    for i in range(3):
        write(b, method, "s", i)
    if method == "put_output":
        write(b, method, "s", 3)
        assert_evicted(b, method, "s", 0)
    else:
        with pytest.raises(StateLimitError, match="the server's session state is full"):
            write(b, method, "s", 3)
    assert b.usage() == (3 * one + SCOPE_COST, 3)
    many_small_sessions(make, method)


def many_small_sessions(make: Make, method: str) -> None:
    """Sessions holding one tiny item each are accounted SCOPE_COST each: their number
    is bounded by the byte cap too."""
    one = cost(make, method)
    b = make(replace(BIG, max_bytes=5 * (one + SCOPE_COST)))
    for i in range(8):
        write(b, method, f"s{i}", 0)
        assert b.usage()[0] <= 5 * (one + SCOPE_COST)
    assert b.usage()[1] == 5
    assert_evicted(b, method, "s0", 0)


def max_items(make: Make, method: str) -> None:
    _server_cap(make, method, replace(BIG, max_items=10))


def evicted_memory(make: Make, method: str) -> None:
    one = cost(make, method)
    b = make(replace(BIG, max_bytes=2 * (one + SCOPE_COST), evicted_memory=1))
    write(b, method, "a", 0)
    write(b, method, "b", 0)
    write(b, method, "c", 0)  # evicts a
    write(b, method, "d", 0)  # evicts b; only one eviction is remembered
    assert read(b, method, "a", 0) is None  # forgotten: quietly empty
    assert_evicted(b, method, "b", 0)


CASES: dict[str, Callable[[Make, str], None]] = {
    f.__name__: f
    for f in (
        metric_name_chars,
        session_metrics,
        cache_key_chars,
        cache_value_bytes,
        session_cache_entries,
        session_cache_bytes,
        output_bytes,
        session_output_bytes,
        spill_ttl_s,
        value_ttl_s,
        max_bytes,
        max_items,
        evicted_memory,
    )
}


def test_both_backends_refuse_with_the_same_words(redis_url: str) -> None:
    import uuid

    from harness.state import open_backend

    def refusals(b: StateBackend) -> list[str]:
        said = []
        attempts: list[Callable[[], object]] = [
            lambda: b.counter_incr("s", "x" * 300),
            lambda: b.counter_set("s", "m2", 1),
            lambda: b.counter_incr("s", "m1", 2**63 - 1),
            lambda: b.cache_set("s", "k" * 2000, "1"),
            lambda: b.cache_set("s", "k", "1" * 200),
            lambda: b.cache_set("s", "k3", "1"),
            lambda: b.put_output("s", "out-1", b"x" * 300),
        ]
        b.counter_incr("s", "m1", 5)
        b.cache_set("s", "k1", "1")
        b.cache_set("s", "k2", "1")
        for attempt in attempts:
            try:
                attempt()
            except StateLimitError as exc:
                said.append(str(exc))
        return said

    limits = replace(
        BIG, session_metrics=1, session_cache_entries=2, cache_value_bytes=100, output_bytes=200
    )
    memory = refusals(open_backend("memory", limits=limits))
    ns = f"t-{uuid.uuid4().hex[:8]}"
    redis_said = refusals(open_backend("redis", redis_url, namespace=ns, limits=limits))
    assert len(memory) == 7
    assert memory == redis_said
