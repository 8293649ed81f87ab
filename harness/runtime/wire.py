"""The wire protocol between the harness and its script workers (both ends).

Frames, both directions: ``struct "<IB"`` (payload length, tag) + payload. The parent
sends the config pickled (tag ``C``) and calls as marshal (``R``; ``Q`` when the
arguments need pickle); the worker answers only in marshal, so the parent never
unpickles anything a script could shape. Also here: the worker-side proxies that turn
``ctx.cache``, ``ctx.log`` and ``ctx.host`` into round trips to the parent.

A leaf of ``harness.runtime``: the worker entry (``worker_main``), the parent
(``workers``) and the prepared sandboxes (``prewarm``) import it, it imports none of them.
"""

from __future__ import annotations

import marshal
import os
import select
import struct
import time
from typing import Any

from harness.errors import BuiltinError
from harness.runtime.builtins.cache import encoded_size

HEADER = struct.Struct("<IB")
# parent -> worker
T_CONFIG, T_RUN, T_RUN_PICKLED, T_REPLY = b"C"[0], b"R"[0], b"Q"[0], b"r"[0]
# worker -> parent
T_READY, T_DONE, T_CACHE, T_LOG = b"Y"[0], b"D"[0], b"G"[0], b"L"[0]
T_HOST = b"H"[0]  # worker -> parent: a session service (meta.tool_register), marshal


class Pipe:
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
            data = data[os.write(self.wfd, data) :]

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


# Polling pays only with a CPU to spare: on a busy machine (load average at or above
# all CPUs but one) the poll steals the CPU the other end needs to answer, and a
# round trip got slower, not faster (bench_call process isolation 450-800 µs with the
# poll, 120-210 µs without, at load 1.9 on 2 CPUs). Checked at most once a second.
_CPUS = os.cpu_count() or 1
LOAD_CHECK_S = 1.0


class _Spare:
    checked = -LOAD_CHECK_S
    spare = True


def spare_cpu() -> bool:
    """Whether a CPU is idle (load average below the CPU count minus one)."""
    now = time.monotonic()
    if now - _Spare.checked >= LOAD_CHECK_S:
        _Spare.checked = now
        try:
            _Spare.spare = os.getloadavg()[0] < _CPUS - 1
        except OSError:  # pragma: no cover - no load average on this system
            _Spare.spare = True
    return _Spare.spare


def _wait_readable(pipe: Any, fd: int) -> None:
    """Before a read that may block: poll briefly if the last wait was short and a
    CPU is to spare."""
    if pipe.spin and spare_cpu():
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

    def __init__(self, pipe: Pipe) -> None:
        self.pipe = pipe

    def _ask(self, op: str, key: str, value: Any) -> Any:
        return ask(self.pipe, T_CACHE, (op, key, value), "cache")

    def get(self, key: str, default: Any = None) -> Any:
        return self._ask("get", key, _marshalable(default))

    def set(self, key: str, value: Any) -> None:
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

    def __init__(self, pipe: Pipe) -> None:
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

    def __init__(self, pipe: Pipe) -> None:
        self.pipe = pipe

    def __call__(self, method: str, payload: Any) -> Any:
        return ask(self.pipe, T_HOST, (method, _marshalable(dict(payload))), "host")


def ask(pipe: Pipe, tag: int, request: Any, what: str) -> Any:
    """One round trip from a worker to the parent: the request out, ``(ok, result)``
    back; a refusal becomes the BuiltinError the script sees."""
    pipe.send(tag, marshal.dumps(request))
    got, reply = pipe.recv()
    if got != T_REPLY:
        raise RuntimeError(f"worker protocol: expected a {what} reply, got tag {got}")
    ok, result = marshal.loads(reply)
    if not ok:
        raise BuiltinError(result)
    return result


def _marshalable(value: Any) -> Any:
    try:
        marshal.dumps(value)
    except ValueError:
        raise BuiltinError(f"value of type {type(value).__name__} is not JSON-compatible") from None
    return value
