"""Problem rendering for `harness validate` (text, github, json, summary)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.artifacts.model import HookSpec, Problem, Project, Source, ToolSpec
from harness.cli import render
from harness.config import Config


def problem(
    path: str,
    line: int = 3,
    column: int = 1,
    severity: str = "error",
    code: str = "tool-timeout",
    message: str = 'tool "x" timeout_ms must be >= 0',
) -> Problem:
    return Problem(
        path=path,
        line=line,
        column=column,
        severity=severity,  # type: ignore[arg-type]
        code=code,
        message=message,
    )


def project(root: Path, problems: tuple[Problem, ...] = (), ntools: int = 2) -> Project:
    tools = {
        f"t{i}": ToolSpec(
            name=f"t{i}", description="d", source=Source(path=f".harness/tools/t{i}.md")
        )
        for i in range(ntools)
    }
    hooks = (
        HookSpec(name="h", event="tool.pre", script="", source=Source(path=".harness/hooks/h.md")),
    )
    return Project(root=root, config=Config(), tools=tools, hooks=hooks, problems=problems)


def test_text_lines_sorted_and_relative_to_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "proj"
    probs = [
        problem(".harness/tools/b.md", 2),
        problem(".harness/tools/a.md", 9, 4, "warning", "unknown-key", "unknown key"),
    ]
    assert render.text_lines(probs, root) == [
        "proj/.harness/tools/a.md:9:4: warning: unknown key [unknown-key]",
        'proj/.harness/tools/b.md:2:1: error: tool "x" timeout_ms must be >= 0 [tool-timeout]',
    ]


def test_paths_outside_cwd_are_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    root = tmp_path / "proj"
    assert render.display_path("harness.md", root) == str(root / "harness.md")
    assert render.display_path(str(tmp_path / "here" / "x.md"), None) == "x.md"
    assert render.display_path("rel.md", None) == "rel.md"


def test_github_lines_escape_and_omit_unknown_positions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    probs = [
        problem("a,b:c.md", 7, 2, message="100% bad\nsecond line"),
        problem("harness.md", 0, 0, "warning", "config-unknown-key", 'unknown key "x"'),
        problem("z.md", 4, 0),
    ]
    assert render.github_lines(probs, tmp_path) == [
        "::error file=a%2Cb%3Ac.md,line=7,col=2::100%25 bad%0Asecond line [tool-timeout]",
        '::warning file=harness.md::unknown key "x" [config-unknown-key]',
        '::error file=z.md,line=4::tool "x" timeout_ms must be >= 0 [tool-timeout]',
    ]


def test_summary_lines(tmp_path: Path) -> None:
    assert render.summary(project(tmp_path)) == "ok: 2 tools, 1 hook"
    assert render.summary(project(tmp_path, ntools=1)) == "ok: 1 tool, 1 hook"
    warn = problem(".harness/tools/t0.md", severity="warning", code="unknown-key", message="m")
    assert render.summary(project(tmp_path, (warn,))) == "ok: 2 tools, 1 hook, 1 warning"
    errs = (problem(".harness/tools/bad.md"), problem(".harness/tools/bad.md", 5), warn)
    # files: t0, t1, h, bad
    assert render.summary(project(tmp_path, errs)) == "2 errors, 1 warning in 4 files"


def test_json_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = project(tmp_path, (problem("harness.md", 1, 1),))
    assert render.json_report(p, tmp_path) == {
        "ok": False,
        "tools": ["t0", "t1"],
        "hooks": ["h"],
        "problems": [
            {
                "path": "harness.md",
                "line": 1,
                "column": 1,
                "severity": "error",
                "code": "tool-timeout",
                "message": 'tool "x" timeout_ms must be >= 0',
            }
        ],
    }
