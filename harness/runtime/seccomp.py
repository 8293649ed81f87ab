"""The seccomp filter of the command sandbox (bubblewrap ``--seccomp FD``).

A classic BPF program, generated here (no library): the sandbox refuses, with
``EPERM``, the system calls that change host kernel or host process state and that
namespaces do not isolate:

- the key management calls (``add_key``, ``request_key``, ``keyctl``): keyrings are
  shared with the harness process (the session keyring) and, for the same uid, with
  every process of the machine;
- loading kernel code or another kernel (``init_module``, ``finit_module``,
  ``delete_module``, ``kexec_load``, ``kexec_file_load``, ``bpf``), ``reboot``,
  swap, process accounting, quotas, the kernel log (``syslog``), the system clock
  (``settimeofday``, ``clock_settime``), ``perf_event_open``, ``userfaultfd``,
  ``open_by_handle_at``/``name_to_handle_at`` (the classic container escape),
  ``iopl``/``ioperm``, ``lookup_dcookie``.

Dropped capabilities already refuse most of these; the filter is the second wall
(and the only one for keyrings). Any other architecture of the calling convention
(a 32-bit ``int 0x80`` call on x86-64, x32 numbers) is refused as a whole.
Supported: x86-64 and aarch64; elsewhere :func:`program` is ``None`` and the sandbox
runs without the filter (docs/security-exec-net.md).
"""

from __future__ import annotations

import os
import platform
import struct

# Names in the order of the tables below.
BLOCKED = (
    "add_key",
    "request_key",
    "keyctl",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "bpf",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "syslog",
    "settimeofday",
    "clock_settime",
    "perf_event_open",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "lookup_dcookie",
    "iopl",
    "ioperm",
)
# (AUDIT_ARCH_*, system call numbers in BLOCKED order; None: no such call there)
_ARCHES: dict[str, tuple[int, tuple[int | None, ...]]] = {
    "x86_64": (
        0xC000003E,
        (
            248,
            249,
            250,
            175,
            313,
            176,
            246,
            320,
            321,
            169,
            167,
            168,
            163,
            179,
            103,
            164,
            227,
            298,
            323,
            304,
            303,
            212,
            172,
            173,
        ),
    ),
    "aarch64": (
        0xC00000B7,
        (
            217,
            218,
            219,
            105,
            273,
            106,
            104,
            294,
            280,
            142,
            224,
            225,
            89,
            60,
            116,
            170,
            112,
            241,
            282,
            265,
            264,
            18,
            None,
            None,
        ),
    ),
}
_X32_BIT = 0x40000000

# BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_EPERM = 1
_OFF_NR, _OFF_ARCH = 0, 4  # struct seccomp_data


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture, or None when it has no table."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit, numbers = arch
    nrs = sorted({n for n in numbers if n is not None})
    deny = _insn(_RET_K, 0, 0, _ERRNO | _EPERM)
    out = [
        _insn(_LD_W_ABS, 0, 0, _OFF_ARCH),
        _insn(_JEQ_K, 1, 0, audit),
        deny,
        _insn(_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if audit == _ARCHES["x86_64"][0]:
        out += [_insn(_JGE_K, 0, 1, _X32_BIT), deny]
    # One test per number: jump to the deny at the end when equal.
    for i, nr in enumerate(nrs):
        out.append(_insn(_JEQ_K, len(nrs) - i, 0, nr))
    out += [_insn(_RET_K, 0, 0, _ALLOW), deny]
    return b"".join(out)


_PROGRAM = program()


def available() -> bool:
    return _PROGRAM is not None


def open_fd() -> int | None:
    """A fresh, readable fd holding the filter (bubblewrap reads it to the end and
    closes it), or None when this architecture has no filter. The caller passes it
    to the child (``pass_fds``) and closes its own copy after the spawn."""
    if _PROGRAM is None:
        return None
    fd = os.memfd_create("harness-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, _PROGRAM)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def insert(argv: list[str], fd: int) -> list[str]:
    """``argv`` with ``--seccomp FD`` just before the ``--`` that ends bwrap's options
    (after ``--chdir``, so the plan key of prepared sandboxes does not hold an fd)."""
    i = argv.index("--")
    return [*argv[:i], "--seccomp", str(fd), *argv[i:]]
