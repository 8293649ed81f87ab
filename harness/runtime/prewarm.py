"""Prepared sandboxes: the next ``exec.run`` finds its bubblewrap already set up.

Setting up a sandbox (namespaces, mounts, ``pivot_root``) costs ~5 ms here, most of
it kernel work that does not depend on the command. So after every sandboxed
command, a sandbox for the *same plan* (same bwrap flags, mounts, masks and base
environment) is started in the background: bubblewrap sets it up and then runs a
small POSIX ``sh`` stub that prints one byte and waits for its command on stdin.

Every prepared sandbox serves exactly one command, so every command still gets
fresh namespaces and a fresh ``/tmp`` (docs/spec.md §8.4). Before one is used:

- its plan must equal the plan computed for this call (flags, every mount, the
  sensitive-file masks, the environment): a workspace that changed since (a new
  ``.env``, a protected path created) gives a different plan, and a cold start;
- what the sandbox actually mounted is checked from outside through
  ``/proc/PID/root``: every bind shows the inode the host path holds *now*, every
  mask is ``/dev/null`` or an empty tmpfs, read-only binds are read-only. A path
  swapped between the start and the use fails the check, and the call starts cold.

Then the stub reads one line: ``cd DIR; set -- PROGRAM ARGS; unset OLDPWD; export
NAME=VALUE...; unset nl line; exec "$@"``, every word single-quoted (the stub already has the
plan's base environment). Anything the line cannot carry (a variable name that is
not a shell name or that dash owns, a line over 32 KiB) starts cold, as does a
machine without ``dash``. ``HARNESS_PREWARM=0`` turns this off.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import stat
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence

from harness.runtime import placeholders, seccomp
from harness.runtime.wire import readable

ENABLED = os.environ.get("HARNESS_PREWARM", "1") != "0"
# Worker processes run one thread (worker_main lifts RLIMIT_AS around each fork):
# they start the next sandbox themselves, right after the command, instead of
# through a spawner thread.
SYNC = False
MAX_KEYS = 2  # plans with prepared sandboxes per process (least recent evicted)
MAX_PER_KEY = 16  # prepared sandboxes per plan: one per command running at once
MAX_LINE = 32 * 1024
READY_WAIT_S = 2.0
IDLE_S = 30.0  # a prepared sandbox beyond what runs at once is kept this long

# ``nl`` lets a quoted word carry a newline: read -r stops at the first one.
STUB = "nl='\n'\nprintf R\nIFS= read -r line || exit 125\neval \"$line\"\n"

Key = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]


class Prepared:
    __slots__ = ("proc", "key", "born", "targets", "checked_ns", "lease")

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        key: Key,
        targets: Mapping[str, tuple[int, int, int]] | None = None,
        checked_ns: int = 0,
        lease: placeholders.Lease | None = None,
    ) -> None:
        self.proc = proc
        self.key = key
        self.born = time.monotonic()
        self.targets = targets or {}  # mount target in the workspace -> _identity
        self.checked_ns = checked_ns  # when they were looked at, before bubblewrap ran
        # Its hold on the workspace's placeholders (runtime/placeholders.py), which its
        # mounts pin: released when it is killed, or used (the call holds its own).
        self.lease = lease

    def release(self) -> None:
        lease, self.lease = self.lease, None
        if lease is not None:
            lease.release()


_lock = threading.Lock()
_cond = threading.Condition(_lock)
_ready: OrderedDict[Key, list[Prepared]] = OrderedDict()  # oldest first
_pending: dict[Key, int] = {}  # being started (by the spawner thread)
_inflight = 0  # exec.run calls running in this process (see running())
# Per plan: the last prepared sandbox was still setting up when it was taken (calls
# come back to back), so the next one is prepared as soon as a command starts.
_eager: dict[Key, bool] = {}
_jobs: queue.SimpleQueue[tuple[Key, str, int, placeholders.Lease] | None] = queue.SimpleQueue()
_generation = 0  # bumped by discard_all: a start in flight then kills what it made
_starting = 0  # starts between their generation check and their registration
_spawner: threading.Thread | None = None
_tools: str | None = None  # dash's real path; "" when there is none


def split(argv: Sequence[str]) -> tuple[tuple[str, ...], list[str]] | None:
    """(bwrap argv before ``--chdir``, the rest), or None if there is no ``--chdir``."""
    try:
        i = list(argv).index("--chdir")
    except ValueError:
        return None
    return tuple(argv[:i]), list(argv[i:])


def key_of(prefix: tuple[str, ...], env: Mapping[str, str]) -> Key:
    return prefix, tuple(sorted(env.items()))


def tools() -> str | None:
    """The real path of ``dash`` under /usr (visible in every sandbox), or None.

    dash, because its environment is exactly what it was given plus PWD/OLDPWD,
    which the line unsets (bash would add SHLVL and ``_``). No dash: no prepared
    sandboxes, every command starts cold."""
    global _tools
    if _tools is None:
        path = shutil.which("dash", path="/usr/bin:/bin")
        real = os.path.realpath(path) if path else ""
        _tools = real if real.startswith("/usr/") else ""
    return _tools or None


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''").replace("\n", "'\"$nl\"'") + "'"


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Variables dash itself sets or resets at start (or the stub uses): with one of these
# in the environment the command starts cold, so that it sees exactly what a cold
# start gives it. PWD and OLDPWD are handled by the line itself.
_SHELL_OWNED = frozenset({"PPID", "IFS", "OPTIND", "nl", "line"})


def command_line(
    cwd: str, base: Mapping[str, str], env: Mapping[str, str], program: str, args: Sequence[str]
) -> bytes | None:
    """The stub's one line, or None when it cannot carry this command.

    The stub runs with ``base`` as its environment; the line exports what this call
    adds or changes, sets PWD as bubblewrap's ``--chdir`` does, and takes back the
    OLDPWD that ``cd`` sets. Program and arguments go through ``set --`` while
    ``nl`` still means a newline, then ``exec "$@"``."""
    if tools() is None or not program.startswith("/"):
        return None
    words = []
    for k, v in env.items():
        if k in _SHELL_OWNED or not _NAME.fullmatch(k):
            return None  # dash would change or drop it: start cold
        if k not in ("PWD", "OLDPWD") and base.get(k) != v:
            words.append(_quote(f"{k}={v}"))
    if "OLDPWD" in env:
        words.append(_quote(f"OLDPWD={env['OLDPWD']}"))
    words.append(_quote(f"PWD={cwd}"))
    # nl is unset last: the quoted words above may use it.
    line = (
        f"cd -- {_quote(cwd)} || exit 126; "
        f"set -- {' '.join(_quote(w) for w in (program, *args))}; "
        f'unset OLDPWD; export {" ".join(words)}; unset nl line; exec "$@"'
    )
    data = os.fsencode(line) + b"\n"
    return data if len(data) <= MAX_LINE else None


# ---------------------------------------------------------------- taking one


def take(key: Key) -> Prepared | None:
    """The prepared sandbox for this plan, if one is alive (it is now ours)."""
    with _cond:
        if not _ready.get(key) and _pending.get(key) and _inflight <= 1:
            # One command at a time and its sandbox is being started: that is further
            # along than a cold start would be. (With several at once, each would wait
            # for the same one: they start cold.)
            _cond.wait_for(lambda: bool(_ready.get(key)) or not _pending.get(key), timeout=0.1)
        waiting = _ready.get(key)
        p = waiting.pop(0) if waiting else None
        # Prepared for a burst that is over (more than run now, unused for IDLE_S):
        # trim them.
        surplus: list[Prepared] = []
        if waiting and len(waiting) >= max(1, _inflight):
            now = time.monotonic()
            keep = waiting[: max(1, _inflight)]
            for extra in waiting[max(1, _inflight) :]:
                (surplus if now - extra.born > IDLE_S else keep).append(extra)
            waiting[:] = keep
        if waiting == []:
            del _ready[key]
    for extra in surplus:
        _kill(extra)
    if p is None:
        return None
    if p.proc.poll() is not None:
        _kill(p)
        return None
    assert p.proc.stdout is not None
    try:
        ready = readable(p.proc.stdout.fileno(), 0)
    except BaseException:
        _kill(p)
        raise
    with _lock:
        if len(_eager) >= 64 and key not in _eager:
            _eager.clear()  # a hint per plan, not a record: keep it small
        _eager[key] = not ready
    return p


def eager(key: Key) -> bool:
    """Whether the next sandbox for ``key`` should be prepared right away."""
    return _eager.get(key, False)


def start(p: Prepared, prefix: Sequence[str], line: bytes, wait: float = READY_WAIT_S) -> bool:
    """Wait (up to ``wait`` s) until ``p`` is set up, check its mounts, hand it the line.

    False (and ``p`` killed) when anything is off: the caller starts cold."""
    proc = p.proc
    assert proc.stdout is not None and proc.stdin is not None
    try:
        fd_out = proc.stdout.fileno()
        if (
            not readable(fd_out, max(0.0, wait))
            or os.read(fd_out, 1) != b"R"
            or _undo_created(p)
            or not verify(proc.pid, prefix)
        ):
            _kill(p)
            return False
        # All of it, or nothing runs: a line cut short would be completed by the
        # script's own stdin data.
        view = memoryview(line)
        fd = proc.stdin.fileno()
        while view:
            view = view[os.write(fd, view) :]
        p.release()  # the call that took it holds its own lease
    except OSError:
        _kill(p)
        return False
    except BaseException:
        _kill(p)
        raise
    return True


def _sandbox_root(bwrap_pid: int) -> str | None:
    """``/proc/PID/root`` of the sandbox's first process (bwrap's child)."""
    try:
        with open(f"/proc/{bwrap_pid}/task/{bwrap_pid}/children", encoding="ascii") as f:
            kids = f.read().split()
    except OSError:
        return None
    return f"/proc/{kids[0]}/root" if len(kids) == 1 else None


_ZERO = {
    "--unshare-all",
    "--unshare-user",
    "--unshare-user-try",
    "--disable-userns",
    "--die-with-parent",
    "--new-session",
    "--unshare-net",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup",
    "--unshare-cgroup-try",
    "--as-pid-1",
    "--clearenv",
}
_ONE = {
    "--cap-drop",
    "--cap-add",
    "--proc",
    "--dev",
    "--tmpfs",
    "--remount-ro",
    "--dir",
    "--perms",
    "--size",
    "--hostname",
}
_TWO = {"--bind", "--ro-bind", "--dev-bind", "--symlink"}


def verify(bwrap_pid: int, prefix: Sequence[str]) -> bool:  # noqa: C901
    """Whether the running sandbox shows what ``prefix`` asks for, as the host is now."""
    root = _sandbox_root(bwrap_pid)
    if root is None:
        return False
    if seccomp.available() and not _filtered(root):
        return False
    try:
        null = os.stat("/dev/null").st_rdev
        i = 1  # prefix[0] is bwrap itself
        while i < len(prefix):
            op = prefix[i]
            if op in _ZERO:
                i += 1
            elif op in _ONE:
                dest = prefix[i + 1]
                if op == "--tmpfs":
                    inside = os.lstat(root + dest)
                    host = _lstat(dest)
                    if not stat.S_ISDIR(inside.st_mode) or (
                        host is not None and host.st_dev == inside.st_dev
                    ):
                        return False
                elif op == "--remount-ro" and not os.statvfs(root + dest).f_flag & os.ST_RDONLY:
                    return False
                i += 2
            elif op in _TWO:
                src, dest = prefix[i + 1], prefix[i + 2]
                if op == "--symlink":
                    if os.readlink(root + dest) != src:
                        return False
                else:
                    inside = os.lstat(root + dest)
                    if src == "/dev/null":
                        ok = stat.S_ISCHR(inside.st_mode) and inside.st_rdev == null
                    else:
                        host = os.stat(src)
                        ok = (inside.st_dev, inside.st_ino) == (host.st_dev, host.st_ino)
                    if not ok or (
                        op == "--ro-bind" and not os.statvfs(root + dest).f_flag & os.ST_RDONLY
                    ):
                        return False
                i += 3
            else:
                return False  # a flag this check does not know: start cold
    except (OSError, IndexError):
        return False
    return True


def _filtered(root: str) -> bool:
    """Whether the stub runs under a seccomp filter (mode 2), as a cold start's
    command would (``root`` is ``/proc/PID/root`` of the sandbox's first process).

    With a pid namespace that first process is bubblewrap's init and the stub its
    only child; the init applies its own filter a moment after forking the stub, so
    the stub (which has printed its byte, so its filter is in force) is the one
    checked."""
    pid = root.split("/")[2]
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            kids = f.read().split()
        if len(kids) == 1:
            pid = kids[0]
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Seccomp:"):
                    return line.split()[1] == "2"
    except OSError:
        pass
    return False


def _targets(prefix: Sequence[str], workspace: str) -> list[str] | None:
    """The mount targets of ``prefix`` inside the workspace (bubblewrap creates any
    that is missing), or None for a flag this does not know."""
    base = workspace.rstrip("/") + "/"
    out: list[str] = []
    i = 1  # prefix[0] is bwrap itself
    while i < len(prefix):
        op = prefix[i]
        if op in _ZERO:
            i += 1
            continue
        if op in _ONE:
            dest, i = prefix[i + 1], i + 2
            if op not in ("--tmpfs", "--dir", "--proc", "--dev"):
                continue
        elif op in _TWO:
            dest, i = prefix[i + 2], i + 3
        else:
            return None
        if dest.startswith(base):
            out.append(dest)
    return out


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    # A file's ctime too: one made right after another was deleted often gets its
    # inode. Not a directory's: it changes with every entry made or removed in it.
    return st.st_dev, st.st_ino, 0 if stat.S_ISDIR(st.st_mode) else st.st_ctime_ns


def _identities(targets: list[str] | None) -> dict[str, tuple[int, int, int]] | None:
    """The identity of every target, or None when one is missing (or unknown)."""
    if targets is None:
        return None
    out = {}
    for target in targets:
        st = _lstat(target)
        if st is None:
            return None
        out[target] = _identity(st)
    return out


def _undo_created(p: Prepared) -> bool:
    """Whether a target of ``p`` is not the entry it was when ``p`` was started;
    an empty 0444 file bubblewrap made for a target deleted meanwhile is removed."""
    changed = False
    for target, ident in sorted(p.targets.items(), reverse=True):  # children first
        st = _lstat(target)
        if st is None or _identity(st) == ident:
            continue
        changed = True
        if (
            stat.S_ISREG(st.st_mode)
            and st.st_size == 0
            and stat.S_IMODE(st.st_mode) == 0o444
            and st.st_ctime_ns >= p.checked_ns
        ):
            with contextlib.suppress(OSError):
                os.unlink(target)
    return changed


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


# ---------------------------------------------------------------- preparing one


@contextlib.contextmanager
def running() -> Iterator[None]:
    """Around one exec.run: how many run at once sizes the number prepared."""
    global _inflight
    with _lock:
        _inflight += 1
    try:
        yield
    finally:
        with _lock:
            _inflight -= 1


def generation() -> int:
    """Read before a command; pass to :func:`prepare` after it (see ``discard_all``)."""
    return _generation


def prepare(key: Key, workspace: str, gen: int) -> None:
    """Start a sandbox for ``key`` in the background, unless enough are ready or on the
    way (one per exec.run running in this process right now).

    ``gen``: :func:`generation` as it was when the command began; a ``discard_all``
    since (``Harness.close`` during the command) means nothing is prepared."""
    if not ENABLED or tools() is None:
        return
    with _lock:
        if gen != _generation:
            return
        want = min(MAX_PER_KEY, max(1, _inflight))
        if key in _ready:
            _ready.move_to_end(key)
        if len(_ready.get(key, ())) + _pending.get(key, 0) >= want:
            return
        _pending[key] = _pending.get(key, 0) + 1
    # Taken now, while the command that asks still holds its own: the placeholders its
    # plan mounts cannot be removed before this sandbox is set up.
    try:
        lease = placeholders.hold(workspace, (), running=False)
    except Exception:  # noqa: BLE001 - a failed start only means a cold start later
        _started(key)
        return
    if SYNC:
        with contextlib.suppress(Exception):  # a failed start only means a cold start later
            _spawn(key, workspace, gen, lease)
        return
    global _spawner
    try:
        with _lock:
            if _spawner is None or not _spawner.is_alive():
                # A thread that lives as long as the process: bubblewrap's
                # die-with-parent follows the thread that started it.
                _spawner = threading.Thread(
                    target=_run_spawner, name="harness-prewarm", daemon=True
                )
                _spawner.start()
        _jobs.put((key, workspace, gen, lease))
    except BaseException as exc:
        lease.release()
        _started(key)  # nothing was queued: take back the count
        if not isinstance(exc, Exception):
            raise


def _run_spawner() -> None:
    while True:
        try:
            job = _jobs.get(timeout=IDLE_S)
        except queue.Empty:
            _expire_pinned()
            continue
        if job is None:
            return
        with contextlib.suppress(Exception):  # a failed start only means a cold start later
            _spawn(*job)


def _expire_pinned() -> None:
    """Kill the prepared sandboxes unused for IDLE_S whose mounts pin placeholders
    (runtime/placeholders.py): while one waits, a missing ``harness.md`` stays an empty
    directory in the workspace. (Worker processes have no idle thread: theirs go with
    the worker or ``Harness.close``.)"""
    now = time.monotonic()
    gone: list[Prepared] = []
    with _lock:
        for key in list(_ready):
            waiting = _ready[key]
            old = [p for p in waiting if p.lease is not None and p.lease.pinned]
            old = [p for p in old if now - p.born > IDLE_S]
            if old:
                waiting[:] = [p for p in waiting if p not in old]
                gone += old
                if not waiting:
                    del _ready[key]
    for p in gone:
        _kill(p)


def _spawn(key: Key, workspace: str, generation: int, lease: placeholders.Lease) -> None:
    try:
        _start(key, workspace, generation, lease)
    finally:
        _started(key)


def _started(key: Key) -> None:
    """One start for ``key`` is over (done, failed or never queued)."""
    with _cond:
        left = _pending.get(key, 0) - 1
        if left > 0:
            _pending[key] = left
        else:
            _pending.pop(key, None)
        _cond.notify_all()


def _start(key: Key, workspace: str, generation: int, lease: placeholders.Lease) -> None:
    global _starting
    t = tools()
    if t is None:
        lease.release()
        return
    prefix, env = key
    with _lock:
        if generation != _generation:
            lease.release()
            return
        _starting += 1
    evicted = []
    made: Prepared | None = None
    try:
        # bubblewrap creates a missing mount target (an empty 0444 file, a directory)
        # on the host, through the workspace bind: a .env deleted since this plan was
        # made would come back. Such a plan is stale: the next call plans afresh.
        checked_ns = time.time_ns()
        targets = _identities(_targets(prefix, workspace))
        if targets is None:
            return
        argv = [*prefix, "--chdir", workspace, "--", t, "-c", STUB, "harness-stub"]
        # The same seccomp filter as a cold start (verify() checks it is in force).
        filter_fd = seccomp.open_fd()
        try:
            proc = subprocess.Popen(
                argv if filter_fd is None else seccomp.insert(argv, filter_fd),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(env),
                cwd=workspace,
                start_new_session=True,
                close_fds=True,
                pass_fds=() if filter_fd is None else (filter_fd,),
            )
        finally:
            if filter_fd is not None:
                os.close(filter_fd)
        made = Prepared(proc, key, targets, checked_ns, lease)
        if not SYNC and proc.stdout is not None:
            # A target deleted between the look above and the mounts: bubblewrap's
            # file is taken back as soon as the set-up is done, and this sandbox is
            # not used (this thread can wait; a worker process checks when the
            # sandbox is used or discarded).
            readable(proc.stdout.fileno(), READY_WAIT_S)
            if _undo_created(made):
                evicted.append(made)
        with _lock:
            if generation != _generation and made not in evicted:
                evicted.append(made)
            elif made not in evicted:
                _ready.setdefault(key, []).append(made)
                _ready.move_to_end(key)
                while len(_ready) > MAX_KEYS:
                    gone_key, gone = _ready.popitem(last=False)
                    _eager.pop(gone_key, None)
                    evicted += gone
        for p in evicted:
            _kill(p)
    finally:
        if made is None:
            lease.release()
        with _cond:
            _starting -= 1
            _cond.notify_all()


def _kill(p: Prepared) -> None:
    proc = p.proc
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, 9)
    with contextlib.suppress(Exception):
        proc.wait(timeout=5)
    with contextlib.suppress(OSError):
        _undo_created(p)
    p.release()
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()


def discard_all() -> None:
    """Kill every prepared sandbox of this process (Harness.close, tests)."""
    global _generation
    with _cond:
        _generation += 1
        # A start in flight sees the new generation and kills what it made, one queued
        # drops its lease (runtime/placeholders.py) unused: wait for both.
        _cond.wait_for(lambda: _starting == 0 and not _pending, timeout=5)
        items = [p for waiting in _ready.values() for p in waiting]
        _ready.clear()
        _eager.clear()
    for p in items:
        _kill(p)
