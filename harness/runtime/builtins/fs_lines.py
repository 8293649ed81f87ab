"""Line-level ``fs`` functions of ai-harness: ``replace``, ``replace_all``, ``read_lines``,
``insert_at``, ``replace_lines``, ``delete_lines``, ``line_count``, ``find``, ``copy``,
``move``, ``diff``.

Registered into the ``fs`` family (``fs.replace`` ...). Every path goes through the same
jail as ``fs.read``/``fs.write`` (``runtime/jail.py``): no escape, protected paths refused,
writes atomic under the directory lock. Line numbers are 1-based and inclusive.
Writing functions return ai-harness's confirmation strings (``"replaced in: a.txt"``).
"""

from __future__ import annotations

import difflib
import os
import stat as st
from collections.abc import Callable
from typing import Any

from harness.errors import BuiltinError
from harness.runtime.builtins.fs import (
    _builtin,
    _cap,
    _encode,
    _exclusive,
    _jail,
    _read_locked,
    _replace,
    _str,
    read,
)
from harness.runtime.context import CallContext

MAX_LINE = 10**9


def _line(name: str, arg: str, value: Any, lo: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BuiltinError(f"{name}: {arg} must be an integer, got {type(value).__name__}")
    if not lo <= value <= MAX_LINE:
        raise BuiltinError(f"{name}: {arg} must be >= {lo}, got {value}")
    return value


def _rewrite(ctx: CallContext, name: str, path: str, change: Callable[[str], str]) -> str:
    """Lock, read, change, write atomically; the shown path."""
    cap = _cap(ctx)
    jail = _jail(ctx)
    with jail.locate(path, write=True) as loc, _exclusive(ctx, name, loc):
        raw = _read_locked(name, loc, cap)
        if raw is None:
            raise BuiltinError(f'{name}: path "{path}" does not exist')
        updated = change(raw.decode("utf-8", "surrogateescape"))
        _replace(name, loc, _encode(name, updated, cap))
    return jail.display(path)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _span(name: str, lines: list[str], start: int, end: int) -> None:
    if end < start:
        raise BuiltinError(f"{name}: end ({end}) is before start ({start})")
    if start > len(lines):
        raise BuiltinError(f"{name}: line {start} is past the end of the file ({len(lines)} lines)")


def _with_newline(content: str) -> str:
    return content if content.endswith("\n") or not content else content + "\n"


@_builtin("fs.replace")
def replace(ctx: CallContext, path: Any, old: Any, new: Any) -> str:
    """Replace the one occurrence of ``old``; zero or several occurrences are errors."""
    path, old, new = (
        _str("fs.replace", a, v) for a, v in (("path", path), ("old", old), ("new", new))
    )
    if not old:
        raise BuiltinError("fs.replace: old must not be empty")

    def change(text: str) -> str:
        count = text.count(old)
        if count != 1:
            what = "not found" if count == 0 else f"found {count} times"
            raise BuiltinError(
                f'fs.replace: old text {what} in "{path}"; it must occur '
                "exactly once (use fs.replace_all for every occurrence)"
            )
        return text.replace(old, new, 1)

    return f"replaced in: {_rewrite(ctx, 'fs.replace', path, change)}"


@_builtin("fs.replace_all")
def replace_all(ctx: CallContext, path: Any, old: Any, new: Any) -> str:
    path, old, new = (
        _str("fs.replace_all", a, v) for a, v in (("path", path), ("old", old), ("new", new))
    )
    if not old:
        raise BuiltinError("fs.replace_all: old must not be empty")
    count = 0

    def change(text: str) -> str:
        nonlocal count
        count = text.count(old)
        return text.replace(old, new)

    shown = _rewrite(ctx, "fs.replace_all", path, change)
    return f"replaced {count} occurrence{'s' if count != 1 else ''} in: {shown}"


@_builtin("fs.read_lines")
def read_lines(ctx: CallContext, path: Any, start: Any = 1, end: Any = 0) -> str:
    """Lines ``start``..``end`` (0 = to the end), each as ``"N. text\\n"``."""
    path = _str("fs.read_lines", "path", path)
    start = _line("fs.read_lines", "start", start)
    end = _line("fs.read_lines", "end", end, 0)
    lines = _lines(read(ctx, path))
    last = len(lines) if end == 0 else min(end, len(lines))
    if end and end < start:
        raise BuiltinError(f"fs.read_lines: end ({end}) is before start ({start})")
    return "".join(
        f"{n}. {lines[n - 1].rstrip(chr(10)).rstrip(chr(13))}\n" for n in range(start, last + 1)
    )


@_builtin("fs.line_count")
def line_count(ctx: CallContext, path: Any) -> int:
    return len(_lines(read(ctx, _str("fs.line_count", "path", path))))


@_builtin("fs.insert_at")
def insert_at(ctx: CallContext, path: Any, line: Any, content: Any) -> str:
    """Insert ``content`` before line ``line`` (line count + 1 appends)."""
    path = _str("fs.insert_at", "path", path)
    at = _line("fs.insert_at", "line", line)
    content = _str("fs.insert_at", "content", content)

    def change(text: str) -> str:
        lines = _lines(text)
        if at > len(lines) + 1:
            raise BuiltinError(
                f"fs.insert_at: line {at} is past the end of the file "
                f"({len(lines)} lines; {len(lines) + 1} appends)"
            )
        if lines and not lines[-1].endswith("\n") and at == len(lines) + 1:
            lines[-1] += "\n"
        return "".join(lines[: at - 1]) + _with_newline(content) + "".join(lines[at - 1 :])

    return f"inserted at line {at} in: {_rewrite(ctx, 'fs.insert_at', path, change)}"


@_builtin("fs.replace_lines")
def replace_lines(ctx: CallContext, path: Any, start: Any, end: Any, content: Any) -> str:
    path = _str("fs.replace_lines", "path", path)
    first = _line("fs.replace_lines", "start", start)
    last = _line("fs.replace_lines", "end", end)
    content = _str("fs.replace_lines", "content", content)

    def change(text: str) -> str:
        lines = _lines(text)
        _span("fs.replace_lines", lines, first, last)
        return "".join(lines[: first - 1]) + _with_newline(content) + "".join(lines[last:])

    shown = _rewrite(ctx, "fs.replace_lines", path, change)
    return f"replaced lines {first}-{last} in: {shown}"


@_builtin("fs.delete_lines")
def delete_lines(ctx: CallContext, path: Any, start: Any, end: Any) -> str:
    path = _str("fs.delete_lines", "path", path)
    first = _line("fs.delete_lines", "start", start)
    last = _line("fs.delete_lines", "end", end)

    def change(text: str) -> str:
        lines = _lines(text)
        _span("fs.delete_lines", lines, first, last)
        return "".join(lines[: first - 1]) + "".join(lines[last:])

    shown = _rewrite(ctx, "fs.delete_lines", path, change)
    return f"deleted lines {first}-{last} in: {shown}"


@_builtin("fs.find")
def find(ctx: CallContext, path: Any, substring: Any) -> list[dict[str, Any]]:
    """Lines containing ``substring`` (plain text, not a pattern): ``{line_num, text}``."""
    path = _str("fs.find", "path", path)
    needle = _str("fs.find", "substring", substring)
    if not needle:
        raise BuiltinError("fs.find: substring must not be empty")
    return [
        {"line_num": n, "text": line.rstrip("\r\n")}
        for n, line in enumerate(_lines(read(ctx, path)), 1)
        if needle in line
    ]


@_builtin("fs.copy")
def copy(ctx: CallContext, src: Any, dst: Any) -> str:
    src = _str("fs.copy", "src", src)
    dst = _str("fs.copy", "dst", dst)
    data = _encode("fs.copy", read(ctx, src), _cap(ctx))
    jail = _jail(ctx)
    with jail.locate(dst, create=True, write=True) as loc, _exclusive(ctx, "fs.copy", loc):
        _replace("fs.copy", loc, data)
    return f"copied: {jail.display(dst)}"


@_builtin("fs.move")
def move(ctx: CallContext, src: Any, dst: Any) -> str:
    """Rename a regular file inside the workspace (never over a directory)."""
    src = _str("fs.move", "src", src)
    dst = _str("fs.move", "dst", dst)
    jail = _jail(ctx)
    with jail.locate(src, write=True) as sloc, jail.locate(dst, create=True, write=True) as dloc:
        if not sloc.name or not dloc.name:
            raise BuiltinError("fs.move: cannot move the workspace directory")
        info = os.stat(sloc.name, dir_fd=sloc.dir_fd, follow_symlinks=False)
        if not st.S_ISREG(info.st_mode):
            raise BuiltinError(f'fs.move: "{src}" is not a regular file')
        try:
            target = os.stat(dloc.name, dir_fd=dloc.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            target = None
        if target is not None and st.S_ISDIR(target.st_mode):
            raise BuiltinError(f'fs.move: "{dst}" is a directory; name the file')
        os.rename(sloc.name, dloc.name, src_dir_fd=sloc.dir_fd, dst_dir_fd=dloc.dir_fd)
    return f"moved: {jail.display(dst)}"


def diff(
    ctx: CallContext,
    old_content: Any,
    new_content: Any,
    old_name: Any = "old",
    new_name: Any = "new",
) -> str:
    """A unified diff of two texts, 3 lines of context (no file access)."""
    a = _str("fs.diff", "old_content", old_content)
    b = _str("fs.diff", "new_content", new_content)
    return "".join(
        difflib.unified_diff(
            _lines(a),
            _lines(b),
            fromfile=_str("fs.diff", "old_name", old_name),
            tofile=_str("fs.diff", "new_name", new_name),
            n=3,
        )
    )


FUNCTIONS = {
    "fs.replace": replace,
    "fs.replace_all": replace_all,
    "fs.read_lines": read_lines,
    "fs.insert_at": insert_at,
    "fs.replace_lines": replace_lines,
    "fs.delete_lines": delete_lines,
    "fs.line_count": line_count,
    "fs.find": find,
    "fs.copy": copy,
    "fs.move": move,
    "fs.diff": diff,
}
