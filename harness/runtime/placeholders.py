"""Placeholders for protected paths that do not exist, and the leases that keep them.

A sandboxed command or upstream server must never change which artifacts or
settings harness loads (issue 22 item 1). A protected path that exists is mounted
read-only in the sandbox; one that does not exist cannot be mounted, so a command
could create it (``harness.md``, ``.harness/servers/x.md``, ``.git``) and everything
that loaded meanwhile -- a ``serve --watch`` reload, a concurrent call, ``harness
list`` in another terminal -- would read what it planted. So before any sandbox
starts, :func:`hold` makes every missing protected path exist:

- ``.harness`` is created for real: it is harness's own folder (its runtime data
  lives in ``.harness/state``, where the lock files below are), and an empty one
  loads nothing. Once it exists it is read-only in the sandbox, subfolders included;
- every other missing protected path whose parent directory exists gets a
  *placeholder*: an empty directory (mode 0555) that harness makes and the sandbox
  mounts read-only. A mount point cannot be removed or renamed from inside, and
  nothing can be created in a read-only directory, so the path stays empty for the
  sandbox's whole life. The loader reads ``harness.md`` only when it is a regular
  file, and git skips an empty ``.git`` directory: a placeholder is never an
  artifact. (A path whose parent is missing too keeps the older rule: exec.run
  removes it after the command, ``builtins/proc.py``.)

Placeholders are shared by every sandbox of the workspace, in every process and of
every user, and removed by the last one to end. Each sandbox holds a :class:`Lease`
for its whole life: a shared ``flock`` on the workspace directory itself. Making
placeholders and removing them (by the last lease: its exclusive ``flock`` on the
workspace succeeds) both happen under an exclusive ``flock`` on a folder in
``.harness/state`` (hidden from every sandbox, so no command can hold it), so a
sandbox that starts never sees a placeholder disappear under it. Each placeholder
made is listed, ``(path, st_dev, st_ino)``, in ``.harness/state/sandbox/placeholders``
(hidden from every sandbox): only those, still empty, are removed. A process that
dies drops its locks with it; the next lease to end, or ``Harness.close``
(:func:`sweep`), cleans up. A command can lock the workspace directory too (it sees
it): shared, that only delays the clean-up while the command lives; exclusive, never,
since its own lease holds a shared lock for as long as it runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
from collections.abc import Sequence

from harness.errors import BuiltinError

STATE = (".harness", "state", "sandbox")
MUTEX = "mutex"
PLACEHOLDER_MODE = 0o555
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_REGISTRY = "placeholders"
_REGISTRY_MAX = 1 << 16
_runs = 0
_runs_lock = threading.Lock()


class Lease:
    """A sandbox's hold on the workspace's placeholders (see the module docstring).
    ``pinned``: placeholders existed when it was taken. Release exactly once."""

    __slots__ = ("workspace", "pinned", "_fds", "_run")

    def __init__(
        self, workspace: str, fds: tuple[int, int, int], pinned: bool, run: int | None = None
    ) -> None:
        self.workspace = workspace
        self.pinned = pinned
        # The workspace (shared flock while held), .harness, and the mutex.
        self._fds: tuple[int, int, int] | None = fds
        self._run = run  # .harness/state/sandbox, shared flock: a command or server runs

    def release(self) -> None:
        """Drop the hold; the last lease of the workspace removes the placeholders."""
        fds, run = self._fds, self._run
        if fds is None:
            return
        self._fds = self._run = None
        ws, dot, mutex = fds
        if run is not None:
            os.close(run)
        try:
            fcntl.flock(mutex, fcntl.LOCK_EX)
            fcntl.flock(ws, fcntl.LOCK_UN)
            try:
                fcntl.flock(ws, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another sandbox still runs
            _remove_all(self.workspace, dot)
        finally:
            for fd in fds:
                os.close(fd)  # drops the locks


def hold(workspace: str, protected: Sequence[str], *, running: bool = True) -> Lease:
    """A lease on the workspace, after giving each missing entry of ``protected``
    (workspace-relative, as ``sandbox.protected_paths`` lists them) its placeholder.
    ``running``: for a command or server (not a prepared sandbox, which runs nothing
    yet); :func:`running_now` and :func:`runs_started` see it. Raises BuiltinError
    when harness's own folder cannot be used."""
    global _runs
    fds = _open(workspace, create=True)
    ws, dot, mutex = fds
    run = None
    try:
        fcntl.flock(mutex, fcntl.LOCK_EX)
        fcntl.flock(ws, fcntl.LOCK_SH)
        made = [m for m in (_make(workspace, rel) for rel in protected) if m is not None]
        registered = _registry(dot)
        if made:
            _write_registry(dot, registered + made)
        if running:
            run = _walk_at(dot, STATE[1:])
            fcntl.flock(run, fcntl.LOCK_SH)
            with _runs_lock:
                _runs += 1
        fcntl.flock(mutex, fcntl.LOCK_UN)
    except BaseException:
        for fd in fds if run is None else (*fds, run):
            os.close(fd)
        raise
    return Lease(workspace, fds, bool(registered or made), run)


def runs_started() -> int:
    """How many command or server leases this process has taken (``serve --watch``
    compares it between two looks)."""
    return _runs


def running_now(workspace: str) -> bool:
    """Whether a sandboxed command or server runs in the workspace now, in any process."""
    try:
        fd = _walk(workspace, STATE)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def sweep(workspace: str) -> None:
    """Remove the placeholders if no sandbox holds them (``Harness.close``, after its
    workers and prepared sandboxes are gone: a killed worker never released its own).
    Creates nothing."""
    try:
        fds = _open(workspace, create=False)
    except (OSError, BuiltinError):
        return
    Lease(workspace, fds, pinned=True).release()


# ---------------------------------------------------------------- helpers


def _own_like(fd: int, parent: int) -> None:
    """Harness's own folders made by root in someone's workspace belong to the owner
    of the folder above (that user must be able to add tools to ``.harness``)."""
    if os.geteuid() != 0:
        return
    st = os.fstat(parent)
    if st.st_uid != 0:
        os.fchown(fd, st.st_uid, st.st_gid)


def _walk(workspace: str, parts: Sequence[str]) -> int:
    """A descriptor of ``workspace/parts...``, never following a symbolic link."""
    fd = os.open(workspace, _DIR)
    try:
        return _walk_at(fd, parts)
    finally:
        os.close(fd)


def _walk_at(fd: int, parts: Sequence[str], create: bool = False) -> int:
    """A new descriptor of ``parts...`` below ``fd`` (made when missing and ``create``;
    ``.harness/state`` gets a ``.gitignore``: runtime data is never committed)."""
    fd = os.dup(fd)
    try:
        for part in parts:
            made = False
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                    made = True
            nxt = os.open(part, _DIR, dir_fd=fd)
            if made:
                _own_like(nxt, fd)
            os.close(fd)
            fd = nxt
            if made and part == STATE[1]:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                ignore = os.open(".gitignore", flags, 0o644, dir_fd=fd)
                _own_like(ignore, fd)
                os.write(ignore, b"*\n")
                os.close(ignore)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open(workspace: str, *, create: bool) -> tuple[int, int, int]:
    """Descriptors of the workspace, of its ``.harness`` and of the mutex, a folder in
    ``.harness/state`` (hidden from every sandbox: a command could lock ``.harness``
    itself, read-only as it is, and stall every other one), made when missing and
    ``create``; never through a symbolic link."""
    try:
        ws = os.open(workspace, _DIR)
    except OSError as exc:
        raise BuiltinError(f'exec.run: cannot open the workspace "{workspace}": {exc}') from None
    dot = -1
    try:
        made = False
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(STATE[0], 0o755, dir_fd=ws)
                made = True
        dot = os.open(STATE[0], _DIR, dir_fd=ws)
        if made:
            _own_like(dot, ws)
        return ws, dot, _walk_at(dot, (*STATE[1:], MUTEX), create=create)
    except OSError as exc:
        os.close(ws)
        if dot >= 0:
            os.close(dot)
        if not create:
            raise
        raise BuiltinError(
            f'exec.run refused: harness cannot use its folder "{workspace}/.harness" '
            f"({exc.strerror or exc}); it must be a real directory harness can write "
            "(not a symbolic link or a file): fix or remove it"
        ) from None


def _registry(dot: int) -> list[tuple[str, int, int]]:
    """The placeholders made, from ``.harness/state/sandbox/placeholders``."""
    try:
        state = _walk_at(dot, STATE[1:])
    except OSError:
        return []
    try:
        fd = os.open(_REGISTRY, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=state)
    except OSError:
        return []
    finally:
        os.close(state)
    try:
        data = os.read(fd, _REGISTRY_MAX)
    finally:
        os.close(fd)
    out = []
    for line in data.decode("utf-8", "replace").splitlines():
        rel, _, rest = line.partition("\t")
        dev, _, ino = rest.partition("\t")
        if rel and dev.isdigit() and ino.isdigit():
            out.append((rel, int(dev), int(ino)))
    return out


def _write_registry(dot: int, made: list[tuple[str, int, int]]) -> None:
    data = "".join(f"{rel}\t{dev}\t{ino}\n" for rel, dev, ino in made).encode()
    state = _walk_at(dot, STATE[1:], create=True)
    try:
        if not made:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(_REGISTRY, dir_fd=state)
            return
        tmp = f".{_REGISTRY}.{os.getpid()}.{threading.get_ident()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o644, dir_fd=state)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, _REGISTRY, src_dir_fd=state, dst_dir_fd=state)
    finally:
        os.close(state)


def _parent(workspace: str, rel: str) -> tuple[int, str] | None:
    """(descriptor of the parent directory, last component), or None when a parent
    is missing, not a directory, or a symbolic link."""
    parts = rel.split("/")
    try:
        return _walk(workspace, parts[:-1]), parts[-1]
    except OSError:
        return None


def _make(workspace: str, rel: str) -> tuple[str, int, int] | None:
    """Create ``rel``'s placeholder if ``rel`` is missing; its registry entry, or None."""
    if rel == STATE[0]:
        return None  # made for real by _open
    found = _parent(workspace, rel)
    if found is None:
        return None
    fd, name = found
    try:
        try:
            os.mkdir(name, PLACEHOLDER_MODE, dir_fd=fd)
        except FileExistsError:
            return None
        except OSError:
            return None  # e.g. a read-only parent: the clean-up after the run remains
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        return rel, st.st_dev, st.st_ino
    finally:
        os.close(fd)


def _remove_all(workspace: str, dot: int) -> None:
    """Remove every registered placeholder that is still one (empty, same inode)."""
    made = _registry(dot)
    if not made:
        return
    for rel, dev, ino in reversed(made):  # children first
        found = _parent(workspace, rel)
        if found is None:
            continue
        fd, name = found
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == (dev, ino):
                os.rmdir(name, dir_fd=fd)  # fails when not empty: then it is not ours
        except OSError:
            pass
        finally:
            os.close(fd)
    _write_registry(dot, [])
