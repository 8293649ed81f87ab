"""One exit-code path: commands raise, ``cli.main.Boundary`` decides the code."""

from __future__ import annotations

import ast
from pathlib import Path

import click
from click.testing import CliRunner

from harness.artifacts.problems import Problem
from harness.cli.common import CliError
from harness.cli.main import Boundary
from harness.errors import LoadError, UsageError

CLI = Path(__file__).resolve().parents[2] / "harness" / "cli"


def _group(exc: Exception | None) -> click.Group:
    @click.group(cls=Boundary)
    def g() -> None:
        pass

    @g.command()
    def go() -> None:
        click.echo("before")
        if exc is not None:
            raise exc

    return g


def test_exceptions_carry_their_exit_code() -> None:
    res = CliRunner().invoke(_group(UsageError("bad flag")), ["go"])
    assert (res.exit_code, res.stderr) == (2, "Error: bad flag\n")
    res = CliRunner().invoke(_group(CliError("no such file", exit_code=1)), ["go"])
    assert (res.exit_code, res.stderr) == (1, "Error: no such file\n")
    res = CliRunner().invoke(_group(CliError(exit_code=3)), ["go"])  # already reported
    assert (res.exit_code, res.stderr, res.stdout) == (3, "", "before\n")
    problem = Problem(path="tools/x.md", line=2, column=1, code="c", message="broken")
    res = CliRunner().invoke(_group(LoadError([problem])), ["go"])
    assert res.exit_code == 2 and "tools/x.md:2:1: error: broken [c]" in res.stderr
    assert CliRunner().invoke(_group(None), ["go"]).exit_code == 0


def test_no_command_exits_on_its_own() -> None:
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                text = ast.unparse(node)
                if text in ("sys.exit", "click.exceptions.Exit"):
                    assert path.name == "main.py", f"{path.name}: {text}"
