"""``fs.*`` built-ins (docs/spec.md §7): jailed file access for scripts.

Every path goes through :mod:`harness.runtime.jail`. Paths returned are
workspace-relative with ``/`` separators (``"."`` for the workspace itself).

Writes are atomic: the new content goes to an unnamed (``O_TMPFILE``) or hidden
temporary file in the target's directory, is fsync'ed and then renamed over the
target, so readers see the old or the new file, never a mix, and a failed call leaves
nothing behind. ``fs.write``, ``fs.append`` and ``fs.edit`` hold an exclusive
``flock`` on the target's directory across their read-modify-write: the lock is
per open file description, so it excludes other threads and other processes (the
worker pool) alike, and it dies with a killed worker.

Sizes: one file read, written or edited is at most ``limits.memory_mb / 16`` MiB
(32 MiB by default). ``fs.read`` refuses a larger file unless ``max_bytes`` asks for
its beginning.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import fcntl
import functools
import inspect
import os
import secrets
import stat as st
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, TypeVar

import re2

from harness.errors import BuiltinError, JailError
from harness.runtime import jail as _j
from harness.runtime.builtins import _search as _s
from harness.runtime.builtins._edit import apply_edit
from harness.runtime.context import CallContext

# None: openat2 when available. Tests set False to run the portable walk.
USE_OPENAT2: bool | None = None
MAX_GLOB_RESULTS = 10000
MAX_GREP_MATCHES = 10000
MAX_GREP_LINE_CHARS = 1000
BINARY_SNIFF_BYTES = 8192
LOCK_WAIT_S = 60.0  # when the call has no deadline
_TMP_PREFIX = ".harness-tmp-"
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False

F = TypeVar("F", bound=Callable[..., Any])


def _jail(ctx: CallContext) -> _j.Jail:
    return _j.get_jail(ctx.config, use_openat2=USE_OPENAT2)


def _cap(ctx: CallContext) -> int:
    return max(1, ctx.config.limits.memory_mb) * 1024 * 1024 // 16


# --------------------------------------------------------------------- arguments


def _str(name: str, arg: str, value: Any) -> str:
    if not isinstance(value, str):
        raise BuiltinError(f"{name}: {arg} must be a string, got {type(value).__name__}")
    return value


def _int(name: str, arg: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BuiltinError(f"{name}: {arg} must be an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise BuiltinError(f"{name}: {arg} must be between {lo} and {hi}, got {value}")
    return value


def _encode(name: str, content: str, cap: int) -> bytes:
    data = content.encode("utf-8", "surrogateescape")
    if len(data) > cap:
        raise BuiltinError(
            f"{name}: content is {len(data)} bytes, more than the limit of {cap} bytes per file"
        )
    return data


def _os_message(name: str, shown: str, e: OSError) -> str:
    code = e.errno
    if code == errno.ENOENT:
        return f'{name}: path "{shown}" does not exist'
    if code == errno.ENOTDIR:
        return f'{name}: a parent of "{shown}" is not a directory'
    if code == errno.EISDIR:
        return f'{name}: path "{shown}" is a directory'
    if code == errno.EEXIST:
        return f'{name}: path "{shown}" already exists'
    if code in (errno.EACCES, errno.EPERM):
        return f'{name}: permission denied for "{shown}"'
    if code == errno.ELOOP:
        return f'{name}: path "{shown}" has too many levels of symbolic links'
    if code == errno.ENAMETOOLONG:
        return f'{name}: path "{shown}" is too long'
    if code == errno.ENOTEMPTY:
        return f'{name}: directory "{shown}" is not empty'
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f'{name}: no space left to write "{shown}"'
    return f'{name}: cannot access "{shown}": {e.strerror or e}'


def _builtin(name: str) -> Callable[[F], F]:
    """Name errors after the built-in: bad call shapes and OS errors become
    BuiltinError with a message naming the function and the path."""

    def deco(fn: F) -> F:
        params = list(inspect.signature(fn).parameters)[1:]
        where = "path" if "path" in params else None

        @functools.wraps(fn)
        def wrapper(ctx: CallContext, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(ctx, *args, **kwargs)
            except TypeError as e:
                if e.__traceback__ is not None and e.__traceback__.tb_next is None:
                    msg = str(e).split("() ", 1)[-1]  # "read() got an unexpected ..."
                    raise BuiltinError(f"{name}: {msg}") from None
                raise
            except OSError as e:
                shown: Any = kwargs.get(where or "", ".")
                if where and params.index(where) < len(args):
                    shown = args[params.index(where)]
                raise BuiltinError(_os_message(name, str(shown), e)) from None

        return wrapper  # type: ignore[return-value]

    return deco


def _deadline(ctx: CallContext, name: str) -> None:
    if ctx.deadline is not None and time.monotonic() > ctx.deadline:
        raise BuiltinError(f"{name}: the call ran out of time")


# ------------------------------------------------------------------- primitives


def _read_fd(fd: int, limit: int) -> bytes:
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _regular(name: str, shown: str, fd: int) -> os.stat_result:
    info = os.fstat(fd)
    if st.S_ISDIR(info.st_mode):
        raise BuiltinError(
            f'{name}: path "{shown}" is a directory; use fs.list to see what it contains'
        )
    if not st.S_ISREG(info.st_mode):
        raise BuiltinError(f'{name}: path "{shown}" is not a regular file')
    return info


@contextlib.contextmanager
def _exclusive(ctx: CallContext, name: str, loc: _j.Located) -> Iterator[None]:
    """flock(LOCK_EX) on the directory handle, waiting until the call's deadline."""
    limit = ctx.deadline if ctx.deadline is not None else time.monotonic() + LOCK_WAIT_S
    delay = 0.0002
    while True:
        try:
            fcntl.flock(loc.dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > limit:
                raise BuiltinError(
                    f'{name}: timed out waiting for another call writing "{loc.shown}"'
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.005)
    try:
        yield
    finally:
        fcntl.flock(loc.dir_fd, fcntl.LOCK_UN)


def _read_locked(name: str, loc: _j.Located, cap: int) -> bytes | None:
    """Current content of ``loc`` (None if absent); refuses symlinks swapped in."""
    try:
        fd = os.open(loc.name, _j.READ_FLAGS | os.O_NOFOLLOW, dir_fd=loc.dir_fd)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BuiltinError(
                f'{name}: path "{loc.shown}" changed while being written; try again'
            ) from None
        raise
    try:
        info = _regular(name, loc.shown, fd)
        if info.st_size > cap:
            raise BuiltinError(
                f'{name}: file "{loc.shown}" is {info.st_size} bytes, more '
                f"than the limit of {cap} bytes per file"
            )
        return _read_fd(fd, cap + 1)
    finally:
        os.close(fd)


def _tmpfile(dfd: int) -> tuple[int, str | None]:
    """An unnamed file in ``dfd`` if the filesystem can, else a hidden named one."""
    if hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd"):
        try:
            return os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o666, dir_fd=dfd), None
        except OSError as e:
            if os.fstat(dfd).st_nlink == 0:  # the directory was removed meanwhile
                raise FileNotFoundError(errno.ENOENT, "directory removed") from None
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
                raise
    tmp = _TMP_PREFIX + secrets.token_hex(8)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(tmp, flags, 0o666, dir_fd=dfd), tmp


def _replace(name: str, loc: _j.Located, data: bytes) -> None:
    """Atomically make ``loc`` hold ``data`` (temp file, fsync, rename)."""
    if not loc.name:
        raise BuiltinError(f'{name}: path "{loc.shown}" is the workspace directory')
    dfd = loc.dir_fd
    try:
        old = os.stat(loc.name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and st.S_ISDIR(old.st_mode):
        raise BuiltinError(f'{name}: path "{loc.shown}" is a directory')
    fd, tmp = _tmpfile(dfd)
    try:
        _write_all(fd, data)
        if old is not None and st.S_ISREG(old.st_mode):
            os.fchmod(fd, st.S_IMODE(old.st_mode) & 0o777)
        os.fsync(fd)
        if tmp is None:  # give the unnamed file a name only now that it is complete
            tmp = _TMP_PREFIX + secrets.token_hex(8)
            os.link(f"/proc/self/fd/{fd}", tmp, dst_dir_fd=dfd, follow_symlinks=True)
        os.rename(tmp, loc.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        tmp = None
    finally:
        os.close(fd)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
    with contextlib.suppress(OSError):
        os.fsync(dfd)


def _result(jail: _j.Jail, path: str, **extra: Any) -> dict[str, Any]:
    return {"path": jail.display(path), **extra}


# -------------------------------------------------------------------- functions


@_builtin("fs.read")
def read(ctx: CallContext, path: Any, max_bytes: Any = None) -> str:
    path = _str("fs.read", "path", path)
    cap = _cap(ctx)
    if max_bytes is not None:
        max_bytes = _int("fs.read", "max_bytes", max_bytes, 0, cap)
    fd, _real = _jail(ctx).open(path, _j.READ_FLAGS)
    try:
        info = _regular("fs.read", path, fd)
        if max_bytes is None and info.st_size > cap:
            raise BuiltinError(
                f'fs.read: file "{path}" is {info.st_size} bytes, more than '
                f"the limit of {cap}; pass max_bytes to read its beginning"
            )
        data = _read_fd(fd, cap + 1 if max_bytes is None else max_bytes)
    finally:
        os.close(fd)
    if max_bytes is None and len(data) > cap:
        raise BuiltinError(
            f'fs.read: file "{path}" is more than {cap} bytes; pass max_bytes to read its beginning'
        )
    if max_bytes is not None and len(data) == max_bytes:
        # possibly cut inside a character: drop the incomplete tail, do not show U+FFFD
        return codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=False)
    return data.decode("utf-8", "replace")


@_builtin("fs.write")
def write(ctx: CallContext, path: Any, content: Any) -> dict[str, Any]:
    path = _str("fs.write", "path", path)
    data = _encode("fs.write", _str("fs.write", "content", content), _cap(ctx))
    jail = _jail(ctx)
    with jail.locate(path, create=True, write=True) as loc, _exclusive(ctx, "fs.write", loc):
        _replace("fs.write", loc, data)
    return _result(jail, path, bytes=len(data))


@_builtin("fs.append")
def append(ctx: CallContext, path: Any, content: Any) -> dict[str, Any]:
    path = _str("fs.append", "path", path)
    cap = _cap(ctx)
    data = _encode("fs.append", _str("fs.append", "content", content), cap)
    jail = _jail(ctx)
    with jail.locate(path, create=True, write=True) as loc, _exclusive(ctx, "fs.append", loc):
        old = _read_locked("fs.append", loc, cap) or b""
        if len(old) + len(data) > cap:
            raise BuiltinError(
                f'fs.append: "{path}" would grow to {len(old) + len(data)} '
                f"bytes, more than the limit of {cap} bytes per file"
            )
        _replace("fs.append", loc, old + data)
    return _result(jail, path, bytes=len(data))


@_builtin("fs.edit")
def edit(ctx: CallContext, path: Any, old: Any, new: Any) -> dict[str, Any]:
    path = _str("fs.edit", "path", path)
    old = _str("fs.edit", "old", old)
    new = _str("fs.edit", "new", new)
    if old == "":
        raise BuiltinError("fs.edit: old must not be empty; use fs.write to create a file")
    if old == new:
        raise BuiltinError("fs.edit: old and new are the same; nothing to change")
    cap = _cap(ctx)
    jail = _jail(ctx)
    with jail.locate(path, write=True) as loc, _exclusive(ctx, "fs.edit", loc):
        raw = _read_locked("fs.edit", loc, cap)
        if raw is None:
            raise BuiltinError(f'fs.edit: path "{path}" does not exist')
        text = raw.decode("utf-8", "surrogateescape")
        updated, strategy = apply_edit(path, text, old, new)
        _replace("fs.edit", loc, _encode("fs.edit", updated, cap))
    return _result(jail, path, strategy=strategy)


@_builtin("fs.exists")
def exists(ctx: CallContext, path: Any) -> bool:
    path = _str("fs.exists", "path", path)
    try:
        loc = _jail(ctx).locate(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    with loc:
        if not loc.name:
            return True
        try:
            os.stat(loc.name, dir_fd=loc.dir_fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True


@_builtin("fs.stat")
def stat(ctx: CallContext, path: Any) -> dict[str, Any]:
    path = _str("fs.stat", "path", path)
    jail = _jail(ctx)
    with jail.locate(path, follow=False) as loc:
        if loc.name:
            info = os.stat(loc.name, dir_fd=loc.dir_fd, follow_symlinks=False)
        else:
            info = os.fstat(loc.dir_fd)
    link = st.S_ISLNK(info.st_mode)
    if link:  # describe the target, which must itself be inside and allowed
        try:
            fd, _real = jail.open(path, _j.PROBE_FLAGS)
        except FileNotFoundError:
            pass  # dangling link inside the workspace: describe the link
        else:
            try:
                info = os.fstat(fd)
            finally:
                os.close(fd)
    shown = jail.display(path)
    return {
        "name": shown.rsplit("/", 1)[-1],
        "size": info.st_size,
        "is_dir": st.S_ISDIR(info.st_mode),
        "is_symlink": link,
        "mtime": info.st_mtime,
    }


def _entry(jail: _j.Jail, dfd: int, name: str, rel: str) -> tuple[bool, int, str] | None:
    """(is_dir, size, kind) of a directory entry, or None if it must stay unseen."""
    if jail.hidden(rel):
        return None
    try:
        info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not st.S_ISLNK(info.st_mode):
        return (
            st.S_ISDIR(info.st_mode),
            info.st_size,
            "dir"
            if st.S_ISDIR(info.st_mode)
            else ("file" if st.S_ISREG(info.st_mode) else "other"),
        )
    try:
        fd, _real = jail.open(rel, _j.PROBE_FLAGS)
    except FileNotFoundError:
        return False, info.st_size, "link"  # dangling, inside
    except (JailError, BuiltinError, OSError):
        return None  # leads outside, or to something protected
    try:
        target = os.fstat(fd)
    finally:
        os.close(fd)
    return st.S_ISDIR(target.st_mode), target.st_size, "link"


@_builtin("fs.list")
def list_(ctx: CallContext, path: Any = ".", include_ignored: Any = True) -> list[dict[str, Any]]:
    path = _str("fs.list", "path", path)
    include_ignored = _bool("fs.list", "include_ignored", include_ignored)
    jail = _jail(ctx)
    fd, real = jail.open(path, _j.DIR_FLAGS)
    out = []
    try:
        with os.scandir(fd) as it:
            names = sorted(e.name for e in it)
        ignores = None if include_ignored else _s.start_ignores(jail, real, fd, "fs.list")
        for name in names:
            rel = f"{real}/{name}" if real else name
            got = _entry(jail, fd, name, rel)
            if got is not None and not (ignores and _s.is_ignored(ignores, rel, got[2] == "dir")):
                out.append({"name": name, "is_dir": got[0], "size": got[1]})
    finally:
        os.close(fd)
    return out


# ---------------------------------------------------------------------- globbing


def _glob_parts(name: str, pattern: Any, jail: _j.Jail) -> list[str]:
    pattern = _str(name, "pattern" if name == "fs.glob" else "glob", pattern)
    if pattern == "":
        raise BuiltinError(f"{name}: the glob pattern is empty")
    rel = jail.relative(pattern)
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise JailError(_j.OUTSIDE.format(pattern))
    return parts


def _bool(name: str, arg: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise BuiltinError(f"{name}: {arg} must be a boolean, got {type(value).__name__}")
    return value


def _walk(
    ctx: CallContext,
    name: str,
    jail: _j.Jail,
    fd: int,
    real: str,
    parts: list[str],
    include_ignored: bool,
    files_only: bool = False,
    sort: bool = True,
) -> Generator[tuple[int, str, str, str], None, None]:
    """(dir_fd, name, workspace-relative path, kind) of the entries below the directory
    ``fd`` (resolved path ``real``) matching ``parts``, in path order (``sort``) or in
    the file system's; see :mod:`._search`."""
    budget = _s.RuleBudget()  # one search: its ignore files share MAX_RULES_PER_SEARCH
    ignores = None if include_ignored else _s.start_ignores(jail, real, who=name, budget=budget)
    walk = _s.Walk(
        jail,
        _s.Pattern(parts),
        ignores=ignores,
        budget=budget,
        tick=functools.partial(_deadline, ctx, name),
        files_only=files_only,
        sort=sort,
        who=name,
    )
    return walk.run(fd, real)


def _glob(
    ctx: CallContext,
    name: str,
    jail: _j.Jail,
    base: str,
    parts: list[str],
    limit: int,
    include_ignored: bool,
    details: bool = False,
) -> list[tuple[Any, ...]]:
    """Sorted (path, kind) of the matches, or (path, kind, is_dir, size) with ``details``
    (what fs.stat says: a symlink is described by its target)."""
    fd, real = jail.open(base, _j.DIR_FLAGS)
    found: list[tuple[Any, ...]] = []
    try:
        with contextlib.closing(_walk(ctx, name, jail, fd, real, parts, include_ignored)) as walk:
            for dfd, child, rel, kind in walk:
                if details:  # the walk checked the rules; a link is described by _entry
                    try:
                        info = os.stat(child, dir_fd=dfd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    got = (
                        (st.S_ISDIR(info.st_mode), info.st_size, kind)
                        if not st.S_ISLNK(info.st_mode)
                        else _entry(jail, dfd, child, rel)
                    )
                    if got is None:
                        continue
                    found.append((rel, kind, got[0], got[1]))
                else:
                    found.append((rel, kind))
                if len(found) > limit:
                    raise BuiltinError(
                        f"{name}: more than {limit} paths match; use a narrower pattern"
                    )
    finally:
        os.close(fd)
    return sorted(found)


@_builtin("fs.glob")
def glob(
    ctx: CallContext, pattern: Any, include_ignored: Any = False, details: Any = False
) -> list[Any]:
    jail = _jail(ctx)
    parts = _glob_parts("fs.glob", pattern, jail)
    include_ignored = _bool("fs.glob", "include_ignored", include_ignored)
    details = _bool("fs.glob", "details", details)
    if not parts:
        return []
    found = _glob(ctx, "fs.glob", jail, ".", parts, MAX_GLOB_RESULTS, include_ignored, details)
    if details:
        return [{"path": p, "is_dir": is_dir, "size": size} for p, _kind, is_dir, size in found]
    return [p for p, _kind in found]


@functools.lru_cache(maxsize=256)
def _compile(pattern: str) -> Any:
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise BuiltinError(
            f'fs.grep: invalid RE2 pattern "{pattern}": {reason} (RE2 has no '
            "backreferences or lookaround)"
        ) from None


@functools.lru_cache(maxsize=256)
def _scanner(pattern: str) -> _s.Scanner:
    return _s.Scanner(pattern, _compile(pattern), MAX_GREP_LINE_CHARS)


GREP_ORDERS = ("path", "walk")


def _order(value: Any) -> str:
    order = _str("fs.grep", "order", value)
    if order not in GREP_ORDERS:
        raise BuiltinError(
            f'fs.grep: order must be "path" (sorted by path, the default) or '
            f'"walk" (the file system\'s order, stops reading sooner), '
            f'got "{order}"'
        )
    return order


@_builtin("fs.grep")
def grep(
    ctx: CallContext,
    pattern: Any,
    path: Any = ".",
    glob: Any = "**/*",
    max_matches: Any = 100,
    include_ignored: Any = False,
    order: Any = "path",
) -> list[dict[str, Any]]:
    scanner = _scanner(_str("fs.grep", "pattern", pattern))
    path = _str("fs.grep", "path", path)
    limit = _int("fs.grep", "max_matches", max_matches, 1, MAX_GREP_MATCHES)
    include_ignored = _bool("fs.grep", "include_ignored", include_ignored)
    sort = _order(order) == "path"
    jail = _jail(ctx)
    parts = _glob_parts("fs.grep", glob, jail)
    fd, real = jail.open(path, _j.PROBE_FLAGS)
    try:
        is_dir = st.S_ISDIR(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    cap = _cap(ctx)
    out: list[dict[str, Any]] = []
    if not is_dir:
        try:
            fd, real = jail.open(real, _j.READ_FLAGS)
        except (JailError, OSError):
            return out
        try:
            data = _s.read_open(fd, cap)
        finally:
            os.close(fd)
        if data is not None and data.find(b"\x00", 0, BINARY_SNIFF_BYTES) < 0:
            out.extend({"path": real, "line": n, "text": t} for n, t in scanner.scan(data, limit))
        return out
    fd, real = jail.open(path, _j.DIR_FLAGS)
    try:
        with contextlib.closing(
            _walk(
                ctx,
                "fs.grep",
                jail,
                fd,
                real,
                parts or ["**", "*"],
                include_ignored,
                files_only=True,
                sort=sort,
            )
        ) as walk:
            for dfd, name, rel, _kind in walk:
                _deadline(ctx, "fs.grep")
                data = _s.read_file(dfd, name, cap)
                if data is None or data.find(b"\x00", 0, BINARY_SNIFF_BYTES) >= 0:
                    continue
                for number, text in scanner.scan(data, limit - len(out)):
                    out.append({"path": rel, "line": number, "text": text})
                if len(out) >= limit:
                    break
    finally:
        os.close(fd)
    return out


@_builtin("fs.mkdir")
def mkdir(ctx: CallContext, path: Any) -> dict[str, Any]:
    path = _str("fs.mkdir", "path", path)
    jail = _jail(ctx)
    with jail.locate(path, create=True, write=True) as loc:
        if loc.name:
            try:
                os.mkdir(loc.name, 0o777, dir_fd=loc.dir_fd)
            except FileExistsError:
                info = os.stat(loc.name, dir_fd=loc.dir_fd, follow_symlinks=False)
                if not st.S_ISDIR(info.st_mode):
                    raise BuiltinError(
                        f'fs.mkdir: path "{path}" exists and is not a directory'
                    ) from None
    return _result(jail, path)


def _walk_tree(ctx: CallContext, jail: _j.Jail, dfd: int, rel: str, delete: bool) -> None:
    """Check every entry of a tree against the jail's write rules; with ``delete``, remove
    it bottom-up. fs.remove walks once without deleting first, so a tree holding a
    protected or sensitive entry is refused before anything is gone."""
    _deadline(ctx, "fs.remove")
    for child in os.listdir(dfd):
        crel = f"{rel}/{child}"
        jail.check(crel, [crel], write=True)
        info = os.stat(child, dir_fd=dfd, follow_symlinks=False)
        if st.S_ISDIR(info.st_mode):
            cfd = os.open(child, _j.DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dfd)
            try:
                _walk_tree(ctx, jail, cfd, crel, delete)
            finally:
                os.close(cfd)
            if delete:
                os.rmdir(child, dir_fd=dfd)
        elif delete:
            os.unlink(child, dir_fd=dfd)


@_builtin("fs.remove")
def remove(ctx: CallContext, path: Any, recursive: Any = False) -> dict[str, Any]:
    path = _str("fs.remove", "path", path)
    if not isinstance(recursive, bool):
        raise BuiltinError(
            f"fs.remove: recursive must be a boolean, got {type(recursive).__name__}"
        )
    jail = _jail(ctx)
    with jail.locate(path, follow=False, write=True) as loc:
        if not loc.name:
            raise BuiltinError("fs.remove: refusing to remove the workspace itself")
        info = os.stat(loc.name, dir_fd=loc.dir_fd, follow_symlinks=False)
        if not st.S_ISDIR(info.st_mode):
            os.unlink(loc.name, dir_fd=loc.dir_fd)
            return _result(jail, path)
        if not recursive:
            raise BuiltinError(
                f'fs.remove: path "{path}" is a directory; pass '
                "recursive=True to remove it and everything in it"
            )
        dfd = os.open(loc.name, _j.DIR_FLAGS | os.O_NOFOLLOW, dir_fd=loc.dir_fd)
        try:
            _walk_tree(ctx, jail, dfd, loc.rel, delete=False)
            _walk_tree(ctx, jail, dfd, loc.rel, delete=True)
        finally:
            os.close(dfd)
        os.rmdir(loc.name, dir_fd=loc.dir_fd)
    return _result(jail, path)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "fs.read": read,
    "fs.write": write,
    "fs.append": append,
    "fs.edit": edit,
    "fs.exists": exists,
    "fs.stat": stat,
    "fs.list": list_,
    "fs.glob": glob,
    "fs.grep": grep,
    "fs.mkdir": mkdir,
    "fs.remove": remove,
}
