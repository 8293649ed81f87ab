"""The workspace jail (SPEC §8.1–8.3): race-free path resolution beneath the workspace.

Every path a built-in receives goes through a :class:`Jail`. The jail holds one
directory handle of the workspace per process and opens everything *relative to that
handle*, with resolution confined beneath it at the moment of the open:

* Linux (x86_64, aarch64): ``openat2(root_fd, path, RESOLVE_BENEATH |
  RESOLVE_NO_MAGICLINKS)`` through ``syscall(437)``. The kernel refuses ``..``
  escapes, absolute symlinks and ``/proc`` magic links atomically. The resolved path
  of the opened file is read back from ``/proc/self/fd`` to apply the protected and
  sensitive rules to what was really opened.
* Elsewhere, or when ``openat2`` is missing (``ENOSYS``/``EPERM`` from seccomp), and
  for absolute symlinks that point back inside the workspace (which
  ``RESOLVE_BENEATH`` refuses outright): a component-by-component walk, each
  component opened with ``O_NOFOLLOW`` relative to the previous directory handle;
  symlinks are read with ``readlinkat`` and resolved by the walk itself, at most 40
  hops; ``..`` pops a held handle and can never climb above the workspace.

Neither path checks first and opens later, so swapping a symlink in while a call is in
flight can only make the call fail, never make it reach outside.

Writes never open the target for writing: :meth:`Jail.locate` returns a handle of the
resolved parent directory plus the final name (final symlinks followed by the jail), and
the caller creates a temporary file in that directory and ``renameat``s it over the
name. ``rename`` does not follow symlinks, so a link swapped in at the last moment is
replaced, never written through.
"""

from __future__ import annotations

import ctypes
import errno
import fnmatch
import os
import platform
import posixpath
import re
import stat as st
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from harness.errors import BuiltinError, JailError

if TYPE_CHECKING:
    from harness.config import Config

__all__ = ["ALWAYS_HIDDEN", "ALWAYS_READONLY", "Jail", "Located", "clear_jails", "get_jail",
           "is_sensitive"]

ALWAYS_HIDDEN = (".harness",)
ALWAYS_READONLY = ("harness.md", ".git")
MAX_SYMLINK_HOPS = 40

# SPEC §8.3, exact list. Name patterns match the last component, anywhere in the tree.
SENSITIVE_NAMES = (
    ".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_ed25519*",
    "id_ecdsa*", ".netrc", ".npmrc", ".pypirc", ".git-credentials", "credentials.json",
)
_SENSITIVE_NAME = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in SENSITIVE_NAMES),
                             re.DOTALL)
# Any component equal to one of these: the directory itself and everything under it.
SENSITIVE_DIRS = (".ssh", ".aws", ".gnupg", ".kube")
# Consecutive components anywhere (a prefix match of the sequence: the path or under it).
SENSITIVE_SEQUENCES = ((".docker", "config.json"), (".config", "gcloud"))

OUTSIDE = 'path "{}" is outside the workspace'
SENSITIVE = 'path "{}" is a protected sensitive file'
HIDDEN = 'path "{}" is protected (not readable or writable by tools)'
READONLY = 'path "{}" is protected (read-only)'

_O_PATH = getattr(os, "O_PATH", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
# Flags to get a handle that can be fstat'ed but need not be readable (no FIFO blocking).
PROBE_FLAGS = (_O_PATH or (os.O_RDONLY | os.O_NONBLOCK)) | _CLOEXEC
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | _NOCTTY | _CLOEXEC
_WALK_DIR_FLAGS = (_O_PATH or os.O_RDONLY) | os.O_DIRECTORY | _CLOEXEC
# What opening a symlink with O_NOFOLLOW reports (Linux/macOS, FreeBSD, NetBSD, O_DIRECTORY).
_LINK_ERRNOS = {errno.ELOOP, errno.EMLINK, errno.ENOTDIR, getattr(errno, "EFTYPE", errno.ELOOP)}

# ---------------------------------------------------------------------------- openat2

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}.get(platform.machine())


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


_syscall = None
if _SYS_OPENAT2 is not None and platform.system() == "Linux":
    try:
        _libc = ctypes.CDLL(None, use_errno=True)
        _syscall = _libc.syscall
        _syscall.restype = ctypes.c_long
        _syscall.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p,
                             ctypes.c_void_p, ctypes.c_size_t]
    except (OSError, AttributeError):  # pragma: no cover - no libc symbol
        _syscall = None


def _openat2(dirfd: int, path: str, flags: int) -> int:
    assert _syscall is not None and _SYS_OPENAT2 is not None
    how = _OpenHow(flags | _CLOEXEC, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    encoded = os.fsencode(path)
    for _ in range(16):  # EAGAIN: a concurrent rename raced a ".." lookup; retry
        fd = _syscall(_SYS_OPENAT2, dirfd, encoded, ctypes.byref(how), ctypes.sizeof(how))
        if fd >= 0:
            return int(fd)
        err = ctypes.get_errno()
        if err not in (errno.EAGAIN, errno.EINTR):
            raise OSError(err, os.strerror(err), path)
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), path)


# ----------------------------------------------------------------------------- rules

def _fold(parts: Iterable[str]) -> list[str]:
    return [p.casefold() for p in parts]


def is_sensitive(parts: Sequence[str]) -> bool:
    """Whether a workspace-relative path (as components) names a sensitive file (§8.3).

    Matching is case-insensitive (``.ENV`` is ``.env`` on macOS and Windows)."""
    if not parts:
        return False
    folded = _fold(parts)
    if _SENSITIVE_NAME.match(folded[-1]):
        return True
    if any(p in SENSITIVE_DIRS for p in folded):
        return True
    for seq in SENSITIVE_SEQUENCES:
        n = len(seq)
        if any(tuple(folded[i:i + n]) == seq for i in range(len(folded))):
            return True
    return False


def _split(rel: str) -> list[str]:
    return [p for p in rel.split("/") if p not in ("", ".")]


def _lexical_parts(rel: str) -> list[str]:
    """Normalized components of a relative path; leading ``..`` dropped (checked later)."""
    norm = posixpath.normpath(rel) if rel else "."
    parts = _split(norm)
    while parts and parts[0] == "..":
        parts.pop(0)
    return parts


class Located:
    """A resolved parent directory handle plus the final name (``name`` is ``""`` for
    the workspace root, and ``dir_fd`` is then a handle of the root itself).

    ``rel`` is the resolved workspace-relative path; ``shown`` the caller's path.
    Close it (or use it as a context manager)."""

    __slots__ = ("dir_fd", "name", "rel", "shown")

    def __init__(self, dir_fd: int, name: str, rel: str, shown: str) -> None:
        self.dir_fd, self.name, self.rel, self.shown = dir_fd, name, rel, shown

    def close(self) -> None:
        if self.dir_fd >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1

    def __enter__(self) -> Located:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_REGISTRY_LOCK = threading.Lock()
_REGISTRY: dict[tuple[str, tuple[str, ...], bool | None], Jail] = {}


def _after_fork_in_child() -> None:
    global _REGISTRY_LOCK
    _REGISTRY_LOCK = threading.Lock()
    for jail in list(_REGISTRY.values()):
        jail._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def clear_jails() -> None:
    """Close and forget every cached Jail of this process (tests, shutdown)."""
    with _REGISTRY_LOCK:
        jails = list(_REGISTRY.values())
        _REGISTRY.clear()
    for jail in jails:
        jail.close()


def get_jail(config: Config, *, use_openat2: bool | None = None) -> Jail:
    """The process-wide Jail for ``config.workspace`` and ``config.fs.protected``."""
    return Jail.get(Path(config.workspace), tuple(config.fs.protected), use_openat2=use_openat2)


class Jail:
    """Confinement of paths to one workspace directory.

    ``protected``: workspace-relative paths (the SPEC §8.2 ones are always added);
    ``.harness`` is hidden (neither readable nor writable), every other entry
    read-only. Entries are anchored at the workspace root and matched
    case-insensitively on the *resolved* path and on the path as written.

    ``use_openat2``: ``None`` = use it when the kernel has it; ``False`` forces the
    portable walk (tests run every vector both ways).
    """

    def __init__(self, workspace: Path, protected: tuple[str, ...] = (), *,
                 use_openat2: bool | None = None) -> None:
        self.workspace = str(workspace)
        if not os.path.isabs(self.workspace):
            raise ValueError(f"workspace must be an absolute path, got {self.workspace!r}")
        self._bases = tuple(dict.fromkeys(
            [os.path.normpath(self.workspace), os.path.realpath(self.workspace)]))
        hidden, readonly = list(ALWAYS_HIDDEN), list(ALWAYS_READONLY)
        for entry in protected:
            norm = posixpath.normpath(entry.strip().lstrip("/")) if entry.strip() else "."
            if norm in (".", "..") or norm.startswith("../"):
                continue
            key = tuple(_fold(_split(norm)))
            if key and not any(key == tuple(_fold(_split(h))) for h in hidden + readonly):
                readonly.append(norm)
        self._hidden = tuple(tuple(_fold(_split(h))) for h in hidden)
        self._readonly = tuple(tuple(_fold(_split(r))) for r in readonly)
        self.protected = tuple(hidden + readonly)
        self._lock = threading.Lock()
        self._state: tuple[int, int, tuple[int, int]] | None = None  # pid, fd, (dev, ino)
        want = use_openat2 if use_openat2 is not None else True
        self._procfd = os.path.isdir("/proc/self/fd")
        self.mode: Literal["openat2", "walk"] = "walk"
        if want and _syscall is not None and self._procfd:
            try:
                os.close(_openat2(self._root(), ".", PROBE_FLAGS))
                self.mode = "openat2"
            except OSError as e:
                if use_openat2 and e.errno not in (errno.ENOSYS, errno.EPERM, errno.EINVAL):
                    raise

    @classmethod
    def get(cls, workspace: Path, protected: tuple[str, ...] = (), *,
            use_openat2: bool | None = None) -> Jail:
        """One Jail (and one directory handle) per (workspace, protected) per process."""
        key = (str(workspace), tuple(protected), use_openat2)
        jail = _REGISTRY.get(key)
        if jail is None:
            with _REGISTRY_LOCK:
                jail = _REGISTRY.get(key)
                if jail is None:
                    jail = _REGISTRY[key] = cls(workspace, tuple(protected),
                                                use_openat2=use_openat2)
        return jail

    # ----------------------------------------------------------------- root handle

    def _root(self) -> int:
        """The workspace handle, reopened lazily after fork or if the directory changed."""
        try:
            now = os.stat(self.workspace)
        except OSError as e:
            raise BuiltinError(f'the workspace "{self.workspace}" is not accessible: '
                               f"{e.strerror}") from None
        ident = (now.st_dev, now.st_ino)
        state = self._state
        pid = os.getpid()
        if state is not None and state[0] == pid and state[2] == ident:
            return state[1]
        with self._lock:
            state = self._state
            if state is not None and state[0] == pid and state[2] == ident:
                return state[1]
            fd = os.open(self.workspace, _WALK_DIR_FLAGS)
            got = os.fstat(fd)
            if (got.st_dev, got.st_ino) != ident:  # replaced between stat and open: retry
                os.close(fd)
                raise BuiltinError(f'the workspace "{self.workspace}" changed; try again')
            if state is not None and state[0] == pid:
                os.close(state[1])  # ours, in this process; an inherited fd is left alone
            self._state = (pid, fd, ident)
            return fd

    def close(self) -> None:
        """Close this process's workspace handle (reopened lazily if used again)."""
        with self._lock:
            state, self._state = self._state, None
        if state is not None and state[0] == os.getpid():
            os.close(state[1])

    def root_path(self) -> str:
        """The workspace's real path as the kernel reports it now."""
        if self._procfd:
            return os.readlink(f"/proc/self/fd/{self._root()}")
        return os.path.realpath(self.workspace)

    # --------------------------------------------------------------- lexical layer

    def relative(self, path: str) -> str:
        """The caller's path made relative to the workspace, without resolving anything.

        Absolute paths must name the workspace or something below it (component-wise:
        ``/ws-evil`` is not inside ``/ws``). A path whose ``..`` climb above the
        workspace as written is refused here; the resolver refuses the rest (``..``
        through symlinks)."""
        if not isinstance(path, str):
            raise BuiltinError(f"path must be a string, got {type(path).__name__}")
        if "\x00" in path:
            printable = path.replace("\x00", "\\0")
            raise JailError(f'path "{printable}" contains a NUL byte; paths cannot contain NUL')
        if path == "":
            raise BuiltinError('path is empty; use "." for the workspace itself')
        rel = path if not path.startswith("/") else self._strip_base(path)
        norm = posixpath.normpath(rel) if rel else "."
        if norm == ".." or norm.startswith("../"):
            # Climbs above the workspace as written. Refused whatever the symlinks on the
            # way would make of it: predictable, and never a silent rewrite.
            raise JailError(OUTSIDE.format(path))
        return rel

    def _strip_base(self, path: str) -> str:
        for base in self._bases:
            if base == "/":
                return path.lstrip("/")
            if path == base or path.rstrip("/") == base:
                return ""
            if path.startswith(base + "/"):
                return path[len(base):].lstrip("/")
        raise JailError(OUTSIDE.format(path))

    def display(self, path: str) -> str:
        """The workspace-relative form of ``path`` returned to scripts (``.`` = root)."""
        parts = _split(posixpath.normpath(self.relative(path) or "."))
        return "/".join(parts) or "."

    # -------------------------------------------------------------------- rules

    def _rule(self, parts: Sequence[str]) -> Literal["ok", "hidden", "readonly", "sensitive"]:
        if is_sensitive(parts):
            return "sensitive"
        folded = tuple(_fold(parts))
        if any(folded[:len(h)] == h for h in self._hidden):
            return "hidden"
        if any(folded[:len(r)] == r for r in self._readonly):
            return "readonly"
        return "ok"

    def check(self, shown: str, rels: Iterable[str], *, write: bool) -> None:
        """Raise JailError if any of ``rels`` (workspace-relative) may not be accessed."""
        for rel in rels:
            rule = self._rule(_lexical_parts(rel))
            if rule == "sensitive":
                raise JailError(SENSITIVE.format(shown))
            if rule == "hidden":
                raise JailError(HIDDEN.format(shown))
            if rule == "readonly" and write:
                raise JailError(READONLY.format(shown))

    def hidden(self, rel: str) -> bool:
        """Whether enumeration (list, glob, grep) must skip ``rel``."""
        return self._rule(_split(rel)) in ("hidden", "sensitive")

    # ---------------------------------------------------------------- resolution

    def open(self, path: str, flags: int = READ_FLAGS, *, write: bool = False,
             check: bool = True) -> tuple[int, str]:
        """Open ``path`` beneath the workspace, following symlinks that stay inside.

        Returns ``(fd, resolved workspace-relative path)``. Applies the protected and
        sensitive rules to the path as written and to the path really opened."""
        rel = self.relative(path)
        if check:
            self.check(path, [rel], write=write)
        fd, real = self._open_rel(path, rel, flags)
        if check:
            try:
                self.check(path, [real], write=write)
            except BaseException:
                os.close(fd)
                raise
        return fd, real

    def _open_rel(self, shown: str, rel: str, flags: int) -> tuple[int, str]:
        root = self._root()
        if self.mode == "openat2":
            try:
                fd = _openat2(root, rel or ".", flags)
            except OSError as e:
                # EXDEV: an escape, or an absolute symlink (which might point back
                # inside); ELOOP: too many links or a magic link. The walk decides.
                if e.errno not in (errno.EXDEV, errno.ELOOP):
                    raise
            else:
                try:
                    return fd, self._fd_rel(shown, fd)
                except BaseException:
                    os.close(fd)
                    raise
        return self._walk(shown, root, rel, flags)

    def _fd_rel(self, shown: str, fd: int) -> str:
        real = os.readlink(f"/proc/self/fd/{fd}")
        base = self.root_path()
        if real == base:
            return ""
        prefix = base.rstrip("/") + "/"
        if not real.startswith(prefix):
            raise JailError(OUTSIDE.format(shown))
        return real[len(prefix):]

    def _abs_target(self, shown: str, target: str) -> list[str]:
        bases = [*self._bases, self.root_path()]
        for base in bases:
            if base == "/":
                return _split(target)
            if target == base or target.startswith(base.rstrip("/") + "/"):
                return _split(target[len(base):])
        raise JailError(OUTSIDE.format(shown))

    def _walk(self, shown: str, root: int, rel: str, flags: int) -> tuple[int, str]:
        """Portable confined resolution: one component at a time, O_NOFOLLOW."""
        todo = _split(rel)
        stack = [os.dup(root)]
        names: list[str] = []
        hops = retries = 0
        try:
            if not todo:
                fd = os.open(".", flags, dir_fd=stack[-1])
                return fd, ""
            while todo:
                comp = todo.pop(0)
                if comp == "..":
                    if not names:
                        raise JailError(OUTSIDE.format(shown))
                    os.close(stack.pop())
                    names.pop()
                    continue
                last = not todo
                fl = (flags | os.O_NOFOLLOW) if last else (_WALK_DIR_FLAGS | os.O_NOFOLLOW)
                try:
                    fd = os.open(comp, fl, 0o666, dir_fd=stack[-1])
                    if fl & _O_PATH and _O_PATH and st.S_ISLNK(os.fstat(fd).st_mode):
                        os.close(fd)
                        raise OSError(errno.ELOOP, "symlink")
                except OSError as e:
                    if e.errno == errno.ENOENT:
                        raise
                    hops += 1
                    if hops > MAX_SYMLINK_HOPS:
                        raise BuiltinError(f'path "{shown}" has too many levels of '
                                           "symbolic links") from None
                    try:
                        target = os.readlink(comp, dir_fd=stack[-1])
                    except OSError as again:
                        if (again.errno in (errno.EINVAL, errno.ENOENT)
                                and e.errno in _LINK_ERRNOS and retries < 3):
                            retries += 1  # was a link, is not any more: look again
                            todo.insert(0, comp)
                            continue
                        raise e from None
                    if target.startswith("/"):
                        while len(stack) > 1:
                            os.close(stack.pop())
                        names.clear()
                        todo = self._abs_target(shown, target) + todo
                    else:
                        todo = _split(target) + todo
                    continue
                if last:
                    return fd, "/".join([*names, comp])
                stack.append(fd)
                names.append(comp)
            # ended on "..", or on a link to "." or to the root: open where we are
            fd = os.open(".", flags, dir_fd=stack[-1])
            return fd, "/".join(names)
        finally:
            for fd in stack:
                os.close(fd)

    def locate(self, path: str, *, follow: bool = True, create: bool = False,
               write: bool = False) -> Located:
        """Resolve the parent of ``path`` to a directory handle (creating missing
        parents if ``create``), following a final symlink that stays inside if
        ``follow``. Checks the rules on every candidate path."""
        shown = path
        rel = self.relative(path)
        self.check(shown, [rel], write=write)
        for _ in range(MAX_SYMLINK_HOPS + 1):
            head, _sep, name = rel.rstrip("/").rpartition("/")
            if name in ("", ".", ".."):
                fd, real = self._open_rel(shown, rel, DIR_FLAGS)
                if real == "":
                    self.check(shown, [real], write=write)
                    return Located(fd, "", "", shown)
                os.close(fd)
                rel = real
                continue
            dfd, dreal = self._dir(shown, head, create=create, write=write)
            full = f"{dreal}/{name}" if dreal else name
            try:
                self.check(shown, [full], write=write)
                if not follow:
                    return Located(dfd, name, full, shown)
                try:
                    target = os.readlink(name, dir_fd=dfd)
                except OSError as e:
                    if e.errno in (errno.EINVAL, errno.ENOENT):
                        return Located(dfd, name, full, shown)
                    raise
            except BaseException:
                os.close(dfd)
                raise
            os.close(dfd)
            if target.startswith("/"):
                rel = "/".join(self._abs_target(shown, target))
            else:
                rel = f"{dreal}/{target}" if dreal else target
            self.check(shown, [rel], write=write)
        raise BuiltinError(f'path "{shown}" has too many levels of symbolic links')

    def _dir(self, shown: str, rel: str, *, create: bool, write: bool) -> tuple[int, str]:
        """A readable handle of directory ``rel`` (resolved), created if asked."""
        try:
            return self._open_rel(shown, rel, DIR_FLAGS)
        except FileNotFoundError:
            if not create or not _split(rel):
                raise
        with self.locate(rel, create=True, write=True) as loc:
            self.check(shown, [loc.rel], write=True)
            try:
                os.mkdir(loc.name, 0o777, dir_fd=loc.dir_fd)
            except FileExistsError:
                pass
        return self._open_rel(shown, rel, DIR_FLAGS)
