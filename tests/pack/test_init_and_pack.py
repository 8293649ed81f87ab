"""`harness init` and the starter pack as shipped (package data == this repo's .harness/)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from harness.cli.main import cli
from harness.starter import files

REPO = Path(__file__).resolve().parents[2]
TOOLS = ["edit_file", "git", "list_files", "read_file", "run_command", "search_files", "write_file"]
HOOKS = ["command_guard", "secret_redactor"]


def test_init_into_empty_dir_then_validate_has_no_problems(tmp_path: Path) -> None:
    target = tmp_path / "new"
    result = CliRunner().invoke(cli, ["init", str(target)])
    assert result.exit_code == 0, result.output
    assert sorted(p.stem for p in (target / ".harness" / "tools").iterdir()) == TOOLS
    assert sorted(p.stem for p in (target / ".harness" / "hooks").iterdir()) == HOOKS
    assert (target / "harness.md").read_text() == files()["harness.md"]
    checked = CliRunner().invoke(
        cli, ["validate", "--root", str(target), "--format", "json", "--strict"]
    )
    assert checked.exit_code == 0, checked.output
    report = json.loads(checked.stdout)
    assert report["ok"] is True and report["problems"] == []
    listed = CliRunner().invoke(cli, ["list", "--root", str(target), "--format", "json"])
    assert listed.exit_code == 0, listed.output


def test_init_defaults_to_the_current_directory(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["init"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "harness.md").is_file()
    assert (tmp_path / ".harness" / "tools" / "read_file.md").is_file()


def test_init_never_overwrites_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "harness.md").write_text("mine\n")
    (tmp_path / ".harness" / "tools").mkdir(parents=True)
    (tmp_path / ".harness" / "tools" / "git.md").write_text("my git\n")
    result = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert result.exit_code == 1
    assert "harness.md" in result.stderr and ".harness/tools/git.md" in result.stderr
    assert "not overwriting" in result.stderr
    assert (tmp_path / "harness.md").read_text() == "mine\n"
    assert (tmp_path / ".harness" / "tools" / "git.md").read_text() == "my git\n"
    assert sorted(p.name for p in (tmp_path / ".harness" / "tools").iterdir()) == ["git.md"]
    assert not (tmp_path / ".harness" / "hooks").exists()


def test_init_twice_fails_the_second_time(tmp_path: Path) -> None:
    assert CliRunner().invoke(cli, ["init", str(tmp_path)]).exit_code == 0
    again = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert again.exit_code == 1
    for rel in files():
        assert rel in again.stderr


def test_init_refuses_a_dangling_symlink(tmp_path: Path) -> None:
    (tmp_path / "harness.md").symlink_to(tmp_path / "elsewhere.md")
    result = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert result.exit_code == 1
    assert not (tmp_path / "elsewhere.md").exists()


def test_repository_dogfoods_the_starter_pack() -> None:
    """This repository's own .harness/ is the starter pack, byte for byte."""
    pack = files()
    for folder in ("tools", "hooks"):
        shipped = {
            rel.rsplit("/", 1)[1]: text
            for rel, text in pack.items()
            if rel.startswith(f".harness/{folder}/")
        }
        own = {p.name: p.read_text("utf-8") for p in (REPO / ".harness" / folder).glob("*.md")}
        assert own == shipped, f".harness/{folder} differs from harness/starter/{folder}"


def test_repository_itself_validates_cleanly() -> None:
    checked = CliRunner().invoke(
        cli, ["validate", "--root", str(REPO), "--format", "json", "--strict"]
    )
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["problems"] == []


def test_every_pack_tool_is_described_annotated_and_typed() -> None:
    from harness.core import load

    with load(REPO) as h:
        for name in TOOLS:
            tool = h.all_tools[name]
            assert len(tool.description) > 200, name
            assert tool.annotations is not None and "read_only" in tool.annotations, name
            assert tool.annotations.get("title"), name
            assert tool.returns is not None and tool.returns["type"] == "object", name
            for param in tool.parameters:
                assert param.description, f"{name}.{param.name} has no description"
        for name in ("read_file", "list_files", "search_files", "git"):
            assert h.all_tools[name].annotations["read_only"] is True
        for name in ("write_file", "edit_file", "run_command"):
            assert h.all_tools[name].annotations["destructive"] is True
