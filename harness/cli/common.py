"""Options and helpers shared by several commands.

Exit codes are handled at one boundary: :func:`handle_errors` wraps a command and maps
every :class:`~harness.errors.HarnessError` to its ``exit_code`` (a :class:`LoadError`
prints its errors on stderr first). Commands never call ``sys.exit``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from harness.errors import HarnessError, LoadError

if TYPE_CHECKING:
    from harness.artifacts.model import Problem, Project

F = TypeVar("F", bound=Callable[..., Any])

root_option = click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Project root (default: nearest directory with harness.md or .harness/).",
)


class CliError(click.ClickException):
    """A failure reported as ``Error: MESSAGE`` on stderr with a chosen exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]


def handle_errors(fn: F) -> F:
    """Map harness exceptions raised by a command to messages and exit codes."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LoadError as e:
            echo_problems([p for p in e.problems if p.severity == "error"] or e.problems)
            raise click.exceptions.Exit(e.exit_code) from e
        except HarnessError as e:
            raise CliError(str(e), e.exit_code) from e

    return wrapper  # type: ignore[return-value]


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
        raise click.exceptions.Exit(LoadError.exit_code)
    allowed = {n: t for n, t in project.tools.items() if policy_allows(project.config, n)}
    if len(allowed) != len(project.tools):
        project = replace(project, tools=allowed)
    return project


def echo_problems(problems: Iterable[Problem], root: Path | None = None) -> None:
    """Every problem as ``PATH:LINE:COL: SEVERITY: MESSAGE [CODE]`` on stderr."""
    from harness.cli.render import text_lines

    for line in text_lines(problems, root):
        click.echo(line, err=True)


