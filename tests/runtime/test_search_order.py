"""fs.grep(order="walk"): the file system's order, the same files and lines, the same jail.

The reference for walk order is the path-order reference (test_search.ref_walk and
ref_grep) with the files put in the order a depth-first walk meets them when every
directory is listed with os.listdir (the order scandir gives on an unchanged
directory): the same work as ``grep -rn | head``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s
from test_search import GLOBS, PATTERNS, grep_tree, ref_grep, ref_walk, trees

from harness.config import Config
from harness.errors import BuiltinError
from harness.runtime import jail as jail_mod
from harness.runtime.builtins import fs
from harness.runtime.context import CallContext


def listdir_order(root: Path, files: list[str]) -> list[str]:
    """``files`` in the order a depth-first walk listing each directory with os.listdir
    meets them (a directory's content right after the directory itself)."""
    listed: dict[Path, dict[str, int]] = {}

    def key(rel: str) -> tuple[int, ...]:
        out = []
        here = root
        for comp in rel.split("/"):
            if here not in listed:
                listed[here] = {n: i for i, n in enumerate(os.listdir(here))}
            out.append(listed[here][comp])
            here = here / comp
        return tuple(out)

    return sorted(files, key=key)


def _runs(found: list[dict[str, object]]) -> list[str]:
    """The files of ``found`` in order, one item per run of consecutive matches."""
    out: list[str] = []
    for m in found:
        if not out or out[-1] != m["path"]:
            out.append(str(m["path"]))
    return out


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
    portable=s.booleans(),
)
def test_walk_order_against_path_order(
    files: dict[str, bytes | str], pattern: str, glob: str, limit: int, sub: str, portable: bool
) -> None:
    with grep_tree(files, sub, portable) as made:
        if made is None:
            return
        root, ctx, jail = made
        if not (root / sub).exists():
            with pytest.raises(BuiltinError, match="does not exist|not a directory"):
                fs.grep(ctx, pattern, path=sub, order="walk")
            return
        walked = fs.grep(ctx, pattern, path=sub, glob=glob, max_matches=limit, order="walk")
        full = fs.grep(ctx, pattern, path=sub, glob=glob, max_matches=10000)
        if not (root / sub).is_dir():  # one file: both orders are the file's lines
            assert walked == full[:limit]
            return
        # exactly the reference, files in the order the directories list them
        base = "" if sub == "." else sub
        parts = [p for p in glob.split("/") if p not in ("", ".")]
        found = [p for p, k in ref_walk(jail, root, base, parts) if k == "file"]
        assert full == ref_grep(root, sorted(found), pattern, 10000)
        assert walked == ref_grep(root, listdir_order(root, found), pattern, limit)
        # and the properties the order promises, whatever the file system's order
        assert len(walked) == min(limit, len(full))
        assert all(m in full for m in walked)
        runs = _runs(walked)
        assert len(runs) == len(set(runs))  # each file's lines contiguous
        for path in runs:
            mine = [m for m in walked if m["path"] == path]
            every = [m for m in full if m["path"] == path]
            # ascending lines; every file complete but maybe the last, cut at the limit
            assert mine == (every if path != runs[-1] else every[: len(mine)])
        if limit >= len(full):  # a permutation of the path-order result
            assert sorted(walked, key=lambda m: (m["path"], m["line"])) == full


@pytest.fixture
def ws(tmp_path: Path):  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    yield ws
    jail_mod.clear_jails()


@pytest.fixture
def ctx(ws: Path) -> CallContext:
    return CallContext(config=Config(root=ws, workspace=ws))


def test_walk_order_keeps_the_jail(ctx: CallContext, ws: Path, tmp_path: Path) -> None:
    """Symlinked directories and files, sensitive files, .harness/, .gitignore (nested,
    negated, .git/info/exclude): walk order skips exactly what path order skips."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("hit outside\n")
    files = {
        "ok.txt": "hit\n",
        "src/a.py": "hit\nhit\n",
        "src/deep/b.py": "x\nhit\n",
        ".env": "hit=1\n",
        "src/id_rsa": "hit\n",
        "keys/server.pem": "hit\n",
        ".harness/tools/t.md": "hit\n",
        ".hidden/f.txt": "hit\n",
        ".gitignore": "build/\n*.log\n!keep.log\n",
        "build/out.txt": "hit\n",
        "debug.log": "hit\n",
        "keep.log": "hit\n",
        "src/.gitignore": "gen_*\n",
        "src/gen_x.py": "hit\n",
        "node_modules/m.js": "hit\n",
    }
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".git" / "info" / "exclude").write_text("node_modules/\n")
    os.symlink(outside, ws / "linkdir")
    os.symlink(outside / "secret.txt", ws / "linkfile")
    os.symlink("ok.txt", ws / "inside_link")  # a symlink to a file is not searched
    expected = {"ok.txt", "src/a.py", "src/deep/b.py", "keep.log"}
    for order in ("path", "walk"):
        got = fs.grep(ctx, "hit", max_matches=10000, order=order)
        assert {m["path"] for m in got} == expected, order
        assert all("outside" not in m["text"] for m in got)
        everything = {
            m["path"]
            for m in fs.grep(ctx, "hit", max_matches=10000, order=order, include_ignored=True)
        }
        assert everything == expected | {
            "build/out.txt",
            "debug.log",
            "src/gen_x.py",
            "node_modules/m.js",
        }, order
        # named explicitly: an ignored directory is searched, a protected one refused
        assert [m["path"] for m in fs.grep(ctx, "hit", path="build", order=order)] == [
            "build/out.txt"
        ]
        with pytest.raises(BuiltinError, match='path ".harness" is protected'):
            fs.grep(ctx, "hit", path=".harness", order=order)
        assert fs.grep(ctx, "hit", glob="**/.*", order=order) == []
        assert fs.grep(ctx, "hit", glob=".harness/**/*", order=order) == []
    with pytest.raises(BuiltinError, match='path "linkdir" .*outside the workspace'):
        fs.grep(ctx, "hit", path="linkdir", order="walk")


def test_walk_order_stops_reading_at_max_matches(ctx: CallContext, ws: Path) -> None:
    """No file after the one holding the last match is opened (the work of grep | head)."""
    for i in range(20):
        (ws / f"f{i:02}.txt").write_text("hit\nhit\n")
    order = os.listdir(ws)
    opened: list[str] = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *, dir_fd=None):  # type: ignore[no-untyped-def]
        if isinstance(path, str) and path.endswith(".txt"):
            opened.append(path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    os.open = spy  # type: ignore[assignment]
    try:
        got = fs.grep(ctx, "hit", max_matches=3, order="walk")
    finally:
        os.open = real_open  # type: ignore[assignment]
    assert [(m["path"], m["line"]) for m in got] == [(order[0], 1), (order[0], 2), (order[1], 1)]
    assert opened == order[:2]
    opened.clear()
    os.open = spy  # type: ignore[assignment]
    try:
        fs.grep(ctx, "hit", max_matches=3)
    finally:
        os.open = real_open  # type: ignore[assignment]
    assert opened == sorted(order)[:2]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "sorted",
            'fs.grep: order must be "path" (sorted by path, the default) or "walk" '
            '(the file system\'s order, stops reading sooner), got "sorted"',
        ),
        ("", 'order must be "path" .* or "walk" .*, got ""'),
        ("PATH", 'got "PATH"'),
        (1, "fs.grep: order must be a string, got int"),
        (None, "fs.grep: order must be a string, got NoneType"),
    ],
)
def test_bad_order_is_a_clear_error(
    ctx: CallContext, ws: Path, value: object, message: str
) -> None:
    (ws / "f.txt").write_text("hit\n")
    with pytest.raises(BuiltinError, match=message if value != "sorted" else None) as info:
        fs.grep(ctx, "hit", order=value)
    if value == "sorted":
        assert str(info.value) == message
    # the process keeps working: the next call answers
    assert fs.grep(ctx, "hit", order="walk") == [{"path": "f.txt", "line": 1, "text": "hit"}]
