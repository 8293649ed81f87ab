"""Third attack review (issue 22), items 5 and 6: session state is bounded, the same way
in both backends, per session and server-wide.

Item 6: the redis backend accepted metric names of 1 MB, counters that never expired
and 40 MB of cache in one session, though the memory backend refused them. Item 5: 40
sessions filling their cache took ``harness serve`` from 84 MB to 701 MB (no cap on
every session's state together). Stored bytes are measured through the backend's own
accounting (``usage()``), never RSS or timing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import BuiltinError
from harness.state import StateBackend, open_backend
from harness.state.cache import BackendCache, BackendMetrics

MIB = 1024 * 1024


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest) -> Iterator[StateBackend]:
    if request.param == "memory":
        b = open_backend("memory")
    else:
        url = request.getfixturevalue("redis_url")
        b = open_backend("redis", url, namespace=f"a3-{uuid.uuid4().hex[:8]}")
    try:
        yield b
    finally:
        b.close()


# -- item 6: one set of limits in both backends ---------------------------------------


def test_a_huge_metric_name_is_refused_by_every_backend(backend: StateBackend) -> None:
    metrics = BackendMetrics(backend, "token:mallory")
    with pytest.raises(BuiltinError, match="metrics.incr: a metric name has at most 256 char"):
        metrics.incr("x" * 1_000_000)
    with pytest.raises(BuiltinError, match="metrics.set: a metric name has at most 256 char"):
        metrics.set("y" * 1_000_000, 1)
    assert metrics.snapshot() == {}
    metrics.incr("n" * 256)  # the limit itself is fine
    assert metrics.get("n" * 256) == 1


def test_one_session_cannot_hold_40_mb_of_cache(backend: StateBackend) -> None:
    cache = BackendCache(backend, "token:mallory")
    value = "v" * (MIB - 100)  # under the per-value limit
    stored = 0
    with pytest.raises(BuiltinError, match=r"cache.set: the session cache is full \(16777216"):
        for i in range(40):
            cache.set(f"k{i}", value)
            stored += 1
    assert stored < 17
    assert cache.has("k0") and not cache.has("k39")


def test_every_redis_key_expires(redis_url: str) -> None:
    """Counters (and every other key) of the redis backend carry a TTL: a session that
    stops coming back leaves nothing behind for ever."""
    import redis

    ns = f"a3-{uuid.uuid4().hex[:8]}"
    backend = open_backend("redis", redis_url, namespace=ns)
    try:
        BackendMetrics(backend, "token:alice").incr("calls")
        BackendMetrics(backend, "token:bob").set("gauge", 5)
        BackendCache(backend, "token:alice").set("k", [1])
        r = redis.Redis.from_url(redis_url)
        keys = list(r.scan_iter(match=f"{ns}:*"))
        assert keys
        never = [k for k in keys if r.pttl(k) < 0]
        assert never == [], f"keys without a TTL: {never}"
    finally:
        backend.close()


# -- item 5: a server-wide bound, least recently used sessions evicted ------------------

FILL = """\
---
parameters:
  n: {type: integer, required: true}
script: |
  def run(args):
      for i in range(args["n"]):
          cache.set("k" + str(i), "v" * 100000)
      metrics.incr("fills")
      return "filled"
---
Fills the session cache.
"""

PEEK = """\
---
script: |
  def run(args):
      return {"k0": cache.get("k0") != None, "fills": metrics.get("fills")}
---
Reports what the session cache still holds.
"""

BIG = """\
---
script: |
  def run(args):
      return "x" * 5000
---
An output bigger than max_output_bytes: spilled, read back through read_output.
"""


def _project(tmp_path: Path, state: str) -> Path:
    tools = tmp_path / ".harness" / "tools"
    tools.mkdir(parents=True)
    (tmp_path / "harness.md").write_text(
        "---\nruntime: {isolation: inprocess}\nlimits: {max_output_bytes: 1024}\n"
        f"state: {{{state}max_bytes: {8 * MIB}, max_session_bytes: {MIB}}}\n---\nA\n"
    )
    (tools / "fill.md").write_text(FILL)
    (tools / "peek.md").write_text(PEEK)
    (tools / "big.md").write_text(BIG)
    return tmp_path


@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_40_sessions_filling_their_cache_stay_under_the_server_cap(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    from harness.serve.mcp import HarnessMCPServer

    state = ""
    if kind == "redis":
        url = request.getfixturevalue("redis_url")
        state = f'backend: redis, url: "{url}", namespace: "a3-{uuid.uuid4().hex[:8]}", '
    server = HarnessMCPServer(_project(tmp_path, state))
    try:
        sessions, refs = [], []
        for i in range(40):
            session = server._new_session(server.gen, f"token:user{i}")
            big = session.call("big", {})
            ref = big.text.split('ref="')[1].split('"')[0] if 'ref="' in big.text else ""
            assert ref.startswith("out-"), big.text
            filled = session.call("fill", {"n": 9})  # ~900 KB each: 36 MB in all
            assert not filled.is_error, filled.text
            sessions.append(session)
            refs.append(ref)

        # The oldest session's cache was evicted: its next call says so, clearly, once.
        first = sessions[0].call("peek", {})
        assert first.is_error, first.text
        assert "evicted" in first.text and "call again" in first.text, first.text
        again = sessions[0].call("peek", {})
        assert not again.is_error and again.value == {"k0": False, "fills": 0}, again.text
        # Its spilled output too: a clear "expired, call the tool again", never silence.
        page = sessions[0].call("read_output", {"ref": refs[0]})
        assert page.is_error and "expired" in page.text, page.text
        assert "call the tool again" in page.text, page.text
        # The newest sessions keep everything.
        last = sessions[-1].call("peek", {})
        assert last.value == {"k0": True, "fills": 1}, last.text
        assert not sessions[-1].call("read_output", {"ref": refs[-1]}).is_error
        # Everything the server holds, by the backend's own accounting, is under the cap.
        size, _items = server.backend.usage()  # type: ignore[attr-defined]
        assert 4 * MIB < size <= 8 * MIB
    finally:
        server.close()


# -- reopened class: metric name length came back through a second store ------------------

# Classes that offer the cache or metrics methods without being a store of their own.
NOT_STORES = {
    "CacheProxy": "a worker's cache: every call is a round trip to the host's store",
    "CacheStore": "the protocol",
    "Metrics": "the protocol",
    "Scratchpad": "ctx, one turn's pad, bounded by MAX_PAD_BYTES; not kept across calls",
}


def test_every_store_of_session_state_is_a_backend_store() -> None:
    """Any class in harness offering cache.* or metrics.* methods is BackendCache or
    BackendMetrics (over a state backend, so under StateLimits), or is listed above: a
    new store with rules of its own fails here."""
    import ast

    import harness

    cache_methods = {"get", "set", "delete", "has", "clear"}
    metrics_methods = {"incr", "set", "get", "reset", "snapshot"}
    found = {}
    for path in Path(harness.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                methods = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
                if cache_methods <= methods or metrics_methods <= methods:
                    found[node.name] = path.name
    assert set(found) - set(NOT_STORES) == {"BackendCache", "BackendMetrics"}, found

    from harness.runtime.builtins.cache import MemoryCache
    from harness.runtime.builtins.session_state import MetricsStore
    from harness.state.memory import MemoryBackend

    for store in (MemoryCache(), MetricsStore()):
        assert isinstance(store, (BackendCache, BackendMetrics))
        assert isinstance(store._backend, MemoryBackend)
    with pytest.raises(BuiltinError, match="metrics.incr: a metric name has at most 256"):
        MetricsStore().incr("x" * 1_000_000)
