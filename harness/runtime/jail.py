"""The workspace jail (docs/spec.md §8.1–8.3): race-free path resolution beneath the workspace.

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

Protection applies to the object, not to its spelling: when a protected entry
(``.harness``, ``.git``, ``harness.md``, an ``fs.protected`` path) is itself a symlink or
lies below one, the place it leads to inside the workspace gets the same rule, and the
symlinks on the way become read-only (so no tool can re-point the entry). These
targets are traced once and cached; the cache is revalidated on every open by the
change times of the directories the trace looked in (the workspace root's comes free
with the handle check) and trusted only once those directories have been still for
:data:`SETTLED_NS`, so a change in the same timestamp tick is never missed.
"""

from __future__ import annotations

import ctypes
import errno
import fnmatch
import functools
import os
import platform
import posixpath
import re
import stat as st
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

from harness.errors import BuiltinError, JailError
from harness.protected import ALWAYS_PROTECTED, HARNESS_DIR

if TYPE_CHECKING:
    from harness.config import Config

__all__ = [
    "ALWAYS_HIDDEN",
    "ALWAYS_READONLY",
    "Jail",
    "Located",
    "ProtectedTarget",
    "SensitivePatterns",
    "clear_jails",
    "get_jail",
    "is_sensitive",
    "sensitive_patterns",
]

ALWAYS_HIDDEN = (HARNESS_DIR,)
ALWAYS_READONLY = tuple(p for p in ALWAYS_PROTECTED if p not in ALWAYS_HIDDEN)
MAX_SYMLINK_HOPS = 40
# A directory changed less than this long ago may change again within the same
# timestamp tick (coarse kernel clocks; 1-2 s on FAT, HFS+, some NFS): protected
# targets traced from it are recomputed on every open until it has settled.
SETTLED_NS = 2_000_000_000

# docs/spec.md §8.3, exact list. Name patterns match the last component, anywhere in the tree.
SENSITIVE_NAMES = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_ed25519*",
    "id_ecdsa*",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    "credentials.json",
)
_SENSITIVE_NAME = re.compile(
    "|".join(f"(?:{fnmatch.translate(p)})" for p in SENSITIVE_NAMES), re.DOTALL
)
# Any component equal to one of these: the directory itself and everything under it.
SENSITIVE_DIRS = (".ssh", ".aws", ".gnupg", ".kube")
# Consecutive components anywhere (a prefix match of the sequence: the path or under it).
SENSITIVE_SEQUENCES = ((".docker", "config.json"), (".config", "gcloud"))


class SensitivePatterns(NamedTuple):
    """docs/spec.md §8.3 as data: ``names`` (globs on the last component), ``dirs`` (any
    component, the directory and everything under it), ``sequences`` (consecutive
    components anywhere, and everything under them). Matching ignores case."""

    names: tuple[str, ...]
    dirs: tuple[str, ...]
    sequences: tuple[tuple[str, ...], ...]


def sensitive_patterns() -> SensitivePatterns:
    """The sensitive-file patterns :func:`is_sensitive` applies (e.g. for a sandbox)."""
    return SensitivePatterns(SENSITIVE_NAMES, SENSITIVE_DIRS, SENSITIVE_SEQUENCES)


class ProtectedTarget(NamedTuple):
    """A workspace-relative path the jail protects (see :meth:`Jail.protected_targets`).

    ``kind``: ``"hidden"`` (not readable or writable), ``"readonly"`` (the path and
    everything under it), or ``"link"`` (a symlink leading to a protected entry: the
    link itself is read-only, what it leads to has its own entry)."""

    path: str
    kind: Literal["hidden", "readonly", "link"]


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
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_syscall = None
if _SYS_OPENAT2 is not None and platform.system() == "Linux":
    try:
        _libc = ctypes.CDLL(None, use_errno=True)
        _syscall = _libc.syscall
        _syscall.restype = ctypes.c_long
        _syscall.argtypes = [
            ctypes.c_long,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
        ]
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
        if any(tuple(folded[i : i + n]) == seq for i in range(len(folded))):
            return True
    return False


_SEQUENCE_ENDS = frozenset(seq[-1] for seq in SENSITIVE_SEQUENCES)


@functools.lru_cache(maxsize=8192)
def _name_rule(name: str) -> tuple[str, bool, bool]:
    """(folded name, sensitive by name alone, ends a sensitive sequence)."""
    low = name.casefold()
    return (low, bool(_SENSITIVE_NAME.match(low)) or low in SENSITIVE_DIRS, low in _SEQUENCE_ENDS)


def _split(rel: str) -> list[str]:
    return [p for p in rel.split("/") if p not in ("", ".")]


def _collapse(parts: Iterable[str]) -> list[str] | None:
    """``parts`` with ``..`` applied lexically; None if they climb above the start."""
    out: list[str] = []
    for p in parts:
        if p == "..":
            if not out:
                return None
            out.pop()
        elif p not in ("", "."):
            out.append(p)
    return out


def _climbs(rel: str) -> bool:
    norm = posixpath.normpath(rel) if rel else "."
    return norm == ".." or norm.startswith("../")


_Sig = tuple[int, int, int] | None  # (inode, mtime_ns, ctime_ns) of a directory


class _Rules:
    """The protected rules in force: prefixes (folded components) that are hidden or
    read-only, exact paths of symlinks leading to a protected entry, and what
    validates them (see :meth:`Jail._refresh`)."""

    __slots__ = ("dirs", "extra", "hidden", "links", "readonly", "root_sig", "trusted")

    def __init__(
        self,
        hidden: tuple[tuple[str, ...], ...],
        readonly: tuple[tuple[str, ...], ...],
        links: frozenset[tuple[str, ...]],
        extra: tuple[ProtectedTarget, ...],
        root_sig: _Sig,
        dirs: tuple[tuple[str, _Sig], ...],
        trusted: bool,
    ) -> None:
        self.hidden, self.readonly, self.links, self.extra = hidden, readonly, links, extra
        self.root_sig, self.dirs, self.trusted = root_sig, dirs, trusted


def _sig(info: os.stat_result) -> tuple[int, int, int]:
    return info.st_ino, info.st_mtime_ns, info.st_ctime_ns


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

    ``protected``: workspace-relative paths (the docs/spec.md §8.2 ones are always added);
    ``.harness`` is hidden (neither readable nor writable), every other entry
    read-only. Entries are anchored at the workspace root and matched
    case-insensitively on the *resolved* path and on the path as written.

    ``use_openat2``: ``None`` = use it when the kernel has it; ``False`` forces the
    portable walk (tests run every vector both ways).
    """

    def __init__(
        self, workspace: Path, protected: tuple[str, ...] = (), *, use_openat2: bool | None = None
    ) -> None:
        self.workspace = str(workspace)
        if not os.path.isabs(self.workspace):
            raise ValueError(f"workspace must be an absolute path, got {self.workspace!r}")
        self._bases = tuple(
            dict.fromkeys([os.path.normpath(self.workspace), os.path.realpath(self.workspace)])
        )
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
        self._entries: tuple[tuple[tuple[str, ...], Literal["hidden", "readonly"]], ...] = (
            *((tuple(_split(h)), "hidden") for h in hidden),
            *((tuple(_split(r)), "readonly") for r in readonly),
        )
        self._base_parts = tuple(tuple(_split(b)) for b in self._bases)
        self._rules: _Rules | None = None
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
    def get(
        cls, workspace: Path, protected: tuple[str, ...] = (), *, use_openat2: bool | None = None
    ) -> Jail:
        """One Jail (and one directory handle) per (workspace, protected) per process."""
        key = (str(workspace), tuple(protected), use_openat2)
        jail = _REGISTRY.get(key)
        if jail is None:
            with _REGISTRY_LOCK:
                jail = _REGISTRY.get(key)
                if jail is None:
                    jail = _REGISTRY[key] = cls(
                        workspace, tuple(protected), use_openat2=use_openat2
                    )
        return jail

    # ----------------------------------------------------------------- root handle

    def _root(self) -> int:
        """The workspace handle, reopened lazily after fork or if the directory changed."""
        return self._root_stat()[0]

    def _root_stat(self) -> tuple[int, os.stat_result]:
        """The workspace handle and the workspace directory's stat taken to check it."""
        try:
            now = os.stat(self.workspace)
        except OSError as e:
            raise BuiltinError(
                f'the workspace "{self.workspace}" is not accessible: {e.strerror}'
            ) from None
        ident = (now.st_dev, now.st_ino)
        state = self._state
        pid = os.getpid()
        if state is not None and state[0] == pid and state[2] == ident:
            return state[1], now
        with self._lock:
            state = self._state
            if state is not None and state[0] == pid and state[2] == ident:
                return state[1], now
            fd = os.open(self.workspace, _WALK_DIR_FLAGS)
            got = os.fstat(fd)
            if (got.st_dev, got.st_ino) != ident:  # replaced between stat and open: retry
                os.close(fd)
                raise BuiltinError(f'the workspace "{self.workspace}" changed; try again')
            if state is not None and state[0] == pid:
                os.close(state[1])  # ours, in this process; an inherited fd is left alone
            self._state = (pid, fd, ident)
            return fd, now

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
        ``/ws-evil`` is not inside ``/ws``); one whose ``..`` leave the workspace and
        come back (``/ws/../ws/x``) is accepted when its lexical normalisation is
        inside. A relative path whose ``..`` climb above the workspace as written is
        refused here; the resolver refuses the rest (``..`` through symlinks)."""
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

    def _strip_base(self, path: str) -> str:  # noqa: C901
        for base in self._bases:
            if base == "/":
                rest = path.lstrip("/")
            elif path == base or path.rstrip("/") == base:
                return ""
            elif path.startswith(base + "/"):
                rest = path[len(base) :].lstrip("/")
            else:
                continue
            if not _climbs(rest):
                return rest
        # Leaves the workspace and maybe comes back ("/ws/../ws/x"): normalise the part
        # up to the first point where it names the workspace, lexically (the directories
        # above the workspace are not the jail's to resolve); keep the rest as written
        # for the resolver, so symlinks inside are resolved as everywhere else.
        comps = path.split("/")
        stack: list[str] = []
        found: str | None = None
        for i in range(len(comps) + 1):
            if i:
                comp = comps[i - 1]
                if comp in ("", "."):
                    continue
                if comp == "..":
                    if stack:
                        stack.pop()
                else:
                    stack.append(comp)
            if tuple(stack) in self._base_parts:
                rest = "/".join(comps[i:]).lstrip("/")
                if not _climbs(rest):
                    found = rest
                    break
        if found is None:
            raise JailError(OUTSIDE.format(path))
        return found

    def display(self, path: str) -> str:
        """The workspace-relative form of ``path`` returned to scripts (``.`` = root)."""
        parts = _split(posixpath.normpath(self.relative(path) or "."))
        return "/".join(parts) or "."

    # -------------------------------------------------------------------- rules

    def _rule(
        self, parts: Sequence[str], rules: _Rules
    ) -> Literal["ok", "hidden", "readonly", "sensitive"]:
        if is_sensitive(parts):
            return "sensitive"
        folded = tuple(_fold(parts))
        if any(folded[: len(h)] == h for h in rules.hidden):
            return "hidden"
        if any(folded[: len(r)] == r for r in rules.readonly) or folded in rules.links:
            return "readonly"
        return "ok"

    def _current(self) -> _Rules:
        rules = self._rules
        if rules is None:
            root, info = self._root_stat()
            rules = self._refresh(root, info)
        return rules

    def check(self, shown: str, rels: Iterable[str], *, write: bool) -> None:
        """Raise JailError if any of ``rels`` (workspace-relative) may not be accessed."""
        rules = self._current()
        for rel in rels:
            rule = self._rule(_lexical_parts(rel), rules)
            if rule == "sensitive":
                raise JailError(SENSITIVE.format(shown))
            if rule == "hidden":
                raise JailError(HIDDEN.format(shown))
            if rule == "readonly" and write:
                raise JailError(READONLY.format(shown))

    def hidden(self, rel: str) -> bool:
        """Whether enumeration (list, glob, grep) must skip ``rel``."""
        return self._rule(_split(rel), self._current()) in ("hidden", "sensitive")

    def refresh(self) -> None:
        """Revalidate the protected rules now (a walk does it per directory, as an
        open does, so a protected entry re-pointed meanwhile is seen)."""
        root, info = self._root_stat()
        self._refresh(root, info)

    def hidden_entry(self, parent: tuple[str, ...], name: str) -> bool:
        """:meth:`hidden` for ``name`` inside a directory whose folded components are
        ``parent`` and which is itself not hidden (the walk checked it on the way
        down): only the rules that can start applying at ``name`` are tested."""
        low, sensitive, last = _name_rule(name)
        if sensitive:
            return True
        if last:
            for seq in SENSITIVE_SEQUENCES:
                if low == seq[-1] and parent[len(parent) - len(seq) + 1 :] == seq[:-1]:
                    return True
        depth = len(parent) + 1
        for h in self._current().hidden:  # a loop: no generator per entry (hot in walks)
            if len(h) == depth and h[-1] == low and h[:-1] == parent:
                return True
        return False

    def protected_targets(self) -> tuple[ProtectedTarget, ...]:
        """Every workspace-relative path protected now: the entries as configured, the
        places inside the workspace they lead to when they are (or lie below)
        symlinks, and the symlinks on the way (``kind="link"``). Traced as of now."""
        root, info = self._root_stat()
        extra = self._refresh(root, info).extra
        return (*(ProtectedTarget("/".join(p), k) for p, k in self._entries), *extra)

    # ------------------------------------------------------ protected targets

    def _refresh(self, root: int, root_info: os.stat_result) -> _Rules:
        """The protected rules, re-traced unless the cached ones are still valid.

        Valid: traced from directories that had settled (unchanged for SETTLED_NS)
        and whose (inode, mtime, ctime) are unchanged. A change after a trace moves
        a settled directory's ctime (which no tool can set back), so it is seen."""
        rules = self._rules
        if (
            rules is not None
            and rules.trusted
            and rules.root_sig == _sig(root_info)
            and (not rules.dirs or all(self._dir_sig(root, d) == sig for d, sig in rules.dirs))
        ):
            return rules
        rules = self._trace_all(root, root_info)
        self._rules = rules
        return rules

    @staticmethod
    def _dir_sig(root: int, rel: str) -> _Sig:
        try:
            return _sig(os.stat(rel, dir_fd=root, follow_symlinks=False))
        except OSError:
            return None

    def _trace_all(self, root: int, root_info: os.stat_result) -> _Rules:
        """Trace every entry. ``root_info`` is the root's stat taken just before."""
        started = time.time_ns()
        hidden, readonly = self._hidden, self._readonly
        links: set[tuple[str, ...]] = set()
        dirs: set[str] = set()
        extra: list[ProtectedTarget] = []
        for parts, kind in self._entries:
            if len(parts) == 1:  # the common case: a plain name in the root, one lstat
                try:
                    mode = os.lstat(parts[0], dir_fd=root).st_mode
                except OSError:
                    continue
                if not st.S_ISLNK(mode) and not (st.S_ISREG(mode) and parts == (".git",)):
                    continue
            real, hops = self._trace(root, parts, dirs)
            reals = [real]
            if real is not None and parts == (".git",):
                gitdir, more = self._gitdir(root, real, dirs)
                reals.append(gitdir)
                hops += more
            for link in hops:
                if tuple(_fold(link)) not in links:
                    links.add(tuple(_fold(link)))
                    extra.append(ProtectedTarget("/".join(link), "link"))
            for got in reals:
                if got is None:
                    continue
                key = tuple(_fold(got))
                if kind == "hidden" and key not in hidden:
                    hidden += (key,)
                elif kind == "readonly" and key not in readonly:
                    readonly += (key,)
                else:
                    continue
                extra.append(ProtectedTarget("/".join(got), kind))
        sigs = tuple((d, self._dir_sig(root, d)) for d in sorted(dirs))
        trusted = started - root_info.st_ctime_ns > SETTLED_NS and all(
            sig is not None and started - sig[2] > SETTLED_NS for _d, sig in sigs
        )
        return _Rules(
            hidden, readonly, frozenset(links), tuple(extra), _sig(root_info), sigs, trusted
        )

    def _gitdir(
        self, root: int, real: list[str], dirs: set[str]
    ) -> tuple[list[str] | None, list[list[str]]]:
        """Where a ``.git`` *file* (``gitdir: <path>``, as ``git init
        --separate-git-dir``, worktrees and submodules write) points, traced."""
        rel = "/".join(real)
        try:
            fd = os.open(rel, READ_FLAGS | os.O_NOFOLLOW, dir_fd=root)
        except OSError:
            return None, []
        try:
            if not st.S_ISREG(os.fstat(fd).st_mode):
                return None, []
            head = os.read(fd, 4096).decode("utf-8", "replace")
        finally:
            os.close(fd)
        dirs.add(rel)  # its content decides: revalidated by its own (inode, mtime, ctime)
        line = head.split("\n", 1)[0].strip()
        if not line.startswith("gitdir:"):
            return None, []
        target = line[len("gitdir:") :].strip()
        if not target:
            return None, []
        if target.startswith("/"):
            try:
                parts = self._abs_target(rel, target)
            except JailError:
                return None, []  # outside: everything there is refused anyway
        else:
            parts = [*real[:-1], *_split(target)]
        return self._trace(root, parts, dirs)

    def _trace(
        self, root: int, entry: Sequence[str], dirs: set[str]
    ) -> tuple[list[str] | None, list[list[str]]]:
        """Where a protected entry leads: its real workspace-relative components (the
        part that does not exist yet taken as written), or None if it leads outside
        or loops; the symlinks on the way. Adds the directories looked in to ``dirs``.

        This computes policy, not access: nothing is opened, and an entry re-pointed
        meanwhile is caught by the directory signatures on the next open."""
        todo, names = list(entry), list[str]()
        links: list[list[str]] = []
        while todo:
            comp = todo.pop(0)
            if comp == "..":
                if not names:
                    return None, links
                names.pop()
                continue
            where = "/".join(names)
            if where:
                dirs.add(where)
            rel = f"{where}/{comp}" if where else comp
            try:
                info = os.lstat(rel, dir_fd=root)
                if not st.S_ISLNK(info.st_mode):
                    names.append(comp)
                    continue
                target = os.readlink(rel, dir_fd=root)
            except OSError:  # missing (or not a directory): the rest as it would be made
                return _collapse([*names, comp, *todo]), links
            links.append([*names, comp])
            if len(links) > MAX_SYMLINK_HOPS:
                return None, links
            if target.startswith("/"):
                try:
                    todo = self._abs_target(rel, target) + todo
                except JailError:
                    return None, links
                names = []
            else:
                todo = _split(target) + todo
        return names, links

    # ---------------------------------------------------------------- resolution

    def open(
        self, path: str, flags: int = READ_FLAGS, *, write: bool = False, check: bool = True
    ) -> tuple[int, str]:
        """Open ``path`` beneath the workspace, following symlinks that stay inside.

        Returns ``(fd, resolved workspace-relative path)``. Applies the protected and
        sensitive rules to the path as written and to the path really opened."""
        rel = self.relative(path)
        root, info = self._root_stat()
        if check:
            self._refresh(root, info)
            self.check(path, [rel], write=write)
        fd, real = self._open_rel(path, rel, flags, root)
        if check:
            try:
                self.check(path, [real], write=write)
            except BaseException:
                os.close(fd)
                raise
        return fd, real

    def _open_rel(
        self, shown: str, rel: str, flags: int, root: int | None = None
    ) -> tuple[int, str]:
        if root is None:
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
        return real[len(prefix) :]

    def _abs_target(self, shown: str, target: str) -> list[str]:
        bases = [*self._bases, self.root_path()]
        for base in bases:
            if base == "/":
                return _split(target)
            if target == base or target.startswith(base.rstrip("/") + "/"):
                return _split(target[len(base) :])
        raise JailError(OUTSIDE.format(shown))

    def _walk(self, shown: str, root: int, rel: str, flags: int) -> tuple[int, str]:  # noqa: C901
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
                        raise BuiltinError(
                            f'path "{shown}" has too many levels of symbolic links'
                        ) from None
                    try:
                        target = os.readlink(comp, dir_fd=stack[-1])
                    except OSError as again:
                        if (
                            again.errno in (errno.EINVAL, errno.ENOENT)
                            and e.errno in _LINK_ERRNOS
                            and retries < 3
                        ):
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

    def locate(
        self, path: str, *, follow: bool = True, create: bool = False, write: bool = False
    ) -> Located:
        """Resolve the parent of ``path`` to a directory handle (creating missing
        parents if ``create``), following a final symlink that stays inside if
        ``follow``. Checks the rules on every candidate path."""
        shown = path
        rel = self.relative(path)
        root, info = self._root_stat()
        self._refresh(root, info)
        self.check(shown, [rel], write=write)
        for _ in range(MAX_SYMLINK_HOPS + 1):
            head, _sep, name = rel.rstrip("/").rpartition("/")
            if name in ("", ".", ".."):
                fd, real = self._open_rel(shown, rel, DIR_FLAGS, root)
                if real == "":
                    self.check(shown, [real], write=write)
                    return Located(fd, "", "", shown)
                os.close(fd)
                rel = real
                continue
            dfd, dreal = self._dir(shown, head, root, create=create, write=write)
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

    def _dir(
        self, shown: str, rel: str, root: int, *, create: bool, write: bool
    ) -> tuple[int, str]:
        """A readable handle of directory ``rel`` (resolved), created if asked."""
        try:
            return self._open_rel(shown, rel, DIR_FLAGS, root)
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
