"""A runaway loop in a script worker ends as a timeout, not as a memory failure.

Starlark frees nothing while a call runs: every value a step of a loop makes stays on
the heap until the call returns. A plain CPU loop (``for i in range(10**9): n += i``)
therefore fills a worker's ``limits.memory_mb`` within seconds, long before its
timeout, and the allocator then kills the worker: the call used to be reported as
"exceeded its memory limit", which sends the author looking for a big value that is
not there (issue 25).

The engine's cancellation check (about every thousand steps) asks :func:`over`
whether the worker's address space has come within :data:`MARGIN_MB` of the cap and
grew during this call. Memory that grows step by step like that is a loop that runs
too long: the call is stopped and reported as a timeout saying so
(:func:`loop_message`), and the worker is replaced. A single large allocation (a
string or list of hundreds of MB) passes the check in one step and still ends as
"exceeded its memory limit".

Only workers arm the guard (``runtime.isolation: process``); in-process calls have no
memory cap and run until their timeout.
"""

from __future__ import annotations

import os

MARGIN_MB = 48  # below the cap: room for the engine to unwind and report
MIN_GROWTH = 16 << 20  # bytes this call must have added before the guard stops it
LIMIT = 0  # bytes of address space past which a call is stopped; 0 = not armed
MEMORY_MB = 0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_fd = -1
_base = 0
_tripped = False


def arm(memory_mb: int) -> None:
    """Arm the guard in this process (a worker capped at ``memory_mb``)."""
    global LIMIT, MEMORY_MB, _fd
    if memory_mb <= 0:
        return
    try:
        _fd = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # no /proc: the allocator's failure still ends the call
        return
    MEMORY_MB = memory_mb
    LIMIT = max(0, (memory_mb - MARGIN_MB)) << 20


def _size() -> int:
    return int(os.pread(_fd, 64, 0).split(None, 1)[0]) * _PAGE


def start() -> None:
    """Before each call: what the worker holds already is not this call's growth."""
    global _base, _tripped
    _tripped = False
    if LIMIT:
        _base = _size()


def over() -> bool:
    """Whether the call in flight has grown the worker to within the margin of its cap."""
    global _tripped
    size = _size()
    if size > LIMIT and size - _base > MIN_GROWTH:
        _tripped = True
    return _tripped


def tripped() -> bool:
    """Whether the guard stopped the last call (its worker is then replaced)."""
    return _tripped


def loop_message(ran_ms: float, timeout_ms: int) -> str:
    """The timeout message of a call the guard stopped."""
    budget = f"its {timeout_ms} ms timeout" if timeout_ms > 0 else "any timeout"
    return (
        f"timed out: stopped after {ran_ms / 1000.0:.1f} s, before {budget}, because a "
        f"loop had filled the memory limit ({MEMORY_MB} MB): Starlark keeps the values "
        "of every step until the call returns, so a long loop runs out of memory before "
        "it runs out of time; bound the loop or do the work in a command (exec.run)"
    )
