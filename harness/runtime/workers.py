"""``runtime.isolation: process``: scripts run in a pool of worker processes (docs/spec.md §6).

:class:`ProcessRuntime` implements the :class:`~harness.runtime.context.ScriptRuntime`
protocol like ``engine.InProcessRuntime``, but each call runs in a child process
(``harness.runtime.worker_main``) that holds its own :class:`~harness.runtime.engine.Engine`
(so compiled scripts are cached per worker, keyed by content).

- Pool of ``limits.max_concurrency`` workers, started lazily, reused; a call takes an
  idle worker (blocking while all are busy) and a worker serves one call at a time.
- Each worker caps its address space at ``limits.memory_mb`` and dies with the harness
  (``PR_SET_PDEATHSIG``, armed from one long-lived spawner thread, because the kernel
  ties that signal to the *thread* that forked the child).
- The engine cancels a call at its deadline; if the worker has not answered 250 ms
  later, its process group is killed and the worker replaced.
- A worker that dies yields an Outcome for its call only (``memory`` / ``crash``).
- ``ctx.cache`` and ``ctx.log`` stay in the parent: the worker's proxies send requests
  over its pipe and the calling thread serves them while it waits for the result.

Messages (``wire.HEADER`` framing): parent -> worker ``C`` config (pickle),
``R``/``Q`` run (marshal/pickle), ``r`` cache reply (marshal); worker -> parent ``Y``
ready, ``D`` done, ``G`` cache request, ``L`` log record (all marshal).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import marshal
import os
import pickle
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from harness import surface
from harness.config import Config
from harness.errors import BuiltinError
from harness.runtime import cancel
from harness.runtime.context import CallContext, Outcome
from harness.runtime.engine import hook_call
from harness.runtime.when import when_source
from harness.runtime.wire import (
    HEADER,
    T_CACHE,
    T_CONFIG,
    T_DONE,
    T_HOST,
    T_LOG,
    T_READY,
    T_REPLY,
    T_RUN,
    T_RUN_PICKLED,
    read_frame,
)

CANCELLED_ERROR = "cancelled by the caller"
KILL_GRACE_S = 0.25  # after the deadline, before the worker is killed
START_TIMEOUT_S = 30.0  # a worker that is not ready by then is reported as crashed
STDERR_TAIL = 4096
WATCH_TICK_S = 0.05  # the watchdog's period while calls with deadlines are in flight
# What a SIGSEGV of a worker almost always is: starlark-rust recursing on the native
# stack (str(), ==, hashing or printing a value nested hundreds of thousands deep).
_SEGV = (
    ": the script overflowed the native stack, e.g. by printing, comparing or hashing "
    "a value nested hundreds of thousands of levels deep; only this worker died"
)
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


class _Spawner:
    """One long-lived thread that starts every worker.

    ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the child exits, so
    workers forked from a short-lived call thread would die with it.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="harness-worker-spawner", daemon=True
                )
                self._thread.start()
        fut: Future[Any] = Future()
        self._jobs.put((fn, fut))
        return fut.result()

    def _loop(self) -> None:
        while True:
            fn, fut = self._jobs.get()
            try:
                fut.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                fut.set_exception(exc)


_SPAWNER = _Spawner()


class _Died(Exception):
    """The worker's pipe closed: it is dead."""


class _NotSent(_Died):
    """The worker was found dead before it received the call."""


class _Worker:
    __slots__ = (
        "proc",
        "pid",
        "rfd",
        "wfd",
        "errfile",
        "buf",
        "spin",
        "known",
        "config",
        "lock",
        "hard",
        "ready",
        "killed",
        "retire",
        "timed_out",
        "failed",
    )

    def __init__(self, proc: subprocess.Popen[bytes], errfile: IO[bytes]) -> None:
        assert proc.stdin and proc.stdout
        self.proc = proc
        self.pid = proc.pid
        self.wfd = proc.stdin.fileno()
        self.rfd = proc.stdout.fileno()
        self.errfile = errfile  # the worker's stderr: an unlinked temporary file
        self.buf = b""
        self.spin = True  # poll before blocking (wire.read_frame)
        self.known: set[int] = set()  # script ids this worker has compiled
        self.config: Config | None = None  # the config object last sent
        self.lock = threading.Lock()  # guards hard/killed against the watchdog
        self.hard: float | None = None  # monotonic time at which the watchdog kills it
        self.ready = False
        self.killed = False  # we sent SIGKILL
        self.retire = False  # answered, then exits by itself (after a caught panic)
        self.timed_out = False  # no answer 250 ms past the deadline
        self.failed: str | None = None  # protocol or start failure

    # -- framing -------------------------------------------------------------------
    # Blocking reads on the pipe, no poll(): a pipe ping-pong costs ~7 us, the same
    # with poll() ~45 us here. Deadlines are enforced by the pool's watchdog thread,
    # which kills the worker; the read then sees EOF.

    def send(self, tag: int, payload: bytes) -> None:
        data = HEADER.pack(len(payload), tag) + payload
        try:
            n = os.write(self.wfd, data)
            if n < len(data):
                view = memoryview(data)[n:]
                while view:
                    view = view[os.write(self.wfd, view) :]
        except OSError as exc:  # BrokenPipe: the worker is gone; its death is read next
            raise _Died from exc

    def recv(self) -> tuple[int, bytes]:
        """Next frame; raises _Died at EOF."""
        return read_frame(self, self.rfd, _Died)

    def stderr_tail(self) -> str:
        try:
            size = os.fstat(self.errfile.fileno()).st_size
            data = os.pread(self.errfile.fileno(), STDERR_TAIL, max(0, size - STDERR_TAIL))
        except (OSError, ValueError):
            return ""
        return data.decode("utf-8", "replace").strip()

    # -- lifetime ------------------------------------------------------------------

    def kill(self, children: Mapping[int, list[int]] | None = None) -> None:
        """SIGKILL the worker's group and the groups of the programs it started.

        ``exec.run`` children lead their own sessions and die with the worker through
        PR_SET_PDEATHSIG (worker_main), but what *they* started would outlive them:
        their groups are killed here, found by parent pid before the worker dies.
        """
        if self.proc.returncode is None and not self.killed:
            self.killed = True
            kids = (children if children is not None else _children({self.pid})).get(self.pid, ())
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            for pid in kids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)

    def reap(self) -> None:
        """Wait for the process (killing it if it lingers), close the pipes."""
        try:
            self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
        # the process group may still hold children (a worker leads its own group)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        for f in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                f.close()  # type: ignore[union-attr]

    def death(self, memory_mb: int) -> Outcome:
        """The Outcome for a call whose worker died (after reap())."""
        rc = self.proc.returncode
        tail = self.stderr_tail()
        if self.failed:
            lines = tail.splitlines()
            detail = f": {lines[-1]}" if lines else ""
            if memory_mb < 128 and not self.ready:
                detail += f"; limits.memory_mb = {memory_mb} is likely too small to start it"
            return Outcome(status="crash", error=f"crashed ({self.failed}{detail})")
        if "memory allocation of" in tail or "out of memory" in tail or "MemoryError" in tail:
            return Outcome(status="memory", error=f"exceeded its memory limit ({memory_mb} MB)")
        if rc == -signal.SIGSEGV:
            return Outcome(status="crash", error=f"crashed (signal {-rc}{_SEGV})")
        if rc is not None and rc < 0:
            return Outcome(status="crash", error=f"crashed (signal {-rc})")
        return Outcome(status="crash", error=f"crashed (the worker exited with status {rc})")

    def close_files(self) -> None:
        with contextlib.suppress(OSError):
            self.errfile.close()


def _children(parents: set[int]) -> dict[int, list[int]]:
    """{parent pid: [child pids]} from /proc (empty where /proc is not available)."""
    found: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(b")") + 2 :].split(None, 2)[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid in parents:
            found.setdefault(ppid, []).append(int(name))
    return found


def _spawn(memory_mb: int) -> _Worker:
    env = dict(os.environ)
    env["RUST_BACKTRACE"] = "0"  # a panic prints one line, not a backtrace
    env["MALLOC_ARENA_MAX"] = "2"  # keep glibc from reserving 64 MB per thread
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (_PACKAGE_PARENT, env.get("PYTHONPATH", "")) if p
    )
    argv = [
        sys.executable,
        "-P",
        "-m",
        "harness.runtime.worker_main",
        str(os.getpid()),
        str(memory_mb),
    ]
    errfile = tempfile.TemporaryFile(prefix="harness-worker-")
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errfile,
            env=env,
            start_new_session=True,
            close_fds=True,
            bufsize=0,
        )
    except BaseException:
        errfile.close()
        raise
    return _Worker(proc, errfile)


class _Pool:
    """Workers, their bookkeeping and the watchdog; apart from ProcessRuntime for finalize()."""

    def __init__(self, size: int, memory_mb: int) -> None:
        self.size = max(1, size)
        self.memory_mb = memory_mb
        self.cond = threading.Condition()
        self.idle: list[_Worker] = []  # a stack: the warmest worker is taken first
        self.busy: set[_Worker] = set()
        self.count = 0  # idle + busy + being started
        self.closed = False
        self.watch_active = False
        self.watch_wake = threading.Event()
        self.watch_thread: threading.Thread | None = None

    # -- workers -----------------------------------------------------------------

    def acquire(self) -> _Worker:
        with self.cond:
            while True:
                if self.closed:
                    raise _Closed
                if self.idle:
                    w = self.idle.pop()
                    self.busy.add(w)
                    return w
                if self.count < self.size:
                    self.count += 1
                    break
                self.cond.wait()
        new = self._start()
        if new is None:
            raise _Closed
        with self.cond:
            self.busy.add(new)
        return new

    def _start(self) -> _Worker | None:
        """Start a worker for a slot already counted; None (slot freed) if closed."""
        try:
            w: _Worker = _SPAWNER.run(lambda: _spawn(self.memory_mb))
        except BaseException:
            with self.cond:
                self.count -= 1
                self.cond.notify_all()
            raise
        with self.cond:
            if not self.closed:
                return w
            self.count -= 1
            self.cond.notify_all()
        w.kill()
        w.reap()
        w.close_files()
        return None

    def warm(self, n: int) -> None:
        """Start workers until ``n`` exist (at most the pool's size): a server about to
        take load starts them ahead, so no first caller waits for a process to start."""
        while True:
            with self.cond:
                if self.closed or self.count >= min(n, self.size):
                    return
                self.count += 1
            try:
                new = self._start()  # frees the slot itself if it fails
            except OSError:
                return
            if new is None:
                return
            with self.cond:
                self.idle.insert(0, new)
                self.cond.notify()

    def release(self, w: _Worker) -> None:
        with self.cond:
            self.busy.discard(w)
            if not self.closed:
                self.idle.append(w)
                self.cond.notify()
                return
            self.count -= 1
            self.cond.notify_all()
        w.kill()
        w.reap()
        w.close_files()

    def discard(self, w: _Worker) -> None:
        """Forget a dead, reaped worker and start its replacement (it warms up meanwhile)."""
        w.close_files()
        with self.cond:
            self.busy.discard(w)
            if self.closed:
                self.count -= 1
                self.cond.notify_all()
                return
        try:
            new = self._start()
        except OSError:
            return
        if new is not None:
            with self.cond:
                self.idle.insert(0, new)  # bottom of the stack: warm workers go first
                self.cond.notify()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            idle, self.idle = self.idle, []
            busy = list(self.busy)
            self.count -= len(idle)
            self.cond.notify_all()
        self.watch_wake.set()
        children = _children({w.pid for w in (*busy, *idle)})
        for w in busy:  # their callers read EOF, reap them and free their slots
            with w.lock:
                w.kill(children)
        for w in idle:
            w.kill(children)
        for w in idle:
            w.reap()
            w.close_files()
        with self.cond:
            self.cond.wait_for(lambda: self.count <= 0, timeout=5.0)

    # -- deadlines ---------------------------------------------------------------

    def watch(self, w: _Worker, hard: float) -> None:
        """Have ``w`` killed at ``hard`` (monotonic) unless unwatch() comes first."""
        w.hard = hard
        if not self.watch_active:
            if self.watch_thread is None:
                with self.cond:
                    if self.watch_thread is None:
                        self.watch_thread = threading.Thread(
                            target=self._watch_loop, name="harness-worker-watchdog", daemon=True
                        )
                        self.watch_thread.start()
            self.watch_wake.set()

    @staticmethod
    def unwatch(w: _Worker) -> None:
        with w.lock:
            w.hard = None

    def _watch_loop(self) -> None:
        # Handshake with watch(): it sets w.hard, then wakes us unless watch_active.
        # We clear watch_active before the last scan, so no deadline is missed.
        while not self.closed:
            self.watch_active = False
            if self._scan() is None:
                self.watch_wake.wait()
                self.watch_wake.clear()
                continue
            self.watch_active = True
            while not self.closed:
                earliest = self._scan()
                if earliest is None:
                    break
                time.sleep(min(WATCH_TICK_S, max(0.001, earliest - time.monotonic())))

    def _scan(self) -> float | None:
        """Kill overdue workers; the earliest pending deadline, or None."""
        with self.cond:
            busy = list(self.busy)
        now = time.monotonic()
        earliest: float | None = None
        for w in busy:
            hard = w.hard
            if hard is None:
                continue
            if hard <= now:
                with w.lock:
                    if w.hard is not None and w.hard <= now:
                        w.hard = None
                        w.timed_out = True
                        w.kill()
            elif earliest is None or hard < earliest:
                earliest = hard
        return earliest


class _Closed(Exception):
    pass


class ProcessRuntime:
    """``runtime.isolation: process``: the ScriptRuntime backed by a worker pool."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.memory_mb = config.limits.memory_mb
        self._pool = _Pool(config.limits.max_concurrency, self.memory_mb)
        self._config_blob = pickle.dumps(config, protocol=pickle.HIGHEST_PROTOCOL)
        self._script_ids: dict[tuple[str, str, str, int], int] = {}
        self._next_id = itertools.count(1).__next__
        self._finalizer = weakref.finalize(self, self._pool.close)

    # -- ScriptRuntime ---------------------------------------------------------------

    def run_tool(
        self,
        script: str,
        filename: str,
        line: int,
        args: Mapping[str, Any],
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        ctx.kind = "tool"
        return self._call(
            "tool", script, filename, line, surface.TOOL_ENTRY[0], (dict(args),), ctx, timeout_ms
        )

    def run_hook(
        self,
        script: str,
        filename: str,
        line: int,
        event: object,
        payload: object,
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        ctx.kind = "hook"
        source, entry, args = hook_call(script, event, payload)
        return self._call("hook", source, filename, line, entry, args, ctx, timeout_ms)

    def eval_when(
        self,
        expr: str,
        filename: str,
        line: int,
        event: str,
        payload: Mapping[str, Any],
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        ctx.kind = "when"
        return self._call(
            "when",
            when_source(expr),
            filename,
            line,
            "harness_when",
            (event, dict(payload)),
            ctx,
            timeout_ms,
        )

    def warm(self, n: int | None = None) -> None:
        """Start ``n`` workers (default: ``limits.max_concurrency``) ahead of the calls."""
        self._pool.warm(self._pool.size if n is None else n)

    def close(self) -> None:
        """Kill every worker (and its process group) and wait for them."""
        self._finalizer()

    def __enter__(self) -> ProcessRuntime:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- one call ----------------------------------------------------------------------

    def _call(
        self,
        kind: str,
        source: str,
        filename: str,
        line: int,
        entry: str,
        args: tuple[Any, ...],
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        start = time.monotonic()
        key = (kind, source, filename, line)
        sid = self._script_ids.get(key)
        if sid is None:
            sid = self._script_ids.setdefault(key, self._next_id())
        pool = self._pool
        for attempt in (1, 2):
            if cancel.is_cancelled(ctx.call_id):
                return Outcome(status="error", error=CANCELLED_ERROR)
            try:
                w = pool.acquire()
            except _Closed:
                return Outcome(status="crash", error="crashed (the script runtime is closed)")
            # A cancelled call (runtime/cancel.py) kills its worker and the process
            # groups of the commands it started.
            stop = cancel.on_cancel(ctx.call_id, functools.partial(self._kill_cancelled, w))
            try:
                if not w.ready and not self._handshake(w):
                    return self._dead(w, ctx, timeout_ms, start)
                out = self._exchange(w, sid, key, entry, args, ctx, timeout_ms)
            except _NotSent:
                # The worker died while idle (killed from outside): the call never
                # reached it, so it goes to a fresh worker once.
                self._drop(w)
                if attempt == 1:
                    continue
                out = None
            except _Died:
                out = None
            except BaseException:  # e.g. KeyboardInterrupt in this thread mid-call
                with w.lock:
                    w.kill()
                self._drop(w)
                raise
            finally:
                stop()
            break
        if out is None:
            return self._dead(w, ctx, timeout_ms, start)
        if w.killed or w.retire:
            # killed as its answer arrived (watchdog, close()), or it exits on its own
            # after answering (a caught panic)
            self._drop(w)
        else:
            pool.release(w)
        return out

    def _drop(self, w: _Worker) -> None:
        with w.lock:
            w.hard = None
        w.reap()
        self._pool.discard(w)

    def _handshake(self, w: _Worker) -> bool:
        """Send the config and wait for the worker's ready frame."""
        self._pool.watch(w, time.monotonic() + START_TIMEOUT_S)
        try:
            w.send(T_CONFIG, self._config_blob)
            w.config = self.config
            tag, _ = w.recv()
        except _Died:
            tag = -1
        self._pool.unwatch(w)
        if tag != T_READY:
            w.failed = "the worker did not start"
            w.timed_out = False
            return False
        w.ready = True
        return True

    def _exchange(  # noqa: C901
        self,
        w: _Worker,
        sid: int,
        key: tuple[str, str, str, int],
        entry: str,
        args: tuple[Any, ...],
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome | None:
        """Send the call and serve the worker until it answers; None if it must go."""
        # The deadline counts from here: waiting for a worker to start is not the
        # script's time. An earlier deadline already on ctx (the caller's) holds; ctx
        # itself is left as it was, as the engine does.
        now = time.monotonic()
        deadline = ctx.deadline
        if timeout_ms > 0:
            mine = now + timeout_ms / 1000.0
            deadline = mine if deadline is None else min(deadline, mine)
        if ctx.config is not w.config:
            try:
                w.send(T_CONFIG, pickle.dumps(ctx.config, protocol=pickle.HIGHEST_PROTOCOL))
            except _Died:
                raise _NotSent from None
            w.config = ctx.config
        script = None if sid in w.known else (*key, entry)
        if deadline is None:
            remaining = -1.0
        else:
            remaining = max(0.0, (deadline - now) * 1000.0)
            self._pool.watch(w, deadline + KILL_GRACE_S)
        flags = (
            (1 if ctx.cache is not None else 0)
            | (2 if ctx.log is not None else 0)
            | (4 if ctx.host is not None else 0)
        )
        msg = (
            sid,
            script,
            args,
            ctx.session_id,
            ctx.call_id,
            ctx.tool,
            remaining,
            timeout_ms,
            flags,
            ctx.extras or None,
        )
        try:
            tag, blob = T_RUN, marshal.dumps(msg)
        except ValueError:  # arguments marshal cannot carry: let pickle try
            try:
                tag, blob = T_RUN_PICKLED, pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # noqa: BLE001
                self._pool.unwatch(w)
                return Outcome(
                    status="error", error=f"arguments cannot be passed to the script worker: {exc}"
                )
        try:
            w.send(tag, blob)
        except _Died:
            raise _NotSent from None
        w.known.add(sid)
        while True:
            tag, payload = w.recv()
            if tag == T_DONE:
                if w.hard is not None:
                    self._pool.unwatch(w)
                status, value, error, duration_ms, extras, retire = marshal.loads(payload)
                if extras is not None:
                    ctx.extras.clear()
                    ctx.extras.update(extras)
                w.retire = retire
                return Outcome(status=status, value=value, error=error, duration_ms=duration_ms)
            if tag == T_CACHE:
                w.send(T_REPLY, _serve_cache(ctx, payload))
            elif tag == T_HOST:
                w.send(T_REPLY, _serve_host(ctx, payload))
            elif tag == T_LOG:
                level, text, fields = marshal.loads(payload)
                if ctx.log is not None:
                    with contextlib.suppress(Exception):
                        ctx.log(level, text, fields)
            else:
                self._pool.unwatch(w)
                w.failed = f"the worker sent an unknown message (tag {tag})"
                return None

    @staticmethod
    def _kill_cancelled(w: _Worker) -> None:
        with w.lock:
            w.hard = None
            w.kill()

    def _dead(self, w: _Worker, ctx: CallContext, timeout_ms: int, start: float) -> Outcome:
        """Kill and replace ``w``; the Outcome says why its call ended."""
        with w.lock:
            w.hard = None
            w.kill()
        w.reap()
        out = w.death(self.memory_mb)
        tail = w.stderr_tail()
        self._pool.discard(w)
        duration = (time.monotonic() - start) * 1000.0
        if cancel.is_cancelled(ctx.call_id):
            return Outcome(status="error", error=CANCELLED_ERROR, duration_ms=duration)
        if w.timed_out:
            return Outcome(
                status="timeout", error=f"timed out after {timeout_ms} ms", duration_ms=duration
            )
        if self._pool.closed and out.status == "crash":
            return Outcome(
                status="crash",
                error="crashed (the script runtime was closed)",
                duration_ms=duration,
            )
        if tail and ctx.log is not None:
            with contextlib.suppress(Exception):
                ctx.log(
                    "error",
                    f"script worker {w.pid} died: {out.error}",
                    {"tool": ctx.tool, "stderr": tail[-1000:]},
                )
        return Outcome(status=out.status, error=out.error, duration_ms=duration)


def _serve_host(ctx: CallContext, payload: bytes) -> bytes:
    method, request = marshal.loads(payload)
    try:
        if ctx.host is None:
            raise BuiltinError(f"{method} is only available inside a session")
        return marshal.dumps((True, ctx.host(method, request)))
    except BuiltinError as exc:
        return marshal.dumps((False, str(exc)))
    except Exception as exc:  # noqa: BLE001 - the script sees it as a built-in error
        return marshal.dumps((False, f"{method}: {exc}"))


def _serve_cache(ctx: CallContext, payload: bytes) -> bytes:
    op, key, value = marshal.loads(payload)
    store = ctx.cache
    try:
        if store is None:
            raise BuiltinError("cache is not available outside a session")
        result = None
        if op == "get":
            result = store.get(key, value)
        elif op == "set":
            store.set(key, value)
        elif op == "has":
            result = store.has(key)
        elif op == "clear":
            store.clear()
        else:
            result = store.delete(key)
        return marshal.dumps((True, result))
    except BuiltinError as exc:
        return marshal.dumps((False, str(exc)))
    except Exception as exc:  # noqa: BLE001 - the script sees it as a built-in error
        return marshal.dumps((False, f"cache.{op}: {exc}"))
