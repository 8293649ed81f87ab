"""`harness validate` end to end on real fixture projects (CliRunner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import cli


def test_valid_project_text(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r = runner.invoke(cli, ["validate", "--root", "valid"])
    assert (r.exit_code, r.stdout) == (0, "ok: 4 tools, 2 hooks\n")


def test_root_discovered_from_a_subdirectory(
    runner: CliRunner, project_copy, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project_copy("valid")
    monkeypatch.chdir(root / "sub" / "dir")
    r = runner.invoke(cli, ["validate"])
    assert (r.exit_code, r.stdout) == (0, "ok: 4 tools, 2 hooks\n")


def test_valid_project_json(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r = runner.invoke(cli, ["validate", "--root", "valid", "--format", "json"])
    assert r.exit_code == 0
    assert json.loads(r.stdout) == {
        "ok": True,
        "tools": ["git.status", "old_tool", "read_file", "search_docs"],
        "hooks": ["audit", "redact"],
        "problems": [],
    }


def test_valid_project_github(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r = runner.invoke(cli, ["validate", "--root", "valid", "--format", "github"])
    assert (r.exit_code, r.stdout) == (0, "ok: 4 tools, 2 hooks\n")


def test_warnings_pass_but_strict_fails(runner: CliRunner, project_copy) -> None:
    project_copy("warn")
    r = runner.invoke(cli, ["validate", "--root", "warn"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[-1] == "ok: 1 tool, 0 hooks, 1 warning"
    assert lines[0].startswith("warn/.harness/tools/typo.md:3:22: warning: ")
    assert '"exmaple"' in lines[0] and '"examples"' in lines[0]

    r = runner.invoke(cli, ["validate", "--root", "warn", "--strict"])
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("warn/.harness/tools/typo.md:3:22: error: ")
    assert lines[-1] == "1 error, 0 warnings in 1 file"


BROKEN = [
    (
        "broken/.harness/hooks/noevent.md",
        1,
        1,
        "error",
        "event-missing",
        'hook "noevent" has no event; add `event:` with one of tool.pre, tool.post, '
        "session.start, session.end, meta.tool_register, turn.start, turn.end, completion.pre, "
        "completion.post, agent.stop, error, meta.register_tool or custom.<name>",
    ),
    (
        "broken/.harness/tools/negative.md",
        2,
        1,
        "error",
        "timeout-negative",
        'tool "negative" timeout_ms must be >= 0 (got -5); use 0 for no per-call cap',
    ),
    (
        "broken/.harness/tools/nodelim.md",
        1,
        1,
        "error",
        "frontmatter-missing",
        "parse tool nodelim.md: missing --- frontmatter delimiter on line 1; "
        "start the file with a line that is exactly ---",
    ),
    (
        "broken/.harness/tools/typo.md",
        2,
        1,
        "error",
        "unknown-key",
        'tool "typo" has unknown key "timeout_msec"; rename it (did you mean "timeout_ms"?)',
    ),
]


def test_broken_project_text(runner: CliRunner, project_copy) -> None:
    project_copy("broken")
    r = runner.invoke(cli, ["validate", "--root", "broken"])
    assert r.exit_code == 1, r.output
    assert r.stdout.splitlines() == [
        *(f"{p}:{ln}:{col}: {sev}: {msg} [{code}]" for p, ln, col, sev, code, msg in BROKEN),
        "4 errors, 0 warnings in 4 files",
    ]
    assert r.stderr == ""


def test_broken_project_json(runner: CliRunner, project_copy) -> None:
    project_copy("broken")
    r = runner.invoke(cli, ["validate", "--root", "broken", "--format", "json"])
    assert r.exit_code == 1
    assert json.loads(r.stdout) == {
        "ok": False,
        "tools": ["negative", "typo"],
        "hooks": ["noevent"],
        "problems": [
            {"path": p, "line": ln, "column": col, "severity": sev, "code": code, "message": msg}
            for p, ln, col, sev, code, msg in BROKEN
        ],
    }


def test_broken_project_github(runner: CliRunner, project_copy) -> None:
    project_copy("broken")
    r = runner.invoke(cli, ["validate", "--root", "broken", "--format", "github"])
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [
        *(
            f"::{sev} file={p},line={ln},col={col}::{msg} [{code}]"
            for p, ln, col, sev, code, msg in BROKEN
        ),
        "4 errors, 0 warnings in 4 files",
    ]


def test_github_escapes_real_messages(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / ".harness" / "tools"
    tools.mkdir(parents=True)
    (tools / "pct.md").write_text("---\ntimeout_ms: 100%\n---\nX.\n")
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(cli, ["validate", "--format", "github"])
    assert r.exit_code == 1
    first = next(line for line in r.stdout.splitlines() if line.startswith("::error "))
    assert first.startswith("::error file=.harness/tools/pct.md,line=2,")
    body = first.split("::", 2)[2]
    assert "100%25" in body and "100% " not in body and "\n" not in body


def test_root_that_does_not_exist_is_usage_error(runner: CliRunner, tmp_path: Path) -> None:
    r = runner.invoke(cli, ["validate", "--root", str(tmp_path / "nope")])
    assert r.exit_code == 2
    assert "Directory" in r.stderr and "does not exist" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("args", [["--format", "xml"], ["--bogus"], ["extra-arg"]])
def test_bad_flags_are_usage_errors(runner: CliRunner, project_copy, args: list[str]) -> None:
    project_copy("valid")
    r = runner.invoke(cli, ["validate", "--root", "valid", *args])
    assert r.exit_code == 2
    assert r.stdout == ""
    assert "Usage: " in r.stderr


def test_empty_directory_is_valid(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(cli, ["validate", "--root", "."])
    assert (r.exit_code, r.stdout) == (0, "ok: 0 tools, 0 hooks\n")
