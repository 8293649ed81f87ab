"""Hostile scripts under process isolation: each fails only its own call, with a
message that says what happened, and the harness process stays small."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config import Config, Limits
from harness.runtime.builtins.cache import MemoryCache
from harness.runtime.context import CallContext
from harness.runtime.workers import ProcessRuntime

OK = 'def run(args):\n    return {"fine": args.get("n", 0)}\n'
MEMORY = "exceeded its memory limit (512 MB)"

BOMBS = {
    # one Rust allocation larger than the cap: the allocator aborts the worker
    "string": 'len("x" * 1500000000)',
    # the Starlark heap's bump allocator panics (caught in the worker, which is recycled)
    "range_list": "len(list(range(300000000)))",
    # 16 GB for one list: an allocation failure, not a capacity overflow
    "list_repeat": "len([0] * 2000000000)",
    # the same with the size coming from the arguments (no constant folding)
    "string_from_args": 'len("x" * args["n"])',
    # growth in a loop: many small allocations until the cap
    "doubling": 'len(grow(args["n"]))',
}
GROW = 'def grow(n):\n    s = "xx"\n    for i in range(n):\n        s = s + s\n    return s\n'


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def rt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessRuntime]:
    root = tmp_path_factory.mktemp("bombs")
    runtime = ProcessRuntime(Config(root=root, workspace=root, limits=Limits(max_concurrency=2)))
    yield runtime
    runtime.close()


def ctx(rt: ProcessRuntime) -> CallContext:
    return CallContext(config=rt.config, tool="bomb", cache=MemoryCache())


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_memory_bombs_hit_the_cap_and_the_next_call_succeeds(rt: ProcessRuntime, name: str) -> None:
    assert rt.run_tool(OK, "ok", 1, {}, ctx(rt), 0).status == "ok"
    before = rss_kb()
    script = GROW + "def run(args):\n    return " + BOMBS[name] + "\n"
    n = 40 if name == "doubling" else 1_500_000_000
    out = rt.run_tool(script, f"{name}.md", 1, {"n": n}, ctx(rt), 60000)
    assert (out.status, out.error) == ("memory", MEMORY)
    assert rss_kb() - before < 50 * 1024  # the harness process did not pay for it
    again = rt.run_tool(OK, "ok", 1, {"n": 7}, ctx(rt), 10000)
    assert (again.status, again.value) == ("ok", {"fine": 7})


def test_unbounded_recursion_is_an_error_result(rt: ProcessRuntime) -> None:
    script = "def f(n):\n    return f(n + 1)\ndef run(args):\n    return f(0)\n"
    out = rt.run_tool(script, "rec.md", 1, {}, ctx(rt), 5000)
    assert out.status == "error"
    assert "recursion too deep (more than 64 frames)" in (out.error or "")
    assert rt.run_tool(OK, "ok", 1, {"n": 1}, ctx(rt), 5000).value == {"fine": 1}


def test_a_bomb_inside_a_hook_is_contained_too(rt: ProcessRuntime) -> None:
    hook = 'def handle(event, payload):\n    return block("x" * 1500000000)\n'
    out = rt.run_hook(hook, "hooks/h.md", 1, "tool.pre", {}, ctx(rt), 5000)
    assert (out.status, out.error) == ("memory", MEMORY)
    when = rt.eval_when('len("y" * 1500000000) > 0', "hooks/h.md", 2, "tool.pre", {}, ctx(rt), 5000)
    assert (when.status, when.error) == ("memory", MEMORY)


def test_the_cap_follows_limits_memory_mb(tmp_path: Path) -> None:
    cfg = Config(root=tmp_path, workspace=tmp_path, limits=Limits(max_concurrency=1, memory_mb=256))
    with ProcessRuntime(cfg) as small:
        script = 'def run(args):\n    return len("x" * 300000000)\n'
        out = small.run_tool(script, "t", 1, {}, CallContext(config=cfg), 30000)
        assert (out.status, out.error) == ("memory", "exceeded its memory limit (256 MB)")
    with ProcessRuntime(cfg) as small:
        # ... and 50 MB still fit in 256 MB
        script = 'def run(args):\n    return len("x" * 50000000)\n'
        out = small.run_tool(script, "t", 1, {}, CallContext(config=cfg), 60000)
        assert (out.status, out.value) == ("ok", 50000000)


def test_a_cap_too_small_to_start_a_worker_says_so(tmp_path: Path) -> None:
    cfg = Config(root=tmp_path, workspace=tmp_path, limits=Limits(max_concurrency=1, memory_mb=8))
    with ProcessRuntime(cfg) as tiny:
        out = tiny.run_tool(OK, "t", 1, {}, CallContext(config=cfg), 1000)
    assert out.status == "crash"
    assert (out.error or "").startswith("crashed (the worker did not start")
    assert "limits.memory_mb = 8 is likely too small" in (out.error or "")


def test_many_bombs_at_once_leave_the_pool_working(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    cfg = Config(root=tmp_path, workspace=tmp_path, limits=Limits(max_concurrency=3))
    with ProcessRuntime(cfg) as pool:
        bomb = 'def run(args):\n    return len("x" * 1500000000)\n'

        def one(i: int) -> tuple[str, object]:
            script = bomb if i % 2 else OK
            out = pool.run_tool(script, "t", 1, {"n": i}, CallContext(config=cfg), 30000)
            return out.status, out.value

        with ThreadPoolExecutor(6) as ex:
            outs = list(ex.map(one, range(12)))
        assert outs == [("memory", None) if i % 2 else ("ok", {"fine": i}) for i in range(12)]
    assert os.getpid()  # and the test process is still here
