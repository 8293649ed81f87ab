"""fs.* built-ins: signatures, return shapes, fs.edit's four levels, RE2, concurrency."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config import Config, Limits
from harness.errors import BuiltinError
from harness.runtime import jail as jail_mod
from harness.runtime.builtins import fs
from harness.runtime.context import CallContext
from harness.surface import TOOL_MODULES

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


def test_every_surface_name_is_implemented() -> None:
    from harness.runtime.builtins import fs_lines

    assert sorted({**fs.FUNCTIONS, **fs_lines.FUNCTIONS}) == sorted(
        f"fs.{n}" for n in TOOL_MODULES["fs"]
    )


# ------------------------------------------------------------------- read/write


def test_read_write_roundtrip(ctx: CallContext, ws: Path) -> None:
    assert fs.write(ctx, "a/b/c.txt", "héllo\n") == {"path": "a/b/c.txt", "bytes": 7}
    assert (ws / "a" / "b" / "c.txt").read_text() == "héllo\n"
    assert fs.read(ctx, "a/b/c.txt") == "héllo\n"
    assert fs.read(ctx, "./a//b/../b/c.txt") == "héllo\n"
    assert fs.write(ctx, "./a/./b/c.txt", "x")["path"] == "a/b/c.txt"


def test_read_replaces_invalid_utf8(ctx: CallContext, ws: Path) -> None:
    (ws / "bin.dat").write_bytes(b"ok \xff\xfe end")
    assert fs.read(ctx, "bin.dat") == "ok \ufffd\ufffd end"


def test_read_max_bytes(ctx: CallContext, ws: Path) -> None:
    (ws / "f.txt").write_text("aé" * 10)  # é is 2 bytes
    assert fs.read(ctx, "f.txt", max_bytes=3) == "aé"
    assert fs.read(ctx, "f.txt", max_bytes=2) == "a"  # cut inside é: no U+FFFD
    assert fs.read(ctx, "f.txt", max_bytes=0) == ""
    assert fs.read(ctx, "f.txt", max_bytes=1000) == "aé" * 10


def test_read_cap_follows_memory_limit(ws: Path) -> None:
    ctx = CallContext(config=Config(root=ws, workspace=ws, limits=Limits(memory_mb=16)))
    (ws / "big.txt").write_bytes(b"x" * (1024 * 1024 + 1))  # cap = 16 MiB / 16 = 1 MiB
    with pytest.raises(BuiltinError, match="more than the limit of 1048576; pass max_bytes"):
        fs.read(ctx, "big.txt")
    assert len(fs.read(ctx, "big.txt", max_bytes=10)) == 10
    with pytest.raises(BuiltinError, match="max_bytes must be between 0 and 1048576"):
        fs.read(ctx, "big.txt", max_bytes=1024 * 1024 + 1)
    with pytest.raises(BuiltinError, match="content is 1048577 bytes, more than the limit"):
        fs.write(ctx, "w.txt", "x" * (1024 * 1024 + 1))


def test_read_errors(ctx: CallContext, ws: Path) -> None:
    (ws / "d").mkdir()
    with pytest.raises(BuiltinError, match='fs.read: path "nope.txt" does not exist'):
        fs.read(ctx, "nope.txt")
    with pytest.raises(BuiltinError, match='path "d" is a directory; use fs.list'):
        fs.read(ctx, "d")
    (ws / "file").write_text("x")
    with pytest.raises(BuiltinError, match='a parent of "file/x" is not a directory'):
        fs.read(ctx, "file/x")


def test_write_replaces_atomically_and_keeps_mode(ctx: CallContext, ws: Path) -> None:
    (ws / "run.sh").write_text("old")
    os.chmod(ws / "run.sh", 0o750)
    ino = os.stat(ws / "run.sh").st_ino
    assert fs.write(ctx, "run.sh", "new") == {"path": "run.sh", "bytes": 3}
    assert (ws / "run.sh").read_text() == "new"
    assert os.stat(ws / "run.sh").st_mode & 0o777 == 0o750
    assert os.stat(ws / "run.sh").st_ino != ino  # a new file was renamed over it
    assert sorted(os.listdir(ws)) == ["run.sh"]


def test_write_onto_directory_fails(ctx: CallContext, ws: Path) -> None:
    (ws / "d").mkdir()
    with pytest.raises(BuiltinError, match='fs.write: path "d" is a directory'):
        fs.write(ctx, "d", "x")
    with pytest.raises(BuiltinError, match="workspace directory"):
        fs.write(ctx, ".", "x")


@pytest.mark.parametrize("tmpfile", ["O_TMPFILE", "named"])
def test_failed_write_leaves_nothing(
    ctx: CallContext, ws: Path, tmpfile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "keep.txt").write_text("original")
    if tmpfile == "named":
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fs.os, "fsync", broken_fsync)
    with pytest.raises(BuiltinError, match='fs.write: no space left to write "keep.txt"'):
        fs.write(ctx, "keep.txt", "new content")
    with pytest.raises(BuiltinError, match="no space left"):
        fs.write(ctx, "fresh.txt", "new content")
    monkeypatch.undo()
    assert (ws / "keep.txt").read_text() == "original"
    assert sorted(os.listdir(ws)) == ["keep.txt"]


def test_append(ctx: CallContext, ws: Path) -> None:
    assert fs.append(ctx, "log/a.log", "one\n") == {"path": "log/a.log", "bytes": 4}
    assert fs.append(ctx, "log/a.log", "twö\n") == {"path": "log/a.log", "bytes": 5}
    assert (ws / "log" / "a.log").read_text() == "one\ntwö\n"


# -------------------------------------------------------------------------- edit


def test_edit_exact(ctx: CallContext, ws: Path) -> None:
    (ws / "f.py").write_text("a = 1\nb = 2\n")
    assert fs.edit(ctx, "f.py", "b = 2", "b = 3") == {"path": "f.py", "strategy": "exact"}
    assert (ws / "f.py").read_text() == "a = 1\nb = 3\n"


def test_edit_line_endings_normalized_keeps_crlf(ctx: CallContext, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    got = fs.edit(ctx, "w.txt", "one\ntwo\n", "uno\ndos\n")
    assert got == {"path": "w.txt", "strategy": "line_endings"}
    assert (ws / "w.txt").read_bytes() == b"uno\r\ndos\r\nthree\r\n"


def test_edit_exact_in_crlf_file_converts_new_lines(ctx: CallContext, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"a\r\nb\r\n")
    assert fs.edit(ctx, "w.txt", "b", "b\nc")["strategy"] == "exact"
    assert (ws / "w.txt").read_bytes() == b"a\r\nb\r\nc\r\n"


def test_edit_trimmed(ctx: CallContext, ws: Path) -> None:
    (ws / "f.txt").write_text("alpha\nbeta\ngamma\n")
    got = fs.edit(ctx, "f.txt", "\n\nbeta  \n", "\n\nBETA  \n")
    assert got["strategy"] == "trimmed"
    assert (ws / "f.txt").read_text() == "alpha\nBETA\ngamma\n"


def test_edit_indentation_insensitive(ctx: CallContext, ws: Path) -> None:
    src = textwrap.dedent("""\
        class A:
            def f(self):
                if x:
                    return 1
                return 2
        """)
    (ws / "a.py").write_text(src)
    old = "if x:\n    return 1\nreturn 2"  # the model lost the indentation
    new = "if x:\n    return 10\nelse:\n    return 20"
    assert fs.edit(ctx, "a.py", old, new) == {"path": "a.py", "strategy": "indentation"}
    assert (ws / "a.py").read_text() == textwrap.dedent("""\
        class A:
            def f(self):
                if x:
                    return 10
                else:
                    return 20
        """)


def test_edit_indentation_in_crlf_file(ctx: CallContext, ws: Path) -> None:
    (ws / "a.txt").write_bytes(b"top\r\n    x = 1\r\n    y = 2\r\nend\r\n")
    assert fs.edit(ctx, "a.txt", "x = 1\ny = 2", "x = 3\ny = 4")["strategy"] == "indentation"
    assert (ws / "a.txt").read_bytes() == b"top\r\n    x = 3\r\n    y = 4\r\nend\r\n"


def test_edit_indentation_delete_lines(ctx: CallContext, ws: Path) -> None:
    (ws / "a.txt").write_text("a\n  b\n  c\nd\n")
    assert fs.edit(ctx, "a.txt", "b\nc", "")["strategy"] == "indentation"
    assert (ws / "a.txt").read_text() == "a\nd\n"


@pytest.mark.parametrize(
    "content,old,level",
    [
        ("x = 1\ny = 2\nx = 1\n", "x = 1", "exact"),
        ("aaa", "aa", "exact"),  # overlapping occurrences count
        ("a\r\nb\r\na\r\nb\r\n", "a\nb", "line-ending-normalized"),
        ("foo\nbar\nfoo\n", "  foo  ", "trimmed"),
        ("  foo\n  bar\n    foo\n    bar\n", "foo\nbar\n", "indentation-insensitive"),
    ],
)
def test_edit_ambiguous(ctx: CallContext, ws: Path, content: str, old: str, level: str) -> None:
    (ws / "f.txt").write_bytes(content.encode())
    with pytest.raises(BuiltinError) as info:
        fs.edit(ctx, "f.txt", old, "NEW")
    msg = str(info.value)
    assert f'matches more than one place in "f.txt" ({level} match' in msg
    assert "include more surrounding lines" in msg
    assert (ws / "f.txt").read_bytes() == content.encode()


def test_edit_not_found_and_bad_args(ctx: CallContext, ws: Path) -> None:
    (ws / "f.txt").write_text("abc\n")
    with pytest.raises(BuiltinError, match='old text not found in "f.txt" \\(tried exact'):
        fs.edit(ctx, "f.txt", "xyz", "q")
    with pytest.raises(BuiltinError, match="old must not be empty"):
        fs.edit(ctx, "f.txt", "", "q")
    with pytest.raises(BuiltinError, match="old and new are the same"):
        fs.edit(ctx, "f.txt", "abc", "abc")
    with pytest.raises(BuiltinError, match='fs.edit: path "nope" does not exist'):
        fs.edit(ctx, "nope", "a", "b")
    assert (ws / "f.txt").read_text() == "abc\n"


def test_edit_keeps_invalid_utf8_bytes(ctx: CallContext, ws: Path) -> None:
    (ws / "f.bin").write_bytes(b"\xff\xfe marker \x80\n")
    fs.edit(ctx, "f.bin", "marker", "MARK")
    assert (ws / "f.bin").read_bytes() == b"\xff\xfe MARK \x80\n"


# ------------------------------------------------------------------ metadata


def test_exists_and_stat(ctx: CallContext, ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("12345")
    os.symlink("d/f.txt", ws / "link")
    os.symlink("missing", ws / "dangling")
    assert fs.exists(ctx, "d/f.txt") is True
    assert fs.exists(ctx, "d") is True
    assert fs.exists(ctx, ".") is True
    assert fs.exists(ctx, "nope") is False
    assert fs.exists(ctx, "nope/deeper") is False
    assert fs.exists(ctx, "dangling") is False
    st = fs.stat(ctx, "d/f.txt")
    assert set(st) == {"name", "size", "is_dir", "is_symlink", "mtime"}
    assert (st["name"], st["size"], st["is_dir"], st["is_symlink"]) == ("f.txt", 5, False, False)
    assert isinstance(st["mtime"], float) and abs(st["mtime"] - time.time()) < 3600
    assert fs.stat(ctx, "d")["is_dir"] is True
    assert fs.stat(ctx, "link") | {"mtime": 0} == {
        "name": "link",
        "size": 5,
        "is_dir": False,
        "is_symlink": True,
        "mtime": 0,
    }
    assert fs.stat(ctx, "dangling")["is_symlink"] is True
    assert fs.stat(ctx, ".")["name"] == "."
    with pytest.raises(BuiltinError, match='fs.stat: path "nope" does not exist'):
        fs.stat(ctx, "nope")


def test_list(ctx: CallContext, ws: Path) -> None:
    (ws / "b.txt").write_text("bb")
    (ws / "a").mkdir()
    (ws / ".hidden").write_text("h")
    os.symlink("a", ws / "c")
    assert fs_list(ctx) == [
        {"name": ".hidden", "is_dir": False, "size": 1},
        {"name": "a", "is_dir": True, "size": os.stat(ws / "a").st_size},
        {"name": "b.txt", "is_dir": False, "size": 2},
        {"name": "c", "is_dir": True, "size": os.stat(ws / "a").st_size},
    ]
    assert fs_list(ctx, "a") == []
    with pytest.raises(BuiltinError, match="not a directory"):
        fs_list(ctx, "b.txt")


def test_glob(ctx: CallContext, ws: Path) -> None:
    for rel in [
        "src/a.py",
        "src/pkg/b.py",
        "src/pkg/c.txt",
        "top.py",
        ".cfg/x.py",
        "src/.hid/y.py",
    ]:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("x")
    assert fs.glob(ctx, "*.py") == ["top.py"]
    assert fs.glob(ctx, "**/*.py") == ["src/a.py", "src/pkg/b.py", "top.py"]
    assert fs.glob(ctx, "src/**/*.py") == ["src/a.py", "src/pkg/b.py"]
    assert fs.glob(ctx, "src/*") == ["src/a.py", "src/pkg"]
    assert (
        fs.glob(ctx, "src/**")
        == ["src", "src/a.py", "src/pkg", "src/pkg/b.py", "src/pkg/c.txt"][1:]
    )
    assert fs.glob(ctx, ".cfg/*.py") == [".cfg/x.py"]
    assert fs.glob(ctx, "src/.*/*.py") == ["src/.hid/y.py"]
    assert fs.glob(ctx, "src/pkg/?.py") == ["src/pkg/b.py"]
    assert fs.glob(ctx, "src/pkg/[bc].*") == ["src/pkg/b.py", "src/pkg/c.txt"]
    assert fs.glob(ctx, str(ws / "src" / "*.py")) == ["src/a.py"]
    assert fs.glob(ctx, "nothing/**/*") == []
    assert fs.glob(ctx, "**/**/*.py") == ["src/a.py", "src/pkg/b.py", "top.py"]


def test_glob_does_not_follow_symlinked_dirs(ctx: CallContext, ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "real" / "f.py").write_text("x")
    os.symlink("real", ws / "alias")
    os.symlink(".", ws / "real" / "loop")  # a cycle: must terminate
    assert fs.glob(ctx, "**/*.py") == ["real/f.py"]
    assert "alias" in fs.glob(ctx, "*")


def test_glob_errors(ctx: CallContext) -> None:
    with pytest.raises(BuiltinError, match='path "../\\*" is outside the workspace'):
        fs.glob(ctx, "../*")
    with pytest.raises(BuiltinError, match='path "a/../../\\*" is outside'):
        fs.glob(ctx, "a/../../*")
    with pytest.raises(BuiltinError, match='path "/etc/\\*" is outside'):
        fs.glob(ctx, "/etc/*")
    with pytest.raises(BuiltinError, match="pattern must be a string, got int"):
        fs.glob(ctx, 3)
    with pytest.raises(BuiltinError, match="pattern is empty"):
        fs.glob(ctx, "")


def test_grep(ctx: CallContext, ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("import os\nx = 1\r\nimport re\n")
    (ws / "src" / "b.txt").write_text("import nothing\n")
    (ws / "src" / "bin.dat").write_bytes(b"import \x00 binary\n")
    (ws / "top.py").write_text("import sys\n")
    got = fs.grep(ctx, r"^import \w+$")
    assert got == [
        {"path": "src/a.py", "line": 1, "text": "import os"},
        {"path": "src/a.py", "line": 3, "text": "import re"},
        {"path": "src/b.txt", "line": 1, "text": "import nothing"},
        {"path": "top.py", "line": 1, "text": "import sys"},
    ]
    assert fs.grep(ctx, "x = 1$") == [{"path": "src/a.py", "line": 2, "text": "x = 1"}]
    assert [m["path"] for m in fs.grep(ctx, "import", glob="**/*.py")] == [
        "src/a.py",
        "src/a.py",
        "top.py",
    ]
    assert [m["path"] for m in fs.grep(ctx, "import", path="src", glob="*.py")] == [
        "src/a.py",
        "src/a.py",
    ]
    assert fs.grep(ctx, "import", path="top.py") == [
        {"path": "top.py", "line": 1, "text": "import sys"}
    ]
    assert len(fs.grep(ctx, "import", max_matches=2)) == 2
    assert fs.grep(ctx, "(?i)IMPORT SYS") == [{"path": "top.py", "line": 1, "text": "import sys"}]


def test_grep_rejects_backreferences_and_lookaround(ctx: CallContext) -> None:
    with pytest.raises(BuiltinError, match=r'invalid RE2 pattern "\(a\)\\1".*no backreferences'):
        fs.grep(ctx, r"(a)\1")
    with pytest.raises(BuiltinError, match="invalid RE2 pattern"):
        fs.grep(ctx, r"foo(?=bar)")


def test_grep_is_linear_on_hostile_pattern(ctx: CallContext, ws: Path) -> None:
    (ws / "a.txt").write_text("a" * 5000 + "!\n")
    assert fs.grep(ctx, "(a+)+$") == []  # catastrophic for backtracking engines


def test_grep_bad_args(ctx: CallContext) -> None:
    with pytest.raises(BuiltinError, match="max_matches must be between 1 and 10000, got 0"):
        fs.grep(ctx, "x", max_matches=0)
    with pytest.raises(BuiltinError, match="max_matches must be an integer, got bool"):
        fs.grep(ctx, "x", max_matches=True)
    with pytest.raises(BuiltinError, match="glob must be a string, got list"):
        fs.grep(ctx, "x", glob=["*"])


def test_mkdir_and_remove(ctx: CallContext, ws: Path) -> None:
    assert fs.mkdir(ctx, "a/b/c") == {"path": "a/b/c"}
    assert fs.mkdir(ctx, "a/b/c") == {"path": "a/b/c"}  # idempotent
    (ws / "a" / "f.txt").write_text("x")
    with pytest.raises(BuiltinError, match='path "a/f.txt" exists and is not a directory'):
        fs.mkdir(ctx, "a/f.txt")
    with pytest.raises(BuiltinError, match='path "a" is a directory; pass recursive=True'):
        fs.remove(ctx, "a")
    assert fs.remove(ctx, "a/f.txt") == {"path": "a/f.txt"}
    assert not (ws / "a" / "f.txt").exists()
    os.symlink("a", ws / "link")
    assert fs.remove(ctx, "link") == {"path": "link"}  # the link, not its target
    assert (ws / "a" / "b" / "c").is_dir()
    assert fs.remove(ctx, "a", recursive=True) == {"path": "a"}
    assert os.listdir(ws) == []
    with pytest.raises(BuiltinError, match='fs.remove: path "a" does not exist'):
        fs.remove(ctx, "a")
    with pytest.raises(BuiltinError, match="recursive must be a boolean, got int"):
        fs.remove(ctx, "a", recursive=1)


def test_remove_recursive_does_not_follow_links(ctx: CallContext, ws: Path, tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep.txt").write_text("keep")
    (ws / "d").mkdir()
    os.symlink(tmp_path / "outside", ws / "d" / "out")
    fs.remove(ctx, "d", recursive=True)
    assert (tmp_path / "outside" / "keep.txt").read_text() == "keep"


# ------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "name,args,kwargs,message",
    [
        ("fs.read", (1,), {}, "fs.read: path must be a string, got int"),
        ("fs.read", ("f",), {"max_bytes": "3"}, "fs.read: max_bytes must be an integer, got str"),
        ("fs.read", ("f",), {"max_bytes": -1}, "fs.read: max_bytes must be between 0"),
        ("fs.read", (), {}, "fs.read: missing 1 required positional argument: 'path'"),
        ("fs.read", ("f",), {"bogus": 1}, "fs.read: got an unexpected keyword argument 'bogus'"),
        ("fs.write", ("f", None), {}, "fs.write: content must be a string, got NoneType"),
        ("fs.write", ("f", b"x"), {}, "fs.write: content must be a string, got bytes"),
        ("fs.append", (["f"], "x"), {}, "fs.append: path must be a string, got list"),
        ("fs.edit", ("f", 1, "x"), {}, "fs.edit: old must be a string, got int"),
        ("fs.edit", ("f", "x", None), {}, "fs.edit: new must be a string, got NoneType"),
        ("fs.exists", (None,), {}, "fs.exists: path must be a string, got NoneType"),
        ("fs.stat", ({},), {}, "fs.stat: path must be a string, got dict"),
        ("fs.list", (1.5,), {}, "fs.list: path must be a string, got float"),
        ("fs.glob", (None,), {}, "fs.glob: pattern must be a string, got NoneType"),
        ("fs.grep", (1,), {}, "fs.grep: pattern must be a string, got int"),
        ("fs.grep", ("x",), {"path": 2}, "fs.grep: path must be a string, got int"),
        ("fs.mkdir", (True,), {}, "fs.mkdir: path must be a string, got bool"),
        ("fs.remove", (3,), {}, "fs.remove: path must be a string, got int"),
        ("fs.read", ("",), {}, 'path is empty; use "." for the workspace itself'),
    ],
)
def test_bad_arguments(
    ctx: CallContext, ws: Path, name: str, args: tuple, kwargs: dict, message: str
) -> None:
    (ws / "f").write_text("abc")
    with pytest.raises(BuiltinError) as info:
        fs.FUNCTIONS[name](ctx, *args, **kwargs)
    assert message in str(info.value)


def test_no_descriptor_leak(ctx: CallContext, ws: Path) -> None:
    fs.write(ctx, "warm.txt", "x")
    before = len(os.listdir("/proc/self/fd"))
    for i in range(30):
        fs.write(ctx, f"d/f{i}.txt", "a\n")
        fs.append(ctx, f"d/f{i}.txt", "b\n")
        fs.edit(ctx, f"d/f{i}.txt", "b", "c")
        fs.read(ctx, f"d/f{i}.txt")
        fs.stat(ctx, f"d/f{i}.txt")
        fs.glob(ctx, "**/*")
        fs.grep(ctx, "c")
        fs_list(ctx, "d")
        for bad in ("../x", ".harness/x", "nope/x"):
            with pytest.raises(BuiltinError):
                fs.read(ctx, bad)
    fs.remove(ctx, "d", recursive=True)
    assert len(os.listdir("/proc/self/fd")) == before


# ----------------------------------------------------------------- concurrency


def _slots(n: int) -> str:
    return "".join(f"slot-{i}: [0]\n" for i in range(n))


def test_threads_edit_and_append_without_lost_updates(ctx: CallContext, ws: Path) -> None:
    threads, rounds = 50, 4
    (ws / "shared.txt").write_text(_slots(threads))
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for k in range(rounds):
                fs.edit(ctx, "shared.txt", f"slot-{t}: [{k}]", f"slot-{t}: [{k + 1}]")
                fs.append(ctx, "shared.txt", f"log-{t}-{k}\n")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert errors == []
    lines = (ws / "shared.txt").read_text().splitlines()
    assert sorted(x for x in lines if x.startswith("slot-")) == sorted(
        f"slot-{t}: [{rounds}]" for t in range(threads)
    )
    assert sorted(x for x in lines if x.startswith("log-")) == sorted(
        f"log-{t}-{k}" for t in range(threads) for k in range(rounds)
    )


_WORKER = """
import sys
from pathlib import Path
from harness.config import Config
from harness.runtime.builtins import fs
from harness.runtime.context import CallContext
ws, proc, rounds, slots = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ctx = CallContext(config=Config(root=ws, workspace=ws))
for k in range(rounds):
    for s in range(proc, slots, 4):
        fs.edit(ctx, "shared.txt", f"slot-{s}: [{k}]", f"slot-{s}: [{k + 1}]")
    fs.append(ctx, "shared.txt", f"log-{proc}-{k}\\n")
"""


def test_processes_edit_and_append_without_lost_updates(ctx: CallContext, ws: Path) -> None:
    procs, rounds, slots = 4, 10, 16
    (ws / "shared.txt").write_text(_slots(slots))
    children = [
        subprocess.Popen([sys.executable, "-c", _WORKER, str(ws), str(p), str(rounds), str(slots)])
        for p in range(procs)
    ]
    # this process edits too, under the same lock
    for k in range(rounds):
        fs.append(ctx, "shared.txt", f"log-main-{k}\n")
    assert [c.wait(timeout=120) for c in children] == [0] * procs
    lines = (ws / "shared.txt").read_text().splitlines()
    assert sorted(x for x in lines if x.startswith("slot-")) == sorted(
        f"slot-{s}: [{rounds}]" for s in range(slots)
    )
    assert sorted(x for x in lines if x.startswith("log-")) == sorted(
        [f"log-{p}-{k}" for p in range(procs) for k in range(rounds)]
        + [f"log-main-{k}" for k in range(rounds)]
    )


def test_readers_never_see_a_half_written_file(ctx: CallContext, ws: Path) -> None:
    size = 256 * 1024
    fs.write(ctx, "big.txt", "A" * size)
    stop = threading.Event()
    seen: set[tuple[str, int]] = set()

    def reader() -> None:
        while not stop.is_set():
            text = fs.read(ctx, "big.txt")
            seen.add((text[0], len(text)))
            assert text in ("A" * size, "B" * size)

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for r in readers:
        r.start()
    try:
        for i in range(60):
            fs.write(ctx, "big.txt", ("B" if i % 2 == 0 else "A") * size)
    finally:
        stop.set()
        for r in readers:
            r.join()
    assert seen <= {("A", size), ("B", size)}


def test_lock_wait_honours_the_deadline(ws: Path) -> None:
    (ws / "f.txt").write_text("a\n")
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process/call holds the edit lock
        ctx = CallContext(config=Config(root=ws, workspace=ws), deadline=time.monotonic() + 0.2)
        with pytest.raises(BuiltinError, match="timed out waiting for another call writing"):
            fs.edit(ctx, "f.txt", "a", "b")
    finally:
        os.close(fd)
    assert (ws / "f.txt").read_text() == "a\n"
    fs.edit(CallContext(config=Config(root=ws, workspace=ws)), "f.txt", "a", "b")
    assert (ws / "f.txt").read_text() == "b\n"


def test_write_into_a_directory_removed_meanwhile(ctx: CallContext, ws: Path) -> None:
    (ws / "d").mkdir()
    with jail_mod.get_jail(ctx.config, use_openat2=fs.USE_OPENAT2).locate(
        "d/f.txt", write=True
    ) as loc:
        os.rmdir(ws / "d")
        with pytest.raises(FileNotFoundError):
            fs._replace("fs.write", loc, b"x")
