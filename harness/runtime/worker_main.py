"""Entry point of one script worker: ``python -P -m harness.runtime.worker_main PPID MB``.

Started by :mod:`harness.runtime.workers`. Before it imports the engine the worker
arms ``PR_SET_PDEATHSIG`` (it dies with the harness), caps its address space at
``MB`` megabytes (soft ``RLIMIT_AS``) and moves the protocol pipes off fds 0/1 so
nothing a built-in prints can corrupt the stream. Then it serves one call at a
time until its request pipe closes.

The wire format and the proxies for ``ctx.cache``/``log``/``host`` are in
:mod:`harness.runtime.wire`.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import pickle
import resource
import signal
import sys
import time
from typing import Any

from harness.runtime.wire import (
    T_CONFIG,
    T_DONE,
    T_READY,
    T_RUN,
    CacheProxy,
    HostProxy,
    LogProxy,
    Pipe,
)

PR_SET_PDEATHSIG = 1

# Crash texts of the engine (Rust panics surface as "script engine failed: ...")
# that mean an allocation failed rather than a bug.
_MEMORY_MARKERS = ("out of memory", "memory allocation", "capacity overflow", "MemoryError")


def _arm(parent_pid: int, memory_mb: int) -> None:
    """Die with the parent; cap the address space; make children do the same."""
    prctl: Any = None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the request pipe's EOF still ends us
        prctl = None
    if os.getppid() != parent_pid:  # the harness died before we armed the signal
        os._exit(0)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if memory_mb > 0:
        cap = memory_mb * 1024 * 1024
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    _guard_children(prctl, soft)


def _guard_children(prctl: Any, soft_as: int) -> None:
    """Every program a built-in starts from this worker (``exec.run``):

    - gets the worker's original address-space limit, not the cap (the cap is for the
      Starlark heap; node or java cannot even start under 512 MB of address space):
      the limit is lifted around the fork, which is safe since a worker runs one
      thread, and keeps ``subprocess`` on its fast vfork path;
    - dies with the worker: bubblewrap sees to it (``--die-with-parent``); any other
      child gets ``PR_SET_PDEATHSIG`` through a ``preexec_fn`` (a slower plain fork,
      ~4 ms, only for unsandboxed commands).
    """
    import subprocess

    def deathsig() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    original = subprocess.Popen.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        argv = args[0] if args else kwargs.get("args")
        sandboxed = isinstance(argv, (list, tuple)) and "--die-with-parent" in argv
        if prctl is not None and not sandboxed:
            user = kwargs.get("preexec_fn")
            if user is None:
                kwargs["preexec_fn"] = deathsig
            else:

                def both() -> None:
                    deathsig()
                    user()

                kwargs["preexec_fn"] = both
        limit = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (soft_as, limit[1]))
        try:
            original(self, *args, **kwargs)
        finally:
            resource.setrlimit(resource.RLIMIT_AS, limit)

    subprocess.Popen.__init__ = __init__  # type: ignore[method-assign]


def _serve(pipe: Pipe, memory_mb: int) -> None:
    # Lazy on purpose: the engine (and starlark) load only after main() has armed the
    # death signal and the memory cap.
    from harness.runtime import memguard
    from harness.runtime.context import CallContext, Outcome
    from harness.runtime.engine import Engine

    memguard.arm(memory_mb)

    engine = Engine()
    cache = CacheProxy(pipe)
    log = LogProxy(pipe)
    host = HostProxy(pipe)
    scripts: dict[int, tuple[Any, str, str, int, str]] = {}
    config: Any = None
    monotonic = time.monotonic
    memory_text = f"exceeded its memory limit ({memory_mb} MB)"
    pipe.send(T_READY, marshal.dumps(os.getpid()))

    while True:
        try:
            tag, payload = pipe.recv()
        except EOFError:
            return
        if tag == T_CONFIG:
            config = pickle.loads(payload)
            continue
        msg = marshal.loads(payload) if tag == T_RUN else pickle.loads(payload)
        sid, script, args, session_id, call_id, tool, remaining_ms, timeout_ms, flags, extras = msg
        if script is not None:
            scripts[sid] = script
        kind, source, filename, line, entry = scripts[sid]
        ctx = CallContext(
            config=config,
            session_id=session_id,
            call_id=call_id,
            tool=tool,
            kind=kind,
            deadline=None if remaining_ms < 0 else monotonic() + remaining_ms / 1000.0,
            cache=cache if flags & 1 else None,
            log=log if flags & 2 else None,
            host=host if flags & 4 else None,
            extras=extras if extras is not None else {},
        )
        memguard.start()
        try:
            out = engine.call(kind, source, filename, line, entry, args, ctx, timeout_ms)
        except MemoryError:
            out = Outcome(status="memory", error=memory_text)
        out, recycle = _settle(out, memory_text)
        back_extras = ctx.extras or None
        try:
            reply = marshal.dumps(
                (out.status, out.value, out.error, out.duration_ms, back_extras, recycle)
            )
        except ValueError:
            reply = marshal.dumps(
                (out.status, out.value, out.error, out.duration_ms, None, recycle)
            )
        except MemoryError:
            reply = marshal.dumps(("memory", None, memory_text, out.duration_ms, None, True))
            recycle = True
        del out, ctx, msg, args, payload
        pipe.send(T_DONE, reply)
        if recycle:
            return


def _settle(out: Any, memory_text: str) -> tuple[Any, bool]:
    """(the Outcome to send, whether this worker must go after sending it)."""
    from harness.runtime import memguard
    from harness.runtime.context import Outcome

    if out.status == "crash":
        # A Rust panic was caught by the engine: the interpreter state is suspect.
        if any(m in (out.error or "") for m in _MEMORY_MARKERS):
            out = Outcome(status="memory", error=memory_text, duration_ms=out.duration_ms)
        return out, True
    # memory, or the guard stopped a loop: the heap is near the cap, start afresh
    return out, out.status == "memory" or memguard.tripped()


def main(argv: list[str]) -> None:
    parent_pid, memory_mb = int(argv[1]), int(argv[2])
    # Protocol on private fds; 0 <- /dev/null and 1 -> stderr for anything else.
    rfd, wfd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    _arm(parent_pid, memory_mb)
    from harness.runtime import prewarm  # lazy on purpose: after the worker is armed

    prewarm.SYNC = True  # one thread here: prepare sandboxes inline (see prewarm.py)
    try:
        _serve(Pipe(rfd, wfd), memory_mb)
    except (BrokenPipeError, EOFError):
        pass
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
