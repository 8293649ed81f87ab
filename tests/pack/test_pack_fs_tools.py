"""The starter pack's file tools, called through `harness call` on a temporary workspace."""

from __future__ import annotations

from pathlib import Path

from pack_helpers import call, err, ok

# -- read_file ---------------------------------------------------------------------------


def test_read_file_whole_and_ranges(ws: Path) -> None:
    (ws / "ten.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    whole = ok(ws, "read_file", {"path": "ten.txt"})
    assert whole == {
        "path": "ten.txt",
        "content": "\n".join(f"line {i}" for i in range(1, 11)),
        "start_line": 1,
        "end_line": 10,
        "total_lines": 10,
        "truncated": False,
        "next_offset": None,
    }
    page = ok(ws, "read_file", {"path": "ten.txt", "offset": 3, "limit": 2})
    assert (page["content"], page["start_line"], page["end_line"], page["next_offset"]) == (
        "line 3\nline 4",
        3,
        4,
        5,
    )
    span = ok(ws, "read_file", {"path": "ten.txt", "start_line": 9, "end_line": 10})
    assert span["content"] == "line 9\nline 10" and span["next_offset"] is None
    head = ok(ws, "read_file", {"path": "ten.txt", "end_line": 2})
    assert head["content"] == "line 1\nline 2" and head["next_offset"] == 3


def test_read_file_refusals(ws: Path) -> None:
    (ws / "f.txt").write_text("a\nb\n")
    assert err(ws, "read_file", {"path": "f.txt", "offset": 1, "end_line": 2}) == (
        "use either offset/limit or start_line/end_line, not both"
    )
    assert err(ws, "read_file", {"path": "f.txt", "offset": 5}) == (
        'line 5 is past the end of "f.txt", which has 2 lines'
    )
    assert "end_line 1 is before start_line 2" in err(
        ws, "read_file", {"path": "f.txt", "start_line": 2, "end_line": 1}
    )
    assert '"src" is a directory' in err(ws, "read_file", {"path": "src"})
    assert "$.offset" in err(ws, "read_file", {"path": "f.txt", "offset": 0})
    assert '"path" is a required property' in err(ws, "read_file", {})
    assert "outside the workspace" in err(ws, "read_file", {"path": "../outside.txt"})
    assert "outside the workspace" in err(ws, "read_file", {"path": "/etc/passwd"})
    assert "protected" in err(ws, "read_file", {"path": ".harness/tools/git.md"})
    (ws / ".env").write_text("TOKEN=x\n")
    assert "sensitive" in err(ws, "read_file", {"path": ".env"})


def test_read_file_empty_long_and_huge_lines(ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    assert ok(ws, "read_file", {"path": "empty.txt"}) == {
        "path": "empty.txt",
        "content": "",
        "start_line": 0,
        "end_line": 0,
        "total_lines": 0,
        "truncated": False,
        "next_offset": None,
    }
    (ws / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 2501)))
    first = ok(ws, "read_file", {"path": "long.txt"})
    assert (first["end_line"], first["total_lines"], first["next_offset"]) == (2000, 2500, 2001)
    assert first["truncated"] is False
    # 100 lines of 1000 characters: the 50 000-character budget stops at a line boundary.
    (ws / "wide.txt").write_text(("x" * 999 + "\n") * 100)
    wide = ok(ws, "read_file", {"path": "wide.txt"})
    assert wide["truncated"] is True
    assert wide["end_line"] == 50 and wide["next_offset"] == 51
    assert len(wide["content"]) < 50000


# -- write_file --------------------------------------------------------------------------


def test_write_file_creates_and_overwrites(ws: Path) -> None:
    assert ok(ws, "write_file", {"path": "a/b/new.txt", "content": "héllo\n"}) == {
        "path": "a/b/new.txt",
        "bytes": 7,
        "created": True,
    }
    assert (ws / "a" / "b" / "new.txt").read_text() == "héllo\n"
    assert ok(ws, "write_file", {"path": "a/b/new.txt", "content": ""})["created"] is False
    assert (ws / "a" / "b" / "new.txt").read_text() == ""


def test_write_file_refusals(ws: Path) -> None:
    original = (ws / "harness.md").read_text()
    assert "protected" in err(ws, "write_file", {"path": "harness.md", "content": "x"})
    assert (ws / "harness.md").read_text() == original
    assert "protected" in err(
        ws, "write_file", {"path": ".harness/tools/evil.md", "content": "---\n---\n"}
    )
    assert not (ws / ".harness" / "tools" / "evil.md").exists()
    assert "outside the workspace" in err(ws, "write_file", {"path": "../x.txt", "content": "x"})
    assert not (ws.parent / "x.txt").exists()
    assert "sensitive" in err(ws, "write_file", {"path": "keys/id_rsa", "content": "x"})
    assert '"src" is a directory' in err(ws, "write_file", {"path": "src", "content": "x"})
    assert '"content" is a required property' in err(ws, "write_file", {"path": "y.txt"})


# -- edit_file ---------------------------------------------------------------------------


def test_edit_file_replaces_one_occurrence(ws: Path) -> None:
    out = ok(
        ws,
        "edit_file",
        {"path": "src/app.py", "old_string": "print('hello')", "new_string": "print('bye')"},
    )
    assert out == {"path": "src/app.py", "strategy": "exact"}
    assert (ws / "src" / "app.py").read_text() == "def main():\n    print('bye')\n\n\nmain()\n"


def test_edit_file_keeps_crlf(ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    ok(ws, "edit_file", {"path": "win.txt", "old_string": "two\nthree", "new_string": "2\n3"})
    assert (ws / "win.txt").read_bytes() == b"one\r\n2\r\n3\r\n"


def test_edit_file_refusals(ws: Path) -> None:
    (ws / "dup.txt").write_text("x = 1\nx = 1\n")
    assert (
        "more"
        in err(
            ws, "edit_file", {"path": "dup.txt", "old_string": "x = 1", "new_string": "x = 2"}
        ).lower()
    )
    assert (ws / "dup.txt").read_text() == "x = 1\nx = 1\n"
    assert (
        "not found"
        in err(
            ws, "edit_file", {"path": "dup.txt", "old_string": "nope", "new_string": "x"}
        ).lower()
    )
    assert err(ws, "edit_file", {"path": "dup.txt", "old_string": "x", "new_string": "x"}) == (
        "old_string and new_string are identical; nothing to change"
    )
    assert "$.old_string" in err(
        ws, "edit_file", {"path": "dup.txt", "old_string": "", "new_string": "x"}
    )
    assert "protected" in err(
        ws, "edit_file", {"path": "harness.md", "old_string": "You", "new_string": "We"}
    )


# -- list_files --------------------------------------------------------------------------


def test_list_files_children_and_glob(ws: Path) -> None:
    root = ok(ws, "list_files")
    names = [e["path"] for e in root["entries"]]
    assert "README.md" in names and "src" in names and "harness.md" in names
    assert ".harness" not in names
    src = next(e for e in root["entries"] if e["path"] == "src")
    assert src == {"path": "src", "is_dir": True, "size": 0}
    sub = ok(ws, "list_files", {"path": "src"})
    assert sub["entries"] == [
        {"path": "src/app.py", "is_dir": False, "size": (ws / "src" / "app.py").stat().st_size}
    ]
    md = ok(ws, "list_files", {"pattern": "**/*.md"})
    paths = [e["path"] for e in md["entries"]]
    assert "README.md" in paths and "harness.md" in paths
    assert not any(p.startswith(".harness") for p in paths)
    py = ok(ws, "list_files", {"path": "src", "pattern": "*.py"})
    assert [e["path"] for e in py["entries"]] == ["src/app.py"]


def test_list_files_glob_entries_in_key_order_with_directories_at_size_zero(ws: Path) -> None:
    (ws / "src" / "pkg").mkdir()
    (ws / "src" / "pkg" / "m.py").write_text("x = 1\n")
    got = ok(ws, "list_files", {"pattern": "src/**/*"})
    assert got["entries"] == [
        {"path": "src/app.py", "is_dir": False, "size": (ws / "src" / "app.py").stat().st_size},
        {"path": "src/pkg", "is_dir": True, "size": 0},
        {"path": "src/pkg/m.py", "is_dir": False, "size": 6},
    ]
    assert [list(e) for e in got["entries"]] == [["path", "is_dir", "size"]] * 3


def test_list_files_limits_and_refusals(ws: Path) -> None:
    for i in range(5):
        (ws / f"f{i}.txt").write_text("x")
    capped = ok(ws, "list_files", {"pattern": "*.txt", "max_entries": 2})
    assert (len(capped["entries"]), capped["total"], capped["truncated"]) == (2, 5, True)
    assert "is a file" in err(ws, "list_files", {"path": "README.md"})
    assert "must not contain" in err(ws, "list_files", {"pattern": "../*"})
    assert "outside the workspace" in err(ws, "list_files", {"path": ".."})


# -- search_files ------------------------------------------------------------------------


def test_search_files_matches_and_options(ws: Path) -> None:
    found = ok(ws, "search_files", {"pattern": "hel+o"})
    assert {"path": "src/app.py", "line": 2, "text": "    print('hello')"} in found["matches"]
    assert found["truncated"] is False
    assert ok(ws, "search_files", {"pattern": "HELLO"})["count"] == 0
    insensitive = ok(ws, "search_files", {"pattern": "HELLO", "ignore_case": True})
    assert {m["path"] for m in insensitive["matches"]} == {"README.md", "src/app.py"}
    only_py = ok(ws, "search_files", {"pattern": "(?i)hello", "glob": "**/*.py"})
    assert {m["path"] for m in only_py["matches"]} == {"src/app.py"}
    in_dir = ok(ws, "search_files", {"pattern": "main", "path": "src"})
    assert in_dir["count"] == 2


def test_search_files_caps_and_errors(ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * 20 + "y" * 1000 + " hit\n")
    capped = ok(ws, "search_files", {"pattern": "hit", "path": "many.txt", "max_matches": 5})
    assert (capped["count"], capped["truncated"]) == (5, True)
    wide = ok(ws, "search_files", {"pattern": "y+ hit", "path": "many.txt"})
    assert len(wide["matches"][0]["text"]) == 300
    (ws / "edge.txt").write_text("é" * 296 + " hit\n" + "é" * 297 + " hit\n")
    edge = ok(ws, "search_files", {"pattern": "hit", "path": "edge.txt"})["matches"]
    assert [m["text"] for m in edge] == ["é" * 296 + " hit", "é" * 297 + " h…"]
    assert [list(m) for m in edge] == [["path", "line", "text"]] * 2
    assert "RE2" in err(ws, "search_files", {"pattern": "(a"}) or "regular expression" in err(
        ws, "search_files", {"pattern": "(a"}
    )
    assert "RE2" in err(ws, "search_files", {"pattern": "(?<=a)b"}) or "invalid" in err(
        ws, "search_files", {"pattern": "(?<=a)b"}
    )
    report = call(ws, "search_files", {"pattern": "x", "max_matches": 0})
    assert report["exit_code"] == 1 and "$.max_matches" in report["text"]


def test_search_files_walk_order(ws: Path) -> None:
    """order "walk": the lines of the path-order answer, files in the order the
    directories are read, each file's lines together and ascending; stops at max_matches."""
    (ws / ".gitignore").write_text("skip/\n")
    for d in ("b", "a", "c/d", "skip"):
        (ws / d).mkdir(parents=True, exist_ok=True)
        for f in ("z.txt", "y.txt"):
            (ws / d / f).write_text("needle 1\nx\nneedle 2\n")
    (ws / ".env").write_text("needle=secret\n")
    by_path = ok(ws, "search_files", {"pattern": "needle", "max_matches": 1000})
    walked = ok(ws, "search_files", {"pattern": "needle", "max_matches": 1000, "order": "walk"})
    assert by_path["count"] == walked["count"] == 12 and not walked["truncated"]
    assert {m["path"] for m in by_path["matches"]} == {
        f"{d}/{f}" for d in ("a", "b", "c/d") for f in ("y.txt", "z.txt")
    }
    key = lambda m: (m["path"], m["line"])  # noqa: E731
    assert sorted(walked["matches"], key=key) == by_path["matches"]
    paths = [m["path"] for m in walked["matches"]]
    assert all(
        paths.index(p) + paths.count(p) - 1 == len(paths) - 1 - paths[::-1].index(p) for p in paths
    )  # each file's lines contiguous
    capped = ok(ws, "search_files", {"pattern": "needle", "max_matches": 3, "order": "walk"})
    assert (capped["count"], capped["truncated"]) == (3, True)
    assert all(m in by_path["matches"] for m in capped["matches"])
    report = call(ws, "search_files", {"pattern": "needle", "order": "random"})
    assert report["exit_code"] == 1 and "$.order" in report["text"]


# -- .gitignore --------------------------------------------------------------------------


def test_search_and_list_honour_gitignore(ws: Path) -> None:
    (ws / ".gitignore").write_text("build/\n*.log\n!keep.log\n")
    (ws / "build").mkdir()
    (ws / "build" / "out.py").write_text("print('hello')\n")
    (ws / "debug.log").write_text("hello\n")
    (ws / "keep.log").write_text("hello\n")
    found = {m["path"] for m in ok(ws, "search_files", {"pattern": "hello"})["matches"]}
    assert found == {"src/app.py", "keep.log"}
    every = ok(ws, "search_files", {"pattern": "hello", "include_ignored": True})
    assert {m["path"] for m in every["matches"]} == found | {"build/out.py", "debug.log"}
    listed = [e["path"] for e in ok(ws, "list_files", {"pattern": "**/*"})["entries"]]
    assert "build" not in listed and "debug.log" not in listed and "keep.log" in listed
    listed = [
        e["path"]
        for e in ok(ws, "list_files", {"pattern": "**/*", "include_ignored": True})["entries"]
    ]
    assert "build/out.py" in listed and "debug.log" in listed
    children = [e["path"] for e in ok(ws, "list_files")["entries"]]
    assert "build" not in children and "keep.log" in children
    children = [e["path"] for e in ok(ws, "list_files", {"include_ignored": True})["entries"]]
    assert "build" in children and "debug.log" in children
    # a directory named explicitly is searched even though it is ignored
    inside = ok(ws, "search_files", {"pattern": "hello", "path": "build"})
    assert [m["path"] for m in inside["matches"]] == ["build/out.py"]
    assert (
        "$.include_ignored"
        in call(ws, "search_files", {"pattern": "x", "include_ignored": "yes"})["text"]
    )


def test_read_file_caps_bytes_not_characters(ws: Path) -> None:
    """Multi-byte text: the content stays within 50 000 UTF-8 bytes (issue 16)."""
    (ws / "wide.txt").write_text(("é€😀" * 300 + "\n") * 100)  # 2700 bytes per line
    res = ok(ws, "read_file", {"path": "wide.txt"})
    assert res["truncated"] is True
    assert 47000 < len(res["content"].encode()) <= 50000
    assert res["next_offset"] == res["end_line"] + 1
    (ws / "one.txt").write_text("😀" * 20000 + "\n")  # one 80 000-byte line
    line = ok(ws, "read_file", {"path": "one.txt"})
    assert line["truncated"] is True and line["content"].endswith(" [line truncated]")
    assert 40000 < len(line["content"].encode()) <= 50000
