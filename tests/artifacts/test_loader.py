"""Discovery, root finding and layer precedence with real directories."""

from __future__ import annotations

from pathlib import Path

from harness.artifacts.loader import find_root, load_project


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_find_root(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    fallback = find_root(deep)  # deep itself, unless some ancestor of tmp_path is a project
    assert (
        fallback == deep.resolve()
        or (fallback / ".harness").is_dir()
        or (fallback / "harness.md").is_file()
    )
    (tmp_path / "a" / ".harness").mkdir()
    assert find_root(deep) == (tmp_path / "a").resolve()
    (deep / "harness.md").write_text("---\n---\n")
    assert find_root(deep) == deep.resolve()


def test_only_md_files_directly_in_folders_sorted(tmp_path: Path) -> None:
    write(tmp_path, ".harness/tools/b.md", "---\n---\nB")
    write(tmp_path, ".harness/tools/a.md", "---\n---\nA")
    write(tmp_path, ".harness/tools/sub/c.md", "---\n---\nC")
    write(tmp_path, ".harness/tools/notes.txt", "x")
    write(tmp_path, ".harness/tools/.gitkeep", "")
    project = load_project(tmp_path)
    assert list(project.tools) == ["a", "b"]
    # Never loaded, so never silent (issue 23): each is an error naming where it belongs.
    assert [(p.path, p.code, p.severity) for p in project.problems] == [
        (".harness/tools/notes.txt", "file-ignored", "error"),
        (".harness/tools/sub/c.md", "file-ignored", "error"),
    ]
    assert '".harness/tools/c.md"' in project.problems[1].message


def test_hooks_sorted_by_priority_then_name(tmp_path: Path) -> None:
    for name, prio in (("z", 0), ("a", 100), ("m", 0)):
        write(
            tmp_path,
            f".harness/hooks/{name}.md",
            f"---\nevent: tool.pre\npriority: {prio}\nscript: |\n  def handle(event, payload):\n"
            "      return None\n---\n",
        )
    assert [h.name for h in load_project(tmp_path).hooks] == ["m", "z", "a"]


def test_override_replaces_each_layer(tmp_path: Path) -> None:
    write(
        tmp_path,
        ".harness/plugins/p.md",
        '---\ntools:\n  - name: p\n    script: "def run(args): return 1"\n---\n',
    )
    write(
        tmp_path,
        ".harness/hooks/h.md",
        '---\nevent: tool.pre\nscript: "def handle(event, payload): return None"\n---\n',
    )
    write(
        tmp_path,
        ".harness/overrides/o.md",
        "---\ntools:\n  - name: p\n    description: new\nhooks:\n  - name: h\n"
        "    event: tool.post\n"
        '    script: "def handle(event, payload): return None"\n---\n',
    )
    project = load_project(tmp_path)
    assert project.problems == ()
    assert project.tools["p"].description == "new" and project.tools["p"].script is None
    assert project.hooks[0].event == "tool.post"


def test_unreadable_and_missing_things_are_problems(tmp_path: Path) -> None:
    write(tmp_path, ".harness/tools", "not a dir")  # a file where a folder is expected
    project = load_project(tmp_path)
    assert project.tools == {} and project.ok
