"""Helpers of the starter-pack tests: a workspace made by `harness init`, `harness call`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from harness.cli.main import cli

GIT_ENV = {
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def init_workspace(path: Path) -> Path:
    result = CliRunner().invoke(cli, ["init", str(path)])
    assert result.exit_code == 0, result.output
    return path


def git(ws: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(
        ["git", *args], cwd=ws, env=env, check=True, capture_output=True, text=True
    ).stdout


def call(ws: Path, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """`harness call --root WS TOOL JSON --format json`; the JSON report plus exit_code."""
    argv = ["call", "--root", str(ws), tool, json.dumps(arguments or {}), "--format", "json"]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code in (0, 1), (result.exit_code, result.output, result.exception)
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["is_error"] == (result.exit_code == 1)
    report["exit_code"] = result.exit_code
    return report


def ok(ws: Path, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    report = call(ws, tool, arguments)
    assert report["is_error"] is False, report["text"]
    return report["value"]


def err(ws: Path, tool: str, arguments: dict[str, Any] | None = None) -> str:
    report = call(ws, tool, arguments)
    assert report["is_error"] is True, report["text"]
    return str(report["text"])
