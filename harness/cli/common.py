"""Options and helpers shared by several commands.

Exit codes are handled at one boundary, :class:`harness.cli.main.Boundary`: a command
fails by raising a :class:`~harness.errors.HarnessError`, which carries its
``exit_code`` (:class:`CliError` for the CLI's own failures, with or without a
message). Commands never call ``sys.exit`` nor raise ``click.exceptions.Exit``; click's
own ``click.UsageError`` remains for malformed command lines (it prints the usage).

Commands import what they run inside their function, on purpose: ``harness --help``
and a command's own start-up load only what that command needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness.errors import HarnessError, LoadError

if TYPE_CHECKING:
    from harness.artifacts.model import Problem, Project

root_option = click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Project root (default: nearest directory with harness.md or .harness/).",
)


class CliError(HarnessError):
    """A command failed: ``Error: MESSAGE`` on stderr (nothing more when the command
    has reported it already: an empty message), then exit with ``exit_code``."""

    def __init__(self, message: str = "", exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def report(exc: HarnessError) -> int:
    """Print what ``exc`` says on stderr; its exit code (the CLI's one boundary)."""
    if isinstance(exc, LoadError):
        echo_problems([p for p in exc.problems if p.severity == "error"] or exc.problems)
    elif str(exc):
        click.echo(f"Error: {exc}", err=True)
    return exc.exit_code


def resolve_root(root: Path | None) -> Path:
    """``--root`` if given, else the nearest root at or above the current directory."""
    if root is not None:
        return root
    from harness.artifacts.loader import find_root

    return find_root(Path.cwd())


def load_or_exit(root: Path | None) -> Project:
    """Load and check the project as ``harness call`` does (static script checks
    included); when it has errors print each one on stderr and exit 2. Tools that
    ``tools_policy`` denies are left out: nothing can call them."""
    from dataclasses import replace

    from harness.pipeline import policy_allows
    from harness.validation import check_project

    base = resolve_root(root)
    project = check_project(base)
    if not project.ok:
        echo_problems([p for p in project.problems if p.severity == "error"], base)
        raise CliError(exit_code=LoadError.exit_code)
    allowed = {n: t for n, t in project.tools.items() if policy_allows(project.config, n)}
    if len(allowed) != len(project.tools):
        project = replace(project, tools=allowed)
    return project


def echo_problems(problems: Iterable[Problem], root: Path | None = None) -> None:
    """Every problem as ``PATH:LINE:COL: SEVERITY: MESSAGE [CODE]`` on stderr."""
    from harness.cli.render import text_lines

    for line in text_lines(problems, root):
        click.echo(line, err=True)
