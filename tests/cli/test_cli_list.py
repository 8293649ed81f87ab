"""`harness list` end to end on real fixture projects (CliRunner)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
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
    assert len(lines) == 4  # errors only (a misspelt key is one), warnings left to validate
    assert all(": error: " in line for line in lines)
    assert any(line.startswith("broken/.harness/tools/nodelim.md:1:1: error: ") for line in lines)


def test_list_bad_format_is_usage_error(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r = runner.invoke(cli, ["list", "--root", "valid", "--format", "github"])
    assert r.exit_code == 2
    assert "Invalid value for '--format'" in r.stderr


# `list` exits 0 and `schema` 0/1 (docs/spec.md §10). A project that does not load is
# decided to be exit 2 for both (the usage/load-error class, as for `harness call`):
# nothing can be listed, and a script must not mistake it for "unknown tool" (1).


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["list", "--format", "json"],
        ["schema"],
        ["schema", "--format", "mcp"],
        ["schema", "typo"],  # a tool that exists in the broken project: still 2, not 0/1
        ["schema", "no_such_tool"],  # unknown tool: still 2, the load error comes first
    ],
)
def test_project_that_does_not_load_exits_2(runner: CliRunner, project_copy, args) -> None:
    project_copy("broken")
    r = runner.invoke(cli, [*args, "--root", "broken"])
    assert (r.exit_code, r.stdout) == (2, "")
    assert "broken/.harness/tools/nodelim.md:1:1: error: " in r.stderr


@pytest.mark.parametrize("args", [["list"], ["schema"]])
def test_warnings_only_do_not_change_the_exit_code(runner: CliRunner, project_copy, args) -> None:
    project_copy("warn")
    r = runner.invoke(cli, [*args, "--root", "warn"])
    assert (r.exit_code, r.stderr) == (0, "")


def test_exit_codes_of_the_real_command(project_copy) -> None:
    root = project_copy("broken")
    harness = Path(sys.executable).with_name("harness")
    for args in (["list"], ["schema"]):
        p = subprocess.run([str(harness), *args, "--root", str(root)], capture_output=True,
                           text=True, check=False)  # fmt: skip
        assert (p.returncode, p.stdout) == (2, ""), p.stderr
        assert ": error: " in p.stderr
