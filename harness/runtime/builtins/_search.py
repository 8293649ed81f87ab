"""The tree walk and the content scan behind ``fs.glob`` and ``fs.grep``.

The walk holds one directory handle per level and opens every child relative to it
with ``O_NOFOLLOW``: it never follows a symlink, so a directory swapped for a link
while the walk is in it makes the open fail, never leads outside. The start directory
is opened through the jail, which resolves it beneath the workspace; every name below
is then checked against the jail's hidden and sensitive rules (``Jail.hidden_entry``)
before it is yielded, opened or descended.

A glob pattern is run as a small automaton over path components (``**`` = one or more
components, or zero when something follows it; ``*`` and ``**`` skip names starting
with ``.`` unless the component itself starts with ``.``), so the walk visits each
directory once and only where the pattern can still match.

``.gitignore`` files (and ``.git/info/exclude``) are honoured unless asked otherwise:
the rules come from ``pathspec``'s ``GitIgnoreSpec`` (RE2 backend); deeper files take
precedence, the last matching line of a file decides, and an ignored directory is not
entered (so nothing below it can be re-included, as in git). A start directory that is
itself ignored is searched as asked, with the ``.gitignore`` files at and below it.

``fs.grep`` reads each file whole and runs RE2 over the buffer with ``(?m)`` and
``never_nl``: a match can then never span lines, so the matches found are exactly the
lines a line-by-line search finds; each is verified against the pattern as given
before it is reported. Files are visited in path order (or, with ``order="walk"``,
in the order the file system lists each directory, as ``grep -r`` does) and the scan
stops at ``max_matches``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import stat as st
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Generator
from typing import Any

import re2

from harness.errors import BuiltinError, JailError
from harness.runtime import jail as _j

_UNANCHORED = re2._Anchor.UNANCHORED
_NOFOLLOW_READ = _j.READ_FLAGS | os.O_NOFOLLOW
_NOFOLLOW_DIR = _j.DIR_FLAGS | os.O_NOFOLLOW
GITIGNORE = ".gitignore"
# An ignore file over either bound is an error result naming it and the bound (never
# rules silently lost): 1,000 rules compile in ~0.1 s; a 1 MiB file cost 6-10 s.
MAX_GITIGNORE_BYTES = 256 << 10
MAX_GITIGNORE_RULES = 1000

_LINE_OPTIONS = re2.Options()
_LINE_OPTIONS.log_errors = False
_BUFFER_OPTIONS = re2.Options()
_BUFFER_OPTIONS.log_errors = False
_BUFFER_OPTIONS.never_nl = True
# Patterns whose meaning changes when run over a whole buffer: text anchors, or a
# flag group that turns multi-line mode off. They are scanned line by line.
_LINE_ONLY = re.compile(r"\\[Az]|\(\?[a-zA-Z]*-[a-zA-Z]*m")
# Characters with a meaning in RE2 syntax (and line ends): a pattern without any of
# them is a literal.
_SPECIAL = re.compile(r"[\\.^$|?*+()\[\]{}\r\n]")


# ----------------------------------------------------------------------- gitignore

# (directory, match), shallowest first; match(path) -> (include: bool | None, index)
Ignores = tuple[tuple[str, Callable[[str], tuple[bool | None, Any]]], ...]


def matcher(spec: Any) -> Callable[[str], tuple[bool | None, Any]]:
    """``spec.check_file(path).include`` as ``match(path)[0]``, without pathspec's
    per-call wrapping: ``check_file`` is ``normalize_file`` (the identity for the
    relative POSIX paths the walk builds: no leading ``/`` or ``./``, and no other
    separator on POSIX) + the backend's ``match_file`` + a result object. Falls back
    to ``check_file`` if a pathspec release moves the backend."""
    fast = getattr(getattr(spec, "_backend", None), "match_file", None)
    if callable(fast) and os.sep == "/" and os.altsep is None:
        return fast
    return lambda path: (spec.check_file(path).include, None)


# Compiled rules (or why they cannot be used) by a digest of the file's content: a
# call re-reads every .gitignore (a changed file is always seen, even one rewritten
# within the file system's timestamp tick) but compiles each distinct content once,
# whatever its size. Bounded by entries and by the rules they hold (a 1,000-rule spec
# takes a few MB), least recently used first out: never emptied whole, which made 20
# folders of 990 rules each recompile everything on every search (attack review F4).
# It holds one search's whole budget, so a repeated search compiles nothing.
_SPECS: OrderedDict[bytes, tuple[Any, str | None, int]] = OrderedDict()
_CACHED_RULES = [0]
_SPECS_LOCK = threading.Lock()
MAX_CACHED_SPECS = 256
# The rules of all the ignore files one search (fs.grep, fs.glob, fs.list) uses: past
# it the search is an error result naming the limit (compiling 200 files of 990 rules
# took 33 s per search).
MAX_RULES_PER_SEARCH = 20_000
MAX_CACHED_RULES = MAX_RULES_PER_SEARCH
COMPILES = [0]  # rule sets compiled since start (tests/security count them)


class IgnoreFileError(BuiltinError):
    """An ignore file harness does not use: too large, too many rules, too complex."""


class RuleBudget:
    """The rules the ignore files of one search add up to (``MAX_RULES_PER_SEARCH``)."""

    __slots__ = ("used",)

    def __init__(self) -> None:
        self.used = 0

    def spend(self, count: int, where: str, who: str) -> None:
        self.used += count
        if self.used > MAX_RULES_PER_SEARCH:
            raise IgnoreFileError(
                f'{who}: ignore file "{where}" brings the rules of the ignore files this '
                f"search reads to {self.used:,}; harness reads at most "
                f"{MAX_RULES_PER_SEARCH:,} rules per search. Search a smaller folder, merge "
                "the rules into fewer .gitignore files, or pass include_ignored=True to "
                "search without ignore rules"
            )


def _cached(key: bytes) -> tuple[Any, str | None, int] | None:
    with _SPECS_LOCK:
        got = _SPECS.get(key)
        if got is not None:
            _SPECS.move_to_end(key)
        return got


def _cache(key: bytes, got: tuple[Any, str | None, int]) -> None:
    count = got[2]
    with _SPECS_LOCK:
        if key in _SPECS:
            return
        while _SPECS and (
            len(_SPECS) >= MAX_CACHED_SPECS or _CACHED_RULES[0] + count > MAX_CACHED_RULES
        ):
            _old, (_spec_, _why, dropped) = _SPECS.popitem(last=False)
            _CACHED_RULES[0] -= dropped
        _SPECS[key] = got
        _CACHED_RULES[0] += count


def _spec(data: bytes, where: str, who: str, budget: RuleBudget | None = None) -> Any:
    """The rules of one ignore file (None if none); lines pathspec cannot compile are
    skipped, as git skips invalid patterns. :class:`IgnoreFileError` when the file has
    too many rules or its rules cannot be compiled together, or when ``budget`` (the
    search's) runs out. Cached by content."""
    key = hashlib.blake2b(data, digest_size=20).digest()
    got = _cached(key)
    if got is None:
        lines = data.decode("utf-8", "replace").splitlines()
        count = sum(1 for line in lines if line.strip() and not line.startswith("#"))
        if count > MAX_GITIGNORE_RULES:
            why = (
                f"has {count:,} rules; harness reads at most {MAX_GITIGNORE_RULES:,} rules per file"
            )
            got = (None, why, 0)
        else:
            if budget is not None:
                budget.spend(count, where, who)  # before compiling: refused work is not done
                budget = None
            COMPILES[0] += 1
            got = (*_compile_spec(lines), count)
        _cache(key, got)
    spec, refused, count = got
    if refused is not None:
        raise IgnoreFileError(f'{who}: ignore file "{where}" {refused}. {_FIX}')
    if budget is not None:
        budget.spend(count, where, who)
    return spec


_FIX = (
    "Shorten or split it (a .gitignore in each subdirectory), or pass "
    "include_ignored=True to search without ignore rules"
)


def _compile_spec(lines: list[str]) -> tuple[Any, str | None]:
    """``(spec or None, None)``, or ``(None, why)`` when the valid lines cannot be
    compiled together (RE2's memory budget): never silently no rules."""
    if not any(line.strip() and not line.startswith("#") for line in lines):
        return None, None
    import pathspec  # noqa: PLC0415 - ~20 ms; only where a .gitignore exists

    def build(some: list[str]) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pathspec.GitIgnoreSpec.from_lines(some, backend="re2")

    try:
        return build(lines), None
    except Exception:  # noqa: BLE001 - pathspec and RE2 raise several kinds
        pass
    good = []
    for line in lines:
        try:
            build([line])
        except Exception:  # noqa: BLE001, S112 - an invalid line: skipped
            continue
        good.append(line)
    try:
        return (build(good) if good else None), None
    except Exception:  # noqa: BLE001 - valid alone, not together
        return None, (
            f"has {len(good):,} rules that are too complex to compile together (each "
            "is valid alone; RE2's memory budget is exceeded)"
        )


def is_ignored(ignores: Ignores, rel: str, is_dir: bool) -> bool:
    """Whether workspace-relative ``rel`` is ignored by ``ignores`` (deepest decides)."""
    for base, match in reversed(ignores):
        sub = rel[len(base) + 1 :] if base else rel
        got = match(sub + "/" if is_dir else sub)[0]
        if got is not None:
            return bool(got)
    return False


def _read_ignore_file(dfd: int, name: str, where: str, who: str) -> bytes | None:
    """Ignore file ``name`` in ``dfd`` (never through a symlink), or None if there is
    no regular file; :class:`IgnoreFileError` when it is over ``MAX_GITIGNORE_BYTES``."""
    try:
        fd = os.open(name, _NOFOLLOW_READ, dir_fd=dfd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not st.S_ISREG(info.st_mode):
            return None
        data = os.read(fd, MAX_GITIGNORE_BYTES + 1) if info.st_size else b""
    finally:
        os.close(fd)
    if max(len(data), info.st_size) > MAX_GITIGNORE_BYTES:
        raise IgnoreFileError(
            f'{who}: ignore file "{where}" has {max(len(data), info.st_size):,} bytes; '
            f"harness reads at most {MAX_GITIGNORE_BYTES:,} bytes per file. {_FIX}"
        )
    return data


def _with_dir(
    ignores: Ignores, dfd: int, rel: str, who: str, budget: RuleBudget | None = None
) -> Ignores:
    where = f"{rel}/{GITIGNORE}" if rel else GITIGNORE
    data = _read_ignore_file(dfd, GITIGNORE, where, who)
    spec = _spec(data, where, who, budget) if data else None
    return (*ignores, (rel, matcher(spec))) if spec is not None else ignores


def start_ignores(
    jail: _j.Jail,
    real: str,
    fd: int | None = None,
    who: str = "fs",
    budget: RuleBudget | None = None,
) -> Ignores:
    """The rules in force in directory ``real``: ``.git/info/exclude`` and the
    ``.gitignore`` of each ancestor, dropped where the path itself is ignored (a
    directory named explicitly is searched). With ``fd`` (a handle of ``real``), its
    own ``.gitignore`` too; the walk reads it otherwise. Every file read is charged to
    ``budget`` (the search's; a new one if None)."""
    budget = budget if budget is not None else RuleBudget()
    ignores: Ignores = ()
    try:
        info, _r = jail.open(".git/info", _j.DIR_FLAGS)
    except (JailError, BuiltinError, OSError):
        pass
    else:
        where = ".git/info/exclude"
        try:
            data = _read_ignore_file(info, "exclude", where, who)
        finally:
            os.close(info)
        spec = _spec(data, where, who, budget) if data else None
        if spec is not None:
            ignores = (("", matcher(spec)),)
    parts = [p for p in real.split("/") if p]
    for depth in range(len(parts)):
        here = "/".join(parts[:depth])
        try:
            dfd, _r = jail.open(here or ".", _j.DIR_FLAGS)
        except (JailError, BuiltinError, OSError):
            return ()
        try:
            ignores = _with_dir(ignores, dfd, here, who, budget)
        finally:
            os.close(dfd)
        if is_ignored(ignores, "/".join(parts[: depth + 1]), True):
            ignores = ()
    if fd is not None:
        ignores = _with_dir(ignores, fd, real, who, budget)
    return ignores


# ---------------------------------------------------------------------- the pattern


class Pattern:
    """A glob split into components, run as an automaton over path components."""

    __slots__ = ("kinds", "last", "memo", "parts", "tests")

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts
        self.last = len(parts) - 1
        # per component: 0 = "**", 1 = magic, 2 = literal
        self.kinds = [0 if p == "**" else 1 if any(c in p for c in "*?[") else 2 for p in parts]
        self.tests: list[Callable[[str], Any] | None] = [
            re.compile(fnmatch.translate(p)).match if k == 1 else None
            for p, k in zip(parts, self.kinds, strict=True)
        ]
        self.memo: dict[tuple[tuple[int, ...], str], tuple[bool, tuple[int, ...]]] = {}

    def start(self) -> tuple[int, ...]:
        return self._closure((0,))

    def _closure(self, states: tuple[int, ...]) -> tuple[int, ...]:
        out: list[int] = []
        for i in states:
            while True:
                if i not in out:
                    out.append(i)
                if self.kinds[i] == 0 and i < self.last:
                    i += 1  # "**" as zero directories
                    continue
                break
        return tuple(sorted(out))

    def step(self, states: tuple[int, ...], name: str) -> tuple[bool, tuple[int, ...]]:
        """(whether ``name`` matches the whole pattern, the states to descend with)."""
        key = (states, name)
        got = self.memo.get(key)
        if got is None:
            if len(self.memo) > 65536:
                self.memo.clear()
            got = self.memo[key] = self._step(states, name)
        return got

    def _step(self, states: tuple[int, ...], name: str) -> tuple[bool, tuple[int, ...]]:
        accept = False
        nxt: list[int] = []
        dot = name.startswith(".")
        for i in states:
            kind = self.kinds[i]
            if kind == 0:
                if dot:
                    continue
                if i == self.last:
                    accept = True
                nxt.append(i)
                continue
            if kind == 1:
                ok = self.tests[i](name) is not None and (  # type: ignore[misc]
                    not dot or self.parts[i].startswith(".")
                )
            else:
                ok = name == self.parts[i]
            if ok:
                if i == self.last:
                    accept = True
                else:
                    nxt.append(i + 1)
        return accept, (self._closure(tuple(nxt)) if nxt else ())


# ------------------------------------------------------------------------- the walk

FILE, DIR, LINK, OTHER = "file", "dir", "link", "other"


def _link_visible(jail: _j.Jail, rel: str) -> bool:
    """A symlink is listed only if it dangles inside, or leads to something allowed."""
    try:
        fd, _real = jail.open(rel, _j.PROBE_FLAGS)
    except FileNotFoundError:
        return True
    except (JailError, BuiltinError, OSError):
        return False
    os.close(fd)
    return True


class Walk:
    """Entries below a start directory matching a :class:`Pattern`, in path order
    (files only when ``files_only``: then in exactly sorted path order). With
    ``sort=False`` each directory's entries come in the order the file system lists
    them (``scandir``), a directory's content right after the directory, as with
    ``grep -r`` or ``find``; the rules applied are the same."""

    def __init__(
        self,
        jail: _j.Jail,
        pattern: Pattern,
        *,
        ignores: Ignores | None,
        tick: Callable[[], None],
        files_only: bool = False,
        sort: bool = True,
        who: str = "fs",
        budget: RuleBudget | None = None,
    ) -> None:
        self.jail, self.pattern, self.ignores = jail, pattern, ignores
        self.budget = budget if budget is not None else RuleBudget()
        self.tick, self.files_only, self.sort = tick, files_only, sort
        self.who = who  # the built-in's name, for errors

    def run(self, fd: int, real: str) -> Generator[tuple[int, str, str, str], None, None]:  # noqa: C901
        """Yield ``(dir_fd, name, rel, kind)``; ``dir_fd`` is valid until the next item.
        ``fd`` (the start directory, opened through the jail) is not closed."""
        jail, pattern, files_only = self.jail, self.pattern, self.files_only
        step, hidden_entry = pattern.step, jail.hidden_entry
        folded = tuple(_j._fold(p for p in real.split("/") if p))
        # one frame per open directory: (fd, rel, folded, states, ignores, entries)
        stack = [self._frame(fd, real, folded, pattern.start(), self.ignores)]
        try:
            while stack:
                dfd, rel, folded, states, ignores, entries = stack[-1]
                while entries:  # this directory's entries, until one to descend into
                    _key, name, kind = entries.pop()
                    accept, nxt = step(states, name)
                    if not accept and not (nxt and kind == DIR):
                        continue
                    if hidden_entry(folded, name):
                        continue
                    crel = f"{rel}/{name}" if rel else name
                    if ignores and is_ignored(ignores, crel, kind == DIR):
                        continue
                    if accept and (kind == FILE or not files_only):
                        if kind != LINK or _link_visible(jail, crel):
                            yield dfd, name, crel, kind
                    if nxt and kind == DIR:
                        try:
                            cfd = os.open(name, _NOFOLLOW_DIR, dir_fd=dfd)
                        except OSError:
                            continue  # vanished, swapped for a symlink, or unreadable
                        try:
                            frame = self._frame(cfd, crel, (*folded, name.casefold()), nxt, ignores)
                        except BaseException:
                            os.close(cfd)
                            raise
                        stack.append(frame)
                        break
                else:  # done with this directory
                    stack.pop()
                    if stack:  # the start directory is the caller's to close
                        os.close(dfd)
        finally:
            for frame in stack[1:]:
                os.close(frame[0])

    def _frame(
        self,
        dfd: int,
        rel: str,
        folded: tuple[str, ...],
        states: tuple[int, ...],
        ignores: Ignores | None,
    ) -> tuple[
        int, str, tuple[str, ...], tuple[int, ...], Ignores | None, list[tuple[str, str, str]]
    ]:
        """A directory's entries in reverse (popped from the end): sorted, or in the
        file system's order when the walk does not sort."""
        self.tick()
        self.jail.refresh()
        entries: list[tuple[str, str, str]] = []  # (sort key, name, kind)
        has_gitignore = False
        with os.scandir(dfd) as it:
            for e in it:
                name = e.name
                try:
                    if e.is_file(follow_symlinks=False):  # most entries: one call
                        kind = FILE
                    elif e.is_dir(follow_symlinks=False):
                        kind = DIR
                    elif e.is_symlink():
                        kind = LINK
                    else:
                        kind = OTHER
                except OSError:
                    continue
                if kind == FILE and name == GITIGNORE:
                    has_gitignore = True
                entries.append((name + "/" if kind == DIR else name, name, kind))
        if self.sort:
            entries.sort(reverse=True)
        else:
            entries.reverse()
        if ignores is not None and has_gitignore:
            ignores = _with_dir(ignores, dfd, rel, self.who, self.budget)
        return dfd, rel, folded, states, ignores, entries


# ------------------------------------------------------------------------- the scan


def read_file(dfd: int, name: str, cap: int) -> bytes | None:
    """The content of regular file ``name`` in ``dfd``, never through a symlink (None
    if it is not a regular file, is larger than ``cap`` or vanished meanwhile)."""
    try:
        fd = os.open(name, _NOFOLLOW_READ, dir_fd=dfd)
    except OSError:
        return None
    try:
        return read_open(fd, cap)
    finally:
        os.close(fd)


def read_open(fd: int, cap: int) -> bytes | None:
    """The content of the open regular file ``fd``: at most ``cap`` bytes, None if it
    is not a regular file or is larger than ``cap``."""
    info = os.fstat(fd)
    if not st.S_ISREG(info.st_mode) or info.st_size > cap:
        return None
    want = min(info.st_size + 1, cap)
    data = os.read(fd, want)
    if len(data) < want or want >= cap:
        return data
    chunks, left = [data], cap - len(data)  # grew meanwhile: read on, up to the cap
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class Scanner:
    """Matching lines of a buffer, as a line-by-line search would find them."""

    __slots__ = ("buffer", "line", "literal", "max_chars")

    def __init__(self, pattern: str, line_regex: Any, max_chars: int) -> None:
        self.line = line_regex._regexp
        self.max_chars = max_chars
        self.buffer = None
        # A pattern of plain characters only matches itself, within one line: every
        # hit is a matching line (nothing to verify); see _literal.
        self.literal = pattern.encode("utf-8") if pattern and not _SPECIAL.search(pattern) else None
        if not _LINE_ONLY.search(pattern):
            self.buffer = re2.compile("(?m)" + pattern, options=_BUFFER_OPTIONS)._regexp

    def scan(self, data: bytes, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` (line number, text) pairs; lines split on ``\\n``, a final
        ``\\r`` dropped, invalid UTF-8 read as U+FFFD."""
        if not data.isascii():
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                data = data.decode("utf-8", "replace").encode("utf-8")
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
            if data.endswith(b"\r"):  # a last line without "\n" loses its "\r" too
                data = data[:-1]
        if self.buffer is None:
            return self._by_line(data, limit)
        return self._in_buffer(data, limit, self.literal)

    def _in_buffer(self, data: bytes, limit: int, literal: bytes | None) -> list[tuple[int, str]]:
        """One pass over the whole buffer: each hit's line is located around it (line
        numbers counted only up to it) and checked against the pattern as given. For a
        ``literal`` pattern RE2 finds the first hit (it skips text faster than
        ``bytes.find``, which matters when there is none), ``bytes.find`` the next ones
        (cheaper per call), and a hit needs no check against its line."""
        assert self.buffer is not None
        find, verify, size = self.buffer.Match, self.line.Match, len(data)
        out: list[tuple[int, str]] = []
        pos = counted = 0
        number = 1
        start = find(_UNANCHORED, data, 0, size)[0][0]
        while start >= 0:
            nl = data.rfind(b"\n", pos, start)
            begin = nl + 1 if nl >= 0 else pos
            end = data.find(b"\n", start)
            if end < 0:
                end = size
            number += data.count(b"\n", counted, begin)
            counted = begin
            line = data[begin:end]
            if literal is not None or verify(_UNANCHORED, line, 0, len(line))[0][0] >= 0:
                out.append((number, line.decode("utf-8")[: self.max_chars]))
                if len(out) >= limit:
                    break
            pos = end + 1
            if pos > size:
                break
            start = (
                data.find(literal, pos)
                if literal is not None
                else find(_UNANCHORED, data, pos, size)[0][0]
            )
        return out

    def _by_line(self, data: bytes, limit: int) -> list[tuple[int, str]]:
        verify = self.line.Match
        out: list[tuple[int, str]] = []
        for number, line in enumerate(data.split(b"\n"), 1):
            if verify(_UNANCHORED, line, 0, len(line))[0][0] >= 0:
                out.append((number, line.decode("utf-8")[: self.max_chars]))
                if len(out) >= limit:
                    break
        return out
