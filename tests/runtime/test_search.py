"""fs.grep / fs.glob / fs.list: the walk and the scan against straightforward references,
.gitignore against git itself, and the new parameters.

The references are the previous implementation in its plainest form: list the tree
with os.listdir/lstat and the glob rules component by component, read every file,
decode it as UTF-8 (invalid bytes as U+FFFD), split it on "\\n", drop a final "\\r"
and search each line with RE2.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
import stat as st
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

from harness.config import Config
from harness.errors import BuiltinError
from harness.runtime import jail as jail_mod
from harness.runtime.builtins import _search, fs
from harness.runtime.context import CallContext

fs_list = fs.FUNCTIONS["fs.list"]


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    yield ws
    jail_mod.clear_jails()


@pytest.fixture
def ctx(ws: Path) -> CallContext:
    return CallContext(config=Config(root=ws, workspace=ws))


# ------------------------------------------------------------------- references


def ref_walk(jail: jail_mod.Jail, root: Path, rel: str, parts: list[str]) -> set[tuple[str, str]]:  # noqa: C901
    """(path, kind) matching ``parts`` below ``root/rel``: the old fs._walk, plainly."""
    out: set[tuple[str, str]] = set()
    if not parts:
        return out
    here = root / rel if rel else root
    head, rest = parts[0], parts[1:]

    def kind_of(crel: str) -> str | None:
        if jail.hidden(crel):
            return None
        try:
            mode = os.lstat(root / crel).st_mode
        except FileNotFoundError:
            return None
        if st.S_ISLNK(mode):  # listed if it dangles inside or leads somewhere allowed
            parent, _sep, name = crel.rpartition("/")
            fd = os.open(root / parent if parent else root, os.O_RDONLY | os.O_DIRECTORY)
            try:
                return None if fs._entry(jail, fd, name, crel) is None else "link"
            finally:
                os.close(fd)
        return "dir" if st.S_ISDIR(mode) else "file" if st.S_ISREG(mode) else "other"

    if head == "**":
        if rest:
            out |= ref_walk(jail, root, rel, rest)
        for child in sorted(os.listdir(here)):
            if child.startswith("."):
                continue
            crel = f"{rel}/{child}" if rel else child
            kind = kind_of(crel)
            if kind is None:
                continue
            if not rest:
                out.add((crel, kind))
            if kind == "dir":
                out |= ref_walk(jail, root, crel, parts)
        return out
    if any(c in head for c in "*?["):
        names = [
            n
            for n in sorted(os.listdir(here))
            if fnmatch.fnmatchcase(n, head) and (head.startswith(".") or not n.startswith("."))
        ]
    else:
        names = [head]
    for child in names:
        crel = f"{rel}/{child}" if rel else child
        kind = kind_of(crel)
        if kind is None:
            continue
        if not rest:
            out.add((crel, kind))
        elif kind == "dir":
            out |= ref_walk(jail, root, crel, rest)
    return out


def ref_grep(root: Path, files: list[str], pattern: str, limit: int) -> list[dict[str, object]]:
    regex = re2.compile(pattern)
    out: list[dict[str, object]] = []
    for rel in files:
        data = (root / rel).read_bytes()
        if b"\x00" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
            line = line.removesuffix("\r")
            if regex.search(line):
                out.append({"path": rel, "line": number, "text": line[:1000]})
                if len(out) >= limit:
                    return out
    return out


# ------------------------------------------------------------------- generated trees

NAMES = [
    "a",
    "b",
    "B",
    "a-b",
    "a.b",
    "a b",
    "ab",
    "é",
    "x.py",
    "y.txt",
    ".hid",
    ".env",
    "id_rsa",
    "z",
]
CHUNKS = [
    b"import os",
    b"foo",
    b"FOO bar",
    b"x",
    b"",
    b" ",
    b"\t",
    b"\r",
    b"\r\n",
    b"\n",
    b"\n\n",
    b"caf\xc3\xa9",
    b"\xff\xfe",
    b"\xc3",
    b"\xe2\x82",
    b"a" * 1500,
    b"foo" * 400,
    b"end\r",
    b"\xef\xbf\xbd",
]
PATTERNS = [
    "import",
    "^import",
    "o$",
    "^$",
    "x*",
    "",
    "(?i)foo",
    r"\bfoo\b",
    ".",
    "é",
    r"\x{fffd}",
    "[^a]",
    r"\s+$",
    r"a\nb",
    r"\C",
    "foo|^x",
    r"\Aimport",
    r"o\z",
    "(?-m)^x",
    r"\pL$",
    "\r",
    r"\r$",
    "^.{3}$",
    "a{1000}",
    r"(?s)o.*r",
    "[[:^alpha:]]$",
    r"\B",
    "(?m)^foo",
    r"\x{FFFD}$",
    "(?i)É",
    "[\r]",
    r"[xr\r]$",
    "d$",
    r"\W$",
    # literals (found with bytes.find): plain text, blanks, U+FFFD, a NUL
    "foo",
    "FOO bar",
    "\t",
    " ",
    "\ufffd",
    "aaa",
    "-",
    "é\xff",
    "caf",
    "o\x00",
]
GLOBS = [
    "**/*",
    "*",
    "**/*.py",
    "a/**",
    "**/.*",
    "a/*",
    "**/a*",
    "**/b/*",
    ".hid/*",
    "**",
    "a/**/*.txt",
    "[ab]*/**/?",
]


LINK_TARGETS = ["a", "x.py", "../a", "../../outside", "/etc/passwd", "missing", ".", "..", ".env"]


@s.composite
def trees(draw: s.DrawFn) -> dict[str, bytes | str]:
    """Relative path -> file content (bytes) or symlink target (str)."""
    paths = draw(
        s.lists(s.lists(s.sampled_from(NAMES), min_size=1, max_size=3), min_size=1, max_size=10)
    )
    files: dict[str, bytes | str] = {}
    for comps in paths:
        rel = "/".join(comps)
        # a file may not also be a directory
        if any(rel == f or rel.startswith(f + "/") or f.startswith(rel + "/") for f in files):
            continue
        content = b"".join(draw(s.lists(s.sampled_from(CHUNKS), max_size=12)))
        if draw(s.integers(0, 9)) == 0:
            content = content[:50] + b"\x00" + content[50:]  # binary, maybe past 8 KiB
        content += draw(s.sampled_from([b"", b"", b"\r", b"\n", b"\r\n", b"\n\n", b"\r\r"]))
        files[rel] = content
        if draw(s.integers(0, 5)) == 0:
            files[rel] = draw(s.sampled_from(LINK_TARGETS))
    return files


def _make(root: Path, files: dict[str, bytes | str]) -> None:
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            os.symlink(content, root / rel)
        else:
            (root / rel).write_bytes(content)


@contextlib.contextmanager
def grep_tree(
    files: dict[str, bytes | str], sub: str, portable: bool
) -> Iterator[tuple[Path, CallContext, jail_mod.Jail] | None]:
    """A generated tree in a temporary workspace, with the openat2 walk on or off
    (``portable``): ``(root, ctx, jail)``, or None when the start path ``sub`` goes
    through a symlink (the jail resolves those; see test_fs)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _make(root, files)
        old = fs.USE_OPENAT2
        fs.USE_OPENAT2 = False if portable else None
        try:
            ctx = CallContext(config=Config(root=root, workspace=root))
            jail = jail_mod.get_jail(ctx.config, use_openat2=fs.USE_OPENAT2)
            comps = Path(sub).parts
            if any((root.joinpath(*comps[: i + 1])).is_symlink() for i in range(len(comps))):
                yield None
            else:
                yield root, ctx, jail
        finally:
            fs.USE_OPENAT2 = old
            jail_mod.clear_jails()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    files=trees(),
    pattern=s.sampled_from(PATTERNS),
    glob=s.sampled_from(GLOBS),
    limit=s.sampled_from([1, 2, 3, 7, 10000]),
    sub=s.sampled_from([".", "a", "a/b"]),
    walk=s.booleans(),
)
def test_grep_matches_reference(
    files: dict[str, bytes | str], pattern: str, glob: str, limit: int, sub: str, walk: bool
) -> None:
    with grep_tree(files, sub, walk) as made:
        if made is None:
            return
        root, ctx, jail = made
        if not (root / sub).exists():
            with pytest.raises(BuiltinError, match="does not exist|not a directory"):
                fs.grep(ctx, pattern, path=sub)
            return
        if not (root / sub).is_dir():  # one file: the glob does not apply
            assert fs.grep(ctx, pattern, path=sub, glob=glob, max_matches=limit) == (
                ref_grep(root, [sub], pattern, limit)
            )
            return
        base = "" if sub == "." else sub
        parts = [p for p in glob.split("/") if p not in ("", ".")]
        found = sorted(p for p, k in ref_walk(jail, root, base, parts) if k == "file")
        expected = ref_grep(root, found, pattern, limit)
        assert fs.grep(ctx, pattern, path=sub, glob=glob, max_matches=limit) == expected
        # the glob of the same pattern: every kind, sorted
        if sub == ".":
            assert fs.glob(ctx, glob) == sorted(p for p, _k in ref_walk(jail, root, "", parts))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=trees(), pattern=s.sampled_from(PATTERNS))
def test_grep_single_file_matches_reference(files: dict[str, bytes | str], pattern: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _make(root, files)
        ctx = CallContext(config=Config(root=root, workspace=root))
        try:
            for rel in sorted(files):
                if (
                    jail_mod.get_jail(ctx.config).hidden(rel)
                    or not (root / rel).is_file()
                    or any(p.is_symlink() for p in [root / rel, *(root / rel).parents])
                ):
                    continue
                assert fs.grep(ctx, pattern, path=rel, max_matches=10000) == ref_grep(
                    root, [rel], pattern, 10000
                )
        finally:
            jail_mod.clear_jails()


@given(
    parent=s.lists(
        s.sampled_from(
            [
                ".ssh",
                ".docker",
                "config.json",
                ".config",
                "gcloud",
                "a",
                ".harness",
                "x.pem",
                "B",
                ".AWS",
            ]
        ),
        max_size=3,
    ),
    name=s.sampled_from(
        [
            "config.json",
            "gcloud",
            ".env",
            ".env.local",
            "id_rsa.pub",
            ".harness",
            ".HARNESS",
            "a",
            "k.KEY",
            ".kube",
            "ok.txt",
        ]
    ),
)
def test_hidden_entry_agrees_with_hidden(parent: list[str], name: str) -> None:
    jail = jail_mod.Jail(Path("/tmp"), ("a/.harness",))
    try:
        if any(jail.hidden("/".join(parent[: i + 1])) for i in range(len(parent))):
            return  # the walk never gets below a hidden directory
        folded = tuple(p.casefold() for p in parent)
        assert jail.hidden_entry(folded, name) == jail.hidden("/".join([*parent, name]))
    finally:
        jail.close()


_RULE_PARTS = [
    "*.py",
    "build/",
    "/top",
    "!keep.py",
    "a/**/b",
    "**/x",
    "\\#h",
    "d?r/",
    "[ab]*",
    "*.log",
    "!*.log/",
    "sub/",
    "!sub/k",
    "\\!bang",
    "sp ace",
    "**",
    "c/",
]
_NAMES = [
    "a",
    "b",
    "x",
    "top",
    "keep.py",
    "m.py",
    "build",
    "dir",
    "sub",
    "k",
    "#h",
    "!bang",
    "sp ace",
    "q.log",
    "c",
    "w\\z",
    "é",
]


@given(
    rules=s.lists(s.sampled_from(_RULE_PARTS), min_size=1, max_size=6),
    path=s.lists(s.sampled_from(_NAMES), min_size=1, max_size=4),
    is_dir=s.booleans(),
)
def test_fast_matcher_agrees_with_check_file(
    rules: list[str], path: list[str], is_dir: bool
) -> None:
    spec = _search._spec("\n".join(rules).encode(), ".gitignore", "fs.grep")
    if spec is None:
        return
    rel = "/".join(path) + ("/" if is_dir else "")
    match = _search.matcher(spec)
    assert match.__name__ == "match_file"  # pathspec's backend, not the fallback
    assert match(rel)[0] == spec.check_file(rel).include


# ------------------------------------------------------------------------ examples


def test_grep_line_semantics(ctx: CallContext, ws: Path) -> None:
    (ws / "crlf.txt").write_bytes(b"one\r\ntwo\r\nend\r")
    (ws / "bad.txt").write_bytes(b"caf\xe9 ok\n\xff\n")
    (ws / "long.txt").write_bytes(b"x" * 5000 + b"needle\n")
    (ws / "zero.bin").write_bytes(b"needle\x00")
    assert fs.grep(ctx, "[eo]$", glob="crlf.txt") == [
        {"path": "crlf.txt", "line": 1, "text": "one"},
        {"path": "crlf.txt", "line": 2, "text": "two"},
    ]
    assert fs.grep(ctx, "d$", glob="crlf.txt") == [{"path": "crlf.txt", "line": 3, "text": "end"}]
    assert fs.grep(ctx, r"caf. ok$|^\x{fffd}$") == [
        {"path": "bad.txt", "line": 1, "text": "caf\ufffd ok"},
        {"path": "bad.txt", "line": 2, "text": "\ufffd"},
    ]
    assert fs.grep(ctx, "needle") == [{"path": "long.txt", "line": 1, "text": "x" * 1000}]
    assert fs.grep(ctx, "x*", glob="crlf.txt", max_matches=10) == [
        {"path": "crlf.txt", "line": n, "text": t} for n, t in [(1, "one"), (2, "two"), (3, "end")]
    ]


def test_grep_stops_at_max_matches_in_path_order(ctx: CallContext, ws: Path) -> None:
    for d in ("a", "a-b", "a.b", "b"):
        (ws / d).mkdir()
        (ws / d / "f.txt").write_text("hit\nhit\n")
    (ws / "a.txt").write_text("hit\n")
    got = [(m["path"], m["line"]) for m in fs.grep(ctx, "hit", max_matches=4)]
    assert got == [("a-b/f.txt", 1), ("a-b/f.txt", 2), ("a.b/f.txt", 1), ("a.b/f.txt", 2)]
    assert [m["path"] for m in fs.grep(ctx, "hit")] == [
        "a-b/f.txt",
        "a-b/f.txt",
        "a.b/f.txt",
        "a.b/f.txt",
        "a.txt",
        "a/f.txt",
        "a/f.txt",
        "b/f.txt",
        "b/f.txt",
    ]


def _git_tree(ws: Path) -> None:
    files = {
        ".gitignore": "*.log\nbuild/\n/top.txt\n!keep.log\ndocs/*\n!docs/public/\n",
        "a.log": "hit",
        "keep.log": "hit",
        "top.txt": "hit",
        "src/top.txt": "hit",
        "build/out.txt": "hit",
        "src/build/x.txt": "hit",
        "src/main.py": "hit",
        "src/.gitignore": "gen_*\n!keep.log\n*.tmp\n",
        "src/gen_a.py": "hit",
        "src/deep/gen_b.py": "hit",
        "src/deep/keep.log": "hit",
        "src/deep/n.log": "hit",
        "docs/private.md": "hit",
        "docs/public/index.md": "hit",
        "node_modules/m.js": "hit",
        "notes.tmp": "hit",
        "src/notes.tmp": "hit",
        "vendor/lib.py": "hit",
        "vendor/.gitignore": "*\n!*.py\n!.gitignore\n",
        "vendor/x.c": "hit",
    }
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text + "\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".git" / "info" / "exclude").write_text("node_modules/\n")


def test_gitignore_agrees_with_git(ctx: CallContext, ws: Path) -> None:
    _git_tree(ws)
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"],
        cwd=ws,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    expected = sorted(p for p in listed if not any(c.startswith(".") for c in p.split("/")))
    assert [p for p in fs.glob(ctx, "**/*") if (ws / p).is_file()] == expected
    assert sorted({m["path"] for m in fs.grep(ctx, "hit")}) == expected
    everything = [p for p in fs.glob(ctx, "**/*", include_ignored=True) if (ws / p).is_file()]
    assert "build/out.txt" in everything and "node_modules/m.js" in everything
    assert len({m["path"] for m in fs.grep(ctx, "hit", include_ignored=True)}) == len(everything)


def test_gitignore_explicit_paths(ctx: CallContext, ws: Path) -> None:
    _git_tree(ws)
    # a directory named explicitly is searched even though it is ignored...
    assert [m["path"] for m in fs.grep(ctx, "hit", path="build")] == ["build/out.txt"]
    assert [m["path"] for m in fs.grep(ctx, "hit", path="a.log")] == ["a.log"]
    # ...with the rules at and below it; rules above a non-ignored start still apply
    assert [m["path"] for m in fs.grep(ctx, "hit", path="src")] == [
        "src/deep/keep.log",
        "src/main.py",
        "src/top.txt",
    ]
    assert [m["path"] for m in fs.grep(ctx, "hit", path="src/deep")] == ["src/deep/keep.log"]
    assert fs.glob(ctx, "src/deep/*") == ["src/deep/keep.log"]


def test_fs_list_include_ignored(ctx: CallContext, ws: Path) -> None:
    _git_tree(ws)
    names = [e["name"] for e in fs_list(ctx)]
    assert "build" in names and "a.log" in names  # default: a plain listing
    shown = [e["name"] for e in fs_list(ctx, ".", include_ignored=False)]
    assert "build" not in shown and "a.log" not in shown and "keep.log" in shown
    assert [e["name"] for e in fs_list(ctx, "src", include_ignored=False)] == [
        ".gitignore",
        "deep",
        "main.py",
        "top.txt",
    ]


def test_gitignore_symlink_is_not_followed(ctx: CallContext, ws: Path, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("*\n")
    os.symlink(tmp_path / "outside.txt", ws / ".gitignore")
    (ws / "f.txt").write_text("hit\n")
    assert fs.glob(ctx, "*") == ["f.txt"]
    assert fs.grep(ctx, "hit") == [{"path": "f.txt", "line": 1, "text": "hit"}]


def test_glob_details_agree_with_stat(ctx: CallContext, ws: Path, tmp_path: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("12345")
    os.symlink("d/f.txt", ws / "lf")
    os.symlink("d", ws / "ld")
    os.symlink("missing", ws / "dangling")
    os.symlink(tmp_path / "elsewhere", ws / "out")
    got = fs.glob(ctx, "**", details=True)
    assert [g["path"] for g in got] == ["d", "d/f.txt", "dangling", "ld", "lf"]
    for g in got:
        info = fs.stat(ctx, g["path"])
        assert (g["is_dir"], g["size"]) == (info["is_dir"], info["size"])


def test_new_arguments_are_checked(ctx: CallContext) -> None:
    with pytest.raises(BuiltinError, match="fs.grep: include_ignored must be a boolean, got str"):
        fs.grep(ctx, "x", include_ignored="yes")
    with pytest.raises(BuiltinError, match="fs.glob: include_ignored must be a boolean"):
        fs.glob(ctx, "*", include_ignored=1)
    with pytest.raises(BuiltinError, match="fs.glob: details must be a boolean, got NoneType"):
        fs.glob(ctx, "*", details=None)
    with pytest.raises(BuiltinError, match="fs.list: include_ignored must be a boolean"):
        fs_list(ctx, ".", include_ignored=0)


def test_grep_over_many_files_has_no_path_cap(ctx: CallContext, ws: Path) -> None:
    shutil.rmtree(ws)
    ws.mkdir()
    for i in range(300):
        (ws / f"f{i:03}.txt").write_text("" if i < 299 else "last\n")
    assert fs.grep(ctx, "last") == [{"path": "f299.txt", "line": 1, "text": "last"}]


def test_bad_gitignore_lines_are_skipped(ctx: CallContext, ws: Path) -> None:
    """As git does: an invalid line is ignored, the valid ones still apply."""
    (ws / ".gitignore").write_bytes(b"!\n\\\n[z-a]\n[[:foo:]]\na\\\n*.log\n\xff\n")
    (ws / "a.log").write_text("hit\n")
    (ws / "b.txt").write_text("hit\n")
    assert fs.glob(ctx, "*") == ["b.txt"]
    assert fs.grep(ctx, "hit") == [{"path": "b.txt", "line": 1, "text": "hit"}]


def test_changed_gitignore_is_seen_by_the_next_call(ctx: CallContext, ws: Path) -> None:
    """Compiled rules are cached by content: a .gitignore changed between two calls
    takes effect at once."""
    (ws / "a.log").write_text("hit\n")
    (ws / "b.txt").write_text("hit\n")
    (ws / ".gitignore").write_text("*.log\n")
    assert fs.glob(ctx, "*") == ["b.txt"]
    (ws / ".gitignore").write_text("*.txt\n")
    assert fs.glob(ctx, "*") == ["a.log"]
    assert [m["path"] for m in fs.grep(ctx, "hit", order="walk")] == ["a.log"]
    (ws / ".gitignore").write_text("*.log\n")
    assert [m["path"] for m in fs.grep(ctx, "hit")] == ["b.txt"]
