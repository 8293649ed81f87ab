"""Entry point of one script worker: ``python -P -m harness.runtime.worker_main PPID MB``.

Started by :mod:`harness.runtime.workers`. Before it imports the engine the worker
arms ``PR_SET_PDEATHSIG`` (it dies with the harness), caps its address space at
``MB`` megabytes (soft ``RLIMIT_AS``) and moves the protocol pipes off fds 0/1 so
nothing a built-in prints can corrupt the stream. Then it serves one call at a
time until its request pipe closes.

Wire format, both directions: ``struct "<IB"`` (payload length, tag) + payload.
The parent sends the config pickled (tag ``C``) and calls as marshal (``R``; ``Q``
when the arguments need pickle); the worker answers only in marshal, so the
parent never unpickles anything a script could shape. Tags are listed in
:mod:`harness.runtime.workers`.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import pickle
import resource
import select
import signal
import struct
import sys
import time
from typing import Any

HEADER = struct.Struct("<IB")
# parent -> worker
T_CONFIG, T_RUN, T_RUN_PICKLED, T_REPLY = b"C"[0], b"R"[0], b"Q"[0], b"r"[0]
# worker -> parent
T_READY, T_DONE, T_CACHE, T_LOG = b"Y"[0], b"D"[0], b"G"[0], b"L"[0]
T_HOST = b"H"[0]  # worker -> parent: a session service (meta.tool_register), marshal
PR_SET_PDEATHSIG = 1

# Crash texts of the engine (Rust panics surface as "script engine failed: ...")
# that mean an allocation failed rather than a bug.
_MEMORY_MARKERS = ("out of memory", "memory allocation", "capacity overflow", "MemoryError")


class _Pipe:
    """Length-prefixed frames over two raw fds (blocking)."""

    __slots__ = ("rfd", "wfd", "buf", "spin")

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd = rfd
        self.wfd = wfd
        self.buf = b""
        self.spin = True

    def send(self, tag: int, payload: bytes) -> None:
        data = memoryview(HEADER.pack(len(payload), tag) + payload)
        while data:
            data = data[os.write(self.wfd, data):]

    def recv(self) -> tuple[int, bytes]:
        return read_frame(self, self.rfd, EOFError)


# Before blocking on a pipe, poll it for this long. Waking a process that sleeps in
# read() costs tens of microseconds on some virtual machines (measured 7–60 µs for a
# bare pipe ping-pong here), twice per round trip; a call and its reply usually
# arrive well within this window, so a short poll halves the round trip. After the
# window the read blocks as before (no busy waiting on long calls).
#
# Adaptive: a pipe whose last wait outlasted the window stops polling until a wait
# is short again. Calls that wait in a program (exec.run) would otherwise burn the
# window on every call, and with more calls in flight than CPUs that steals the
# CPU (and, in the harness process, the GIL) from the work itself.
SPIN_S = 0.0003


def readable(fd: int, timeout_s: float | None) -> bool:
    """Whether ``fd`` is readable within ``timeout_s`` (None: wait). poll(), not
    select(): select() fails on descriptors numbered 1024 and up."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    ms = None if timeout_s is None else max(0, int(timeout_s * 1000))
    return bool(poller.poll(ms))


def _spin_until_readable(fd: int) -> bool:
    """Poll ``fd`` for up to SPIN_S; True if it became readable."""
    end = time.monotonic() + SPIN_S
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while not poller.poll(0):
        if time.monotonic() > end:
            return False
    return True


def _wait_readable(pipe: Any, fd: int) -> None:
    """Before a read that may block: poll briefly if the last wait was short."""
    if pipe.spin:
        if not _spin_until_readable(fd):
            pipe.spin = False
        return
    start = time.monotonic()
    readable(fd, None)
    if time.monotonic() - start < SPIN_S:
        pipe.spin = True


def read_frame(pipe: Any, fd: int, eof: type[Exception]) -> tuple[int, Any]:
    """Read one frame from ``fd``; ``pipe.buf`` holds bytes read past the last frame.

    Small frames arrive in one read. A large one is read straight into a buffer of
    its size (linear time, one copy), never past its end.
    """
    buf = pipe.buf
    if not buf and SPIN_S > 0:
        _wait_readable(pipe, fd)
    while len(buf) < 5:
        chunk = os.read(fd, 65536)
        if not chunk:
            pipe.buf = b""
            raise eof
        buf += chunk
    size, tag = HEADER.unpack_from(buf)
    end = 5 + size
    if len(buf) >= end:
        pipe.buf = buf[end:]
        return tag, buf[5:end]
    while len(buf) < end and len(buf) < 65536:
        chunk = os.read(fd, end - len(buf))
        if not chunk:
            pipe.buf = b""
            raise eof
        buf += chunk
    pipe.buf = b""
    if len(buf) == end:
        return tag, buf[5:]
    body = bytearray(size)
    have = len(buf) - 5
    body[:have] = buf[5:]
    view = memoryview(body)
    while have < size:
        n = os.readv(fd, [view[have:]])
        if not n:
            raise eof
        have += n
    return tag, body


class CacheProxy:
    """``ctx.cache`` in a worker: each operation is a round trip to the parent's store."""

    __slots__ = ("pipe",)

    def __init__(self, pipe: _Pipe) -> None:
        self.pipe = pipe

    def _ask(self, op: str, key: str, value: Any) -> Any:
        self.pipe.send(T_CACHE, marshal.dumps((op, key, value)))
        tag, payload = self.pipe.recv()
        if tag != T_REPLY:
            raise RuntimeError(f"worker protocol: expected a cache reply, got tag {tag}")
        ok, result = marshal.loads(payload)
        if not ok:
            from harness.errors import BuiltinError

            raise BuiltinError(result)
        return result

    def get(self, key: str, default: Any = None) -> Any:
        return self._ask("get", key, _marshalable(default))

    def set(self, key: str, value: Any) -> None:
        from harness.runtime.builtins.cache import encoded_size

        encoded_size(key, value)  # size and JSON checks before anything crosses the pipe
        self._ask("set", key, _marshalable(value))

    def delete(self, key: str) -> bool:
        return bool(self._ask("delete", key, None))

    def has(self, key: str) -> bool:
        return bool(self._ask("has", key, None))

    def clear(self) -> None:
        self._ask("clear", "", None)


class LogProxy:
    """``ctx.log`` in a worker: records are forwarded to the parent's sink in order."""

    __slots__ = ("pipe",)

    def __init__(self, pipe: _Pipe) -> None:
        self.pipe = pipe

    def __call__(self, level: str, msg: str, fields: Any) -> None:
        try:
            payload = marshal.dumps((level, msg, dict(fields)))
        except ValueError:
            payload = marshal.dumps((level, msg, {k: repr(v) for k, v in dict(fields).items()}))
        self.pipe.send(T_LOG, payload)


class HostProxy:
    """``ctx.host`` in a worker: session services answered by the parent (one round trip)."""

    __slots__ = ("pipe",)

    def __init__(self, pipe: _Pipe) -> None:
        self.pipe = pipe

    def __call__(self, method: str, payload: Any) -> Any:
        self.pipe.send(T_HOST, marshal.dumps((method, _marshalable(dict(payload)))))
        tag, reply = self.pipe.recv()
        if tag != T_REPLY:
            raise RuntimeError(f"worker protocol: expected a host reply, got tag {tag}")
        ok, result = marshal.loads(reply)
        if not ok:
            from harness.errors import BuiltinError

            raise BuiltinError(result)
        return result


def _marshalable(value: Any) -> Any:
    try:
        marshal.dumps(value)
    except ValueError:
        from harness.errors import BuiltinError

        raise BuiltinError(f"value of type {type(value).__name__} is not JSON-compatible") from None
    return value


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


def _serve(pipe: _Pipe, memory_mb: int) -> None:
    from harness.runtime.context import CallContext, Outcome
    from harness.runtime.engine import Engine

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
            config=config, session_id=session_id, call_id=call_id, tool=tool, kind=kind,
            deadline=None if remaining_ms < 0 else monotonic() + remaining_ms / 1000.0,
            cache=cache if flags & 1 else None, log=log if flags & 2 else None,
            host=host if flags & 4 else None,
            extras=extras if extras is not None else {},
        )
        recycle = False
        try:
            out = engine.call(kind, source, filename, line, entry, args, ctx, timeout_ms)
        except MemoryError:
            out = Outcome(status="memory", error=memory_text)
        if out.status == "crash":
            # A Rust panic was caught by the engine: the interpreter state is suspect.
            recycle = True
            if any(m in (out.error or "") for m in _MEMORY_MARKERS):
                out = Outcome(status="memory", error=memory_text, duration_ms=out.duration_ms)
        elif out.status == "memory":
            recycle = True
        back_extras = ctx.extras or None
        try:
            reply = marshal.dumps((out.status, out.value, out.error, out.duration_ms,
                                   back_extras, recycle))
        except ValueError:
            reply = marshal.dumps((out.status, out.value, out.error, out.duration_ms, None,
                                   recycle))
        except MemoryError:
            reply = marshal.dumps(("memory", None, memory_text, out.duration_ms, None, True))
            recycle = True
        del out, ctx, msg, args, payload
        pipe.send(T_DONE, reply)
        if recycle:
            return


def main(argv: list[str]) -> None:
    parent_pid, memory_mb = int(argv[1]), int(argv[2])
    # Protocol on private fds; 0 <- /dev/null and 1 -> stderr for anything else.
    rfd, wfd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    _arm(parent_pid, memory_mb)
    from harness.runtime import prewarm

    prewarm.SYNC = True  # one thread here: prepare sandboxes inline (see prewarm.py)
    try:
        _serve(_Pipe(rfd, wfd), memory_mb)
    except (BrokenPipeError, EOFError):
        pass
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
