"""`harness list` end to end on real fixture projects (CliRunner)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from harness.cli.main import cli


def test_list_text(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r = runner.invoke(cli, ["list", "--root", "valid"])
    assert r.exit_code == 0, r.output
    assert r.stdout == (
        "tools (4):\n"
        "  git.status   Show the working tree status.\n"
        "  old_tool     An old tool kept for reference. [disabled]\n"
        "  read_file    Read a text file from the workspace.\n"
        "  search_docs  Search the documentation for a phrase. [deferred]\n"
        "hooks (2):\n"
        "  audit   tool.pre   priority 10\n"
        "  redact  tool.post  priority 100\n"
    )


def test_list_json(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r = runner.invoke(cli, ["list", "--root", "valid", "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {
        "tools": [
            {
                "name": "git.status",
                "description": "Show the working tree status.",
                "loading": "always",
                "enabled": True,
            },
            {
                "name": "old_tool",
                "description": "An old tool kept for reference.",
                "loading": "always",
                "enabled": False,
            },
            {
                "name": "read_file",
                "description": "Read a text file from the workspace.",
                "loading": "always",
                "enabled": True,
            },
            {
                "name": "search_docs",
                "description": "Search the documentation for a phrase.",
                "loading": "deferred",
                "enabled": True,
            },
        ],
        "hooks": [
            {"name": "audit", "event": "tool.pre", "priority": 10},
            {"name": "redact", "event": "tool.post", "priority": 100},
        ],
    }


def test_list_empty_project(runner: CliRunner, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(cli, ["list"])
    assert (r.exit_code, r.stdout) == (0, "tools (0):\n  (none)\nhooks (0):\n  (none)\n")


def test_list_broken_project_prints_errors_on_stderr_exit_2(
    runner: CliRunner, project_copy
) -> None:
    project_copy("broken")
    r = runner.invoke(cli, ["list", "--root", "broken"])
    assert r.exit_code == 2
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 3  # errors only, warnings left to `harness validate`
    assert all(": error: " in line for line in lines)
    assert any(line.startswith("broken/.harness/tools/nodelim.md:1:1: error: ") for line in lines)


def test_list_bad_format_is_usage_error(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r = runner.invoke(cli, ["list", "--root", "valid", "--format", "github"])
    assert r.exit_code == 2
    assert "Invalid value for '--format'" in r.stderr
