"""The process pool (runtime.isolation: process): results, shared cache, concurrency,
deadlines, shutdown. Real worker processes, real Starlark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import harness
from harness.config import Config, ExecConfig, Limits
from harness.runtime.builtins.cache import MemoryCache
from harness.runtime.context import CallContext
from harness.runtime.engine import InProcessRuntime
from harness.runtime.workers import ProcessRuntime

# Spins without allocating: a running sum would pass 2**31 and allocate a big integer on
# the Starlark heap each step, which a loaded machine can drive into the memory cap
# before the deadline is noticed (the worker then rightly reports memory, not timeout).
SPIN = (
    "def run(args):\n    n = 0\n    for i in range(1000000000):\n"
    "        n = (n + i) % 1000\n    return n\n"
)
ECHO = "def run(args):\n    return args\n"


def exited(pid: int) -> bool:
    """The process is gone or a zombie: it has closed its files (unlike a process whose
    cmdline is already empty while it is still exiting)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2 :].split()[0] in (b"Z", b"X")


def worker_pids(parent: int | None = None) -> set[int]:
    """Live (non-zombie) worker processes started by ``parent`` (default: this process)."""
    parent = os.getpid() if parent is None else parent
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
            cmd = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        if fields[0] != b"Z" and int(fields[1]) == parent and b"worker_main" in cmd:
            found.add(int(name))
    return found


def sleeping(marker: str) -> list[int]:
    """Live ``sleep MARKER`` processes (in or out of the exec sandbox)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if argv[0].endswith(b"sleep") and marker.encode() in argv[1:] and state != b"Z":
            found.append(int(name))
    return found


def wait_until(pred: Any, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return bool(pred())


def config(tmp_path: Path, concurrency: int = 2, **limits: Any) -> Config:
    return Config(
        root=tmp_path, workspace=tmp_path, limits=Limits(max_concurrency=concurrency, **limits)
    )


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[ProcessRuntime]:
    runtime = ProcessRuntime(config(tmp_path))
    yield runtime
    runtime.close()
    assert not worker_pids()


class Session:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.cache = MemoryCache()
        self.logs: list[tuple[str, str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def log(self, level: str, msg: str, fields: Any) -> None:
        with self.lock:
            self.logs.append((level, msg, dict(fields)))

    def ctx(self, tool: str = "t") -> CallContext:
        return CallContext(
            config=self.cfg,
            session_id="s1",
            call_id="c1",
            tool=tool,
            cache=self.cache,
            log=self.log,
        )


# -- same results as in-process ---------------------------------------------------------

CASES = {
    "ok": (
        'def run(args):\n    return {"x": args["a"] + 1, "l": [1, 2.5, None, True]}\n',
        {"a": 41},
    ),
    "fail": ('def run(args):\n    fail("bad input")\n', {}),
    "runtime_error": ('def run(args):\n    return args["missing"]\n', {}),
    "no_run": ("def other(args):\n    return 1\n", {}),
    "not_json": ("def run(args):\n    return struct(a = 1)\n", {}),
    "syntax": ("def run(args)\n    return 1\n", {}),
    "recursion": ("def f(n):\n    return f(n + 1)\ndef run(args):\n    return f(0)\n", {}),
    "builtin_error": ("def run(args):\n    return cache.get(1)\n", {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_outcomes_match_the_inprocess_runtime(
    rt: ProcessRuntime, tmp_path: Path, case: str
) -> None:
    script, args = CASES[case]
    sess = Session(rt.config)
    got = rt.run_tool(script, "tools/t.md", 5, args, sess.ctx(), 2000)
    want = InProcessRuntime().run_tool(script, "tools/t.md", 5, args, sess.ctx(), 2000)
    assert (got.status, got.value, got.error) == (want.status, want.value, want.error)


def test_hooks_and_when_run_in_workers(rt: ProcessRuntime) -> None:
    sess = Session(rt.config)
    hook = 'def handle(event, payload):\n    return block(event + " " + payload["p"])\n'
    out = rt.run_hook(hook, "hooks/h.md", 3, "tool.pre", {"p": "x"}, sess.ctx(), 1000)
    assert (out.status, out.value) == ("ok", {"action": "block", "reason": "tool.pre x"})
    out = rt.eval_when(
        'payload["p"] == "x"', "hooks/h.md", 2, "tool.pre", {"p": "x"}, sess.ctx(), 1000
    )
    assert (out.status, out.value) == ("ok", True)
    out = rt.eval_when('payload["p"] +', "hooks/h.md", 2, "tool.pre", {"p": "x"}, sess.ctx(), 0)
    want = InProcessRuntime().eval_when(
        'payload["p"] +', "hooks/h.md", 2, "tool.pre", {"p": "x"}, sess.ctx(), 0
    )
    assert (out.status, out.error) == ("error", want.error)
    assert "hooks/h.md" in (out.error or "")


def test_args_that_marshal_cannot_carry_still_arrive(rt: ProcessRuntime) -> None:
    out = rt.run_tool(
        ECHO, "t", 1, {"o": OrderedDict(a=1), "t": (1, 2)}, Session(rt.config).ctx(), 1000
    )
    assert (out.status, out.value) == ("ok", {"o": {"a": 1}, "t": [1, 2]})

    class Local:
        pass

    out = rt.run_tool(ECHO, "t", 1, {"x": Local()}, Session(rt.config).ctx(), 1000)
    assert out.status == "error"
    assert (out.error or "").startswith("arguments cannot be passed to the script worker")
    assert rt.run_tool(ECHO, "t", 1, {"a": 1}, Session(rt.config).ctx(), 1000).value == {"a": 1}


def test_a_changed_config_reaches_the_worker(rt: ProcessRuntime, tmp_path: Path) -> None:
    script = 'def run(args):\n    return exec.run("true", []).get("ok")\n'
    sess = Session(rt.config)
    assert rt.run_tool(script, "t", 1, {}, sess.ctx(), 5000).value is True
    strict = Config(
        root=tmp_path,
        workspace=tmp_path,
        limits=rt.config.limits,
        exec=type(rt.config.exec)(allowed_commands=("ls",)),
    )
    ctx = CallContext(config=strict, cache=sess.cache)
    out = rt.run_tool(script, "t", 1, {}, ctx, 5000)
    assert out.status == "error" and "allowed_commands" in (out.error or "")


# -- session state across workers --------------------------------------------------------


def test_cache_is_shared_by_every_worker_of_a_session(rt: ProcessRuntime) -> None:
    # Each call sets its own key and waits for the other's: both can only finish if
    # they run at the same time on two workers and see one store.
    script = textwrap.dedent("""
        def run(args):
            cache.set(args["mine"], True)
            for i in range(100000):
                if cache.get(args["other"]):
                    return i
            return -1
    """)
    sess = Session(rt.config)
    with ThreadPoolExecutor(2) as ex:
        a = ex.submit(rt.run_tool, script, "t", 1, {"mine": "a", "other": "b"}, sess.ctx(), 30000)
        b = ex.submit(rt.run_tool, script, "t", 1, {"mine": "b", "other": "a"}, sess.ctx(), 30000)
        results = [a.result(), b.result()]
    assert [r.status for r in results] == ["ok", "ok"]
    assert all(r.value >= 0 for r in results)
    assert sess.cache.get("a") is True and sess.cache.get("b") is True
    # a later call, on whichever worker, sees the session's values; another session does not
    read = 'def run(args):\n    return [cache.get("a"), cache.get("zz", "dflt")]\n'
    assert rt.run_tool(read, "t", 1, {}, sess.ctx(), 1000).value == [True, "dflt"]
    other = Session(rt.config)
    assert rt.run_tool(read, "t", 1, {}, other.ctx(), 1000).value == [None, "dflt"]


def test_cache_limits_and_errors_cross_the_pipe(rt: ProcessRuntime) -> None:
    sess = Session(rt.config)
    sess.cache.max_entries = 1
    script = textwrap.dedent("""
        def run(args):
            cache.set("one", {"k": [1, 2]})
            cache.delete("nothing")
            cache.set("two", 2)
    """)
    out = rt.run_tool(script, "t", 1, {}, sess.ctx(), 1000)
    assert out.status == "error" and "the session cache is full (1 keys)" in (out.error or "")
    big = 'def run(args):\n    cache.set("big", "x" * 2000000)\n'
    out = rt.run_tool(big, "t", 1, {}, sess.ctx(), 5000)
    assert out.status == "error" and "limit is 1048576 bytes" in (out.error or "")
    no_session = CallContext(config=rt.config)
    out = rt.run_tool('def run(args):\n    return cache.get("k")\n', "t", 1, {}, no_session, 0)
    assert out.status == "error" and "cache is not available" in (out.error or "")


def test_log_and_print_reach_the_callers_sink_in_order(rt: ProcessRuntime) -> None:
    sess = Session(rt.config)
    script = textwrap.dedent("""
        def run(args):
            log.info("first", n = 1)
            print("second", 2)
            log.error("third", items = [1, "a"])
            return "done"
    """)
    out = rt.run_tool(script, "t", 1, {}, sess.ctx(tool="mytool"), 1000)
    assert out.value == "done"
    assert sess.logs == [
        ("info", "first", {"tool": "mytool", "fields": {"n": 1}, "at": "t:3"}),
        ("info", "second 2", {"source": "print", "tool": "mytool", "at": "t:4"}),
        ("error", "third", {"tool": "mytool", "fields": {"items": [1, "a"]}, "at": "t:5"}),
    ]


# -- concurrency -------------------------------------------------------------------------


def test_200_concurrent_calls_from_threads_get_their_own_results(tmp_path: Path) -> None:
    with ProcessRuntime(config(tmp_path, concurrency=4)) as runtime:
        sess = Session(runtime.config)
        script = 'def run(args):\n    return {"i": args["i"], "sq": args["i"] * args["i"]}\n'
        hook = 'def handle(event, payload):\n    return modify({"i": payload["i"] + 1})\n'

        def one(i: int) -> Any:
            if i % 3 == 0:
                return runtime.run_hook(hook, "h", 1, "tool.pre", {"i": i}, sess.ctx(), 10000)
            return runtime.run_tool(script, "t", 1, {"i": i}, sess.ctx(), 10000)

        with ThreadPoolExecutor(32) as ex:
            outs = list(ex.map(one, range(200)))
        for i, out in enumerate(outs):
            want = (
                {"action": "modify", "payload": {"i": i + 1}}
                if i % 3 == 0
                else {"i": i, "sq": i * i}
            )
            assert (out.status, out.value) == ("ok", want), i
        assert len(worker_pids()) <= 4
    assert not worker_pids()


def test_workers_started_from_a_short_lived_thread_outlive_it(rt: ProcessRuntime) -> None:
    # PR_SET_PDEATHSIG fires when the *thread* that forked the worker ends.
    sess = Session(rt.config)
    t = threading.Thread(target=rt.run_tool, args=(ECHO, "t", 1, {}, sess.ctx(), 1000))
    t.start()
    t.join()
    before = worker_pids()
    time.sleep(0.2)
    assert rt.run_tool(ECHO, "t", 1, {"a": 1}, sess.ctx(), 1000).value == {"a": 1}
    assert before and before <= worker_pids()


# -- deadlines and dead workers ----------------------------------------------------------


def test_a_spinning_script_times_out_and_the_next_call_succeeds(rt: ProcessRuntime) -> None:
    sess = Session(rt.config)
    rt.run_tool(ECHO, "t", 1, {}, sess.ctx(), 0)  # the worker is warm
    start = time.monotonic()
    out = rt.run_tool(SPIN, "spin", 1, {}, sess.ctx(), 500)
    assert time.monotonic() - start < 3.0
    assert (out.status, out.error) == ("timeout", "timed out after 500 ms")
    assert rt.run_tool(ECHO, "t", 1, {"a": 1}, sess.ctx(), 1000).value == {"a": 1}


def test_a_worker_that_does_not_answer_is_killed_after_the_grace(rt: ProcessRuntime) -> None:
    # A stopped worker stands for one stuck in a long native operation (a huge
    # allocation or sort): it cannot even cancel cooperatively.
    sess = Session(rt.config)
    rt.run_tool(ECHO, "t", 1, {}, sess.ctx(), 0)
    (pid,) = worker_pids()
    start = time.monotonic()
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(rt.run_tool, SPIN, "spin", 1, {}, sess.ctx(), 500)
        time.sleep(0.1)
        os.kill(pid, signal.SIGSTOP)
        out = fut.result(timeout=10)
    assert time.monotonic() - start < 3.0
    assert (out.status, out.error) == ("timeout", "timed out after 500 ms")
    assert wait_until(lambda: pid not in worker_pids())  # killed and replaced
    assert rt.run_tool(ECHO, "t", 1, {"a": 2}, sess.ctx(), 1000).value == {"a": 2}


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_a_worker_killed_from_outside_fails_only_its_call(
    rt: ProcessRuntime, sig: signal.Signals
) -> None:
    sess = Session(rt.config)
    rt.run_tool(ECHO, "t", 1, {}, sess.ctx(), 0)
    idle = worker_pids()
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(rt.run_tool, SPIN, "spin", 1, {}, sess.ctx(), 30000)
        time.sleep(0.3)
        busy = [p for p in worker_pids() if p in idle]
        assert busy
        for pid in busy:  # the one idle worker is now the busy one
            os.kill(pid, sig)
        out = fut.result(timeout=10)
    assert out.status == "crash" and out.error is not None
    assert out.error.startswith(f"crashed (signal {int(sig)}")
    if sig == signal.SIGSEGV:  # what a SIGSEGV of a worker almost always is
        assert "overflowed the native stack" in out.error
    assert rt.run_tool(ECHO, "t", 1, {"a": 3}, sess.ctx(), 5000).value == {"a": 3}


def test_an_idle_worker_killed_from_outside_costs_no_call(rt: ProcessRuntime) -> None:
    sess = Session(rt.config)
    rt.run_tool(ECHO, "t", 1, {}, sess.ctx(), 0)
    (pid,) = worker_pids()
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: exited(pid))
    out = rt.run_tool(ECHO, "t", 1, {"a": 4}, sess.ctx(), 5000)
    assert (out.status, out.value) == ("ok", {"a": 4}), out


@pytest.fixture(params=["auto", "off"])
def sandboxed_rt(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProcessRuntime]:
    """A pool whose exec.run children run in bubblewrap ("auto") or bare ("off")."""
    cfg = Config(
        root=tmp_path,
        workspace=tmp_path,
        limits=Limits(max_concurrency=2),
        exec=ExecConfig(sandbox=request.param),
    )
    runtime = ProcessRuntime(cfg)
    yield runtime
    runtime.close()
    assert not worker_pids()


def test_exec_children_of_an_externally_killed_worker_die_too(sandboxed_rt: ProcessRuntime) -> None:
    rt = sandboxed_rt
    marker = "27.1828"
    sess = Session(rt.config)
    script = (
        'def run(args):\n    return exec.run("sleep", ["' + marker + '"], timeout_ms = 60000)\n'
    )
    rt.run_tool(ECHO, "t", 1, {}, sess.ctx(), 0)
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(rt.run_tool, script, "t", 1, {}, sess.ctx(), 60000)
        assert wait_until(lambda: len(sleeping(marker)) == 1)
        for pid in worker_pids():
            os.kill(pid, signal.SIGKILL)
        out = fut.result(timeout=10)
    assert (out.status, out.error) == ("crash", "crashed (signal 9)")
    assert wait_until(lambda: not sleeping(marker))


def test_exec_children_are_not_held_to_the_worker_memory_cap(sandboxed_rt: ProcessRuntime) -> None:
    # The cap is for the Starlark heap: a program that reserves more address space
    # than memory_mb (as node and java do) still starts.
    rt = sandboxed_rt
    script = textwrap.dedent("""
        def run(args):
            return exec.run("sh", ["-c", "ulimit -v"])["stdout"].strip()
    """)
    out = rt.run_tool(script, "t", 1, {}, Session(rt.config).ctx(), 10000)
    assert out.status == "ok"
    assert out.value == "unlimited" or int(out.value) > 512 * 1024
    # ... while the worker itself stays capped
    bomb = rt.run_tool(
        'def run(args):\n    return len("x" * 1500000000)\n',
        "t",
        1,
        {},
        Session(rt.config).ctx(),
        10000,
    )
    assert bomb.status == "memory"


# -- shutdown ----------------------------------------------------------------------------


def test_close_kills_busy_and_idle_workers_and_their_children(tmp_path: Path) -> None:
    marker = "41.4213"
    runtime = ProcessRuntime(config(tmp_path, concurrency=3))
    sess = Session(runtime.config)
    script = (
        'def run(args):\n    return exec.run("sh", ["-c", "sleep '
        + marker
        + " & sleep "
        + marker
        + '; wait"], timeout_ms = 60000)\n'
    )
    with ThreadPoolExecutor(3) as ex:
        futs = [
            ex.submit(runtime.run_tool, script, "t", 1, {}, sess.ctx(), 60000) for _ in range(2)
        ]
        futs.append(ex.submit(runtime.run_tool, ECHO, "t", 1, {}, sess.ctx(), 0))
        assert wait_until(lambda: len(sleeping(marker)) == 4)
        assert len(worker_pids()) == 3
        runtime.close()
        outs = [f.result(timeout=10) for f in futs]
    assert [o.status for o in outs[:2]] == ["crash", "crash"]
    assert "closed" in (outs[0].error or "")
    assert not worker_pids()
    assert wait_until(lambda: not sleeping(marker))
    runtime.close()  # idempotent
    after = runtime.run_tool(ECHO, "t", 1, {}, sess.ctx(), 0)
    assert (after.status, after.error) == ("crash", "crashed (the script runtime is closed)")


DRIVER = """
import os, sys
sys.path.insert(0, {root!r})
from harness.config import Config
from harness.runtime.context import CallContext
from harness.runtime.workers import ProcessRuntime
rt = ProcessRuntime(Config())
src = "def run(args):\\n    return 1\\n"
out = rt.run_tool(src, "t", 1, {{}}, CallContext(config=rt.config), 0)
assert out.value == 1, out
print(os.getpid(), flush=True)
if sys.argv[1] == "hard":
    os._exit(0)  # no atexit: the workers must die with us (PR_SET_PDEATHSIG)
"""


@pytest.mark.parametrize("how", ["atexit", "hard"])
def test_workers_die_when_the_harness_process_exits(tmp_path: Path, how: str) -> None:
    root = str(Path(harness.__file__).resolve().parents[1])
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(root=root))
    proc = subprocess.run(
        [sys.executable, str(script), how], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    pid = int(proc.stdout.split()[0])
    assert wait_until(lambda: not worker_pids(pid) and not worker_pids(1))


# -- through the public API --------------------------------------------------------------


def test_harness_call_uses_the_process_pool(tmp_path: Path) -> None:
    (tmp_path / ".harness" / "tools").mkdir(parents=True)
    (tmp_path / "harness.md").write_text("---\nlimits: {max_concurrency: 3}\n---\nTest agent.\n")
    (tmp_path / ".harness" / "tools" / "square.md").write_text(
        textwrap.dedent("""\
        ---
        parameters:
          n: {type: integer, required: true}
        script: |
          def run(args):
              cache.set("last", args["n"])
              return args["n"] * args["n"]
        ---
        Square a number.
    """)
    )
    (tmp_path / ".harness" / "tools" / "spin.md").write_text(
        "---\ntimeout_ms: 500\nscript: |\n" + textwrap.indent(SPIN, "  ") + "---\nSpin.\n"
    )
    (tmp_path / ".harness" / "tools" / "bomb.md").write_text(
        '---\nscript: |\n  def run(args):\n    return len("x" * 1500000000)\n---\nBomb.\n'
    )
    with harness.load(tmp_path) as h:
        assert isinstance(h.runtime, ProcessRuntime)
        r = h.call("square", {"n": 7})
        assert (r.is_error, r.value) == (False, 49)
        r = h.call("spin", {})
        assert r.is_error and r.error == 'tool "spin" timed out after 500 ms'
        r = h.call("bomb", {})
        assert r.is_error and r.error == 'tool "bomb" exceeded its memory limit (512 MB)'
        calls = [harness.ToolCall(name="square", arguments={"n": i}, id=str(i)) for i in range(30)]
        results = h.call_many(calls)
        assert [r.value for r in results] == [i * i for i in range(30)]
        assert h.default_session.cache.get("last") in range(30)
        assert worker_pids()
    assert not worker_pids()
