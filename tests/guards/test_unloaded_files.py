"""Hook and tool files harness never loads (issue 23): before, a hook in a sub-folder, a
``.yaml`` hook or a misspelt ``.harness/hook/`` folder validated clean and never ran;
``*.MD`` was only a warning. Each is now a validate error naming the file and where to
put it; the hook, moved there, blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness

BLOCK_ALL = (
    "---\nevent: tool.pre\nscript: |\n  def handle(event, payload):\n"
    '      return block("blocked by the guard")\n---\nBlocks every call.\n'
)
ECHO = (
    "---\nparameters:\n  text: {type: string, required: true}\nscript: |\n"
    '  def run(args):\n      return args["text"]\n---\nEcho.\n'
)


def project(tmp: Path, rel: str) -> Path:
    root = tmp / "p"
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / ".harness" / "tools" / "echo.md").write_text(ECHO)
    (root / "harness.md").write_text("---\nruntime: {isolation: inprocess}\n---\nYou help.\n")
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(BLOCK_ALL)
    return root


CASES = [
    (
        ".harness/hooks/security/guard.md",
        ".harness/hooks/security/guard.md",
        ".harness/hooks/guard.md",
    ),
    (".harness/hooks/guard.yaml", ".harness/hooks/guard.yaml", ".harness/hooks/guard.md"),
    (".harness/hooks/guard.yml", ".harness/hooks/guard.yml", ".harness/hooks/guard.md"),
    (".harness/hooks/guard.txt", ".harness/hooks/guard.txt", ".harness/hooks/guard.md"),
    (".harness/hooks/guard.MD", ".harness/hooks/guard.MD", ".harness/hooks/guard.md"),
    (".harness/hook/guard.md", ".harness/hook/", ".harness/hooks/"),
    (".harness/Hooks/guard.md", ".harness/Hooks/", ".harness/hooks/"),
    (".harness/tool/guard.md", ".harness/tool/", ".harness/tools/"),
    (".harness/Tools/guard.md", ".harness/Tools/", ".harness/tools/"),
]


@pytest.mark.parametrize(("rel", "named", "fix"), CASES, ids=[c[0] for c in CASES])
def test_a_file_never_loaded_fails_validate_naming_it(
    rel: str, named: str, fix: str, tmp_path: Path
) -> None:
    root = project(tmp_path, rel)
    errors = [p for p in harness.check(root) if p.severity == "error"]
    assert [p.path.rstrip("/") for p in errors] == [named.rstrip("/")], [p.render() for p in errors]
    assert fix in errors[0].message and "never" in errors[0].message


def test_moved_where_validate_says_the_hook_blocks(tmp_path: Path) -> None:
    root = project(tmp_path, ".harness/hooks/guard.md")
    assert [p for p in harness.check(root) if p.severity == "error"] == []
    with harness.load(root) as h, h.session() as s:
        result = s.call("echo", {"text": "hi"})
    assert result.is_error and "blocked by the guard" in result.text


def test_hidden_files_and_known_folders_are_quiet(tmp_path: Path) -> None:
    root = project(tmp_path, ".harness/hooks/guard.md")
    (root / ".harness" / "hooks" / ".gitkeep").write_text("")
    (root / ".harness" / "hooks" / "guard.md~").write_text("")
    for name in ("tests", "evals", "state", "servers", "plugins", "overrides", "builtins"):
        (root / ".harness" / name).mkdir(exist_ok=True)
    assert [p.render() for p in harness.check(root) if p.severity == "error"] == []
