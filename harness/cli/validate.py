"""``harness validate``: load every artifact and report every problem (docs/spec.md §10).

Exit 0 when there is no error (warnings allowed), 1 when there is at least one error,
2 for usage errors (bad flag, a ``--root`` that does not exist).
"""

from __future__ import annotations

from pathlib import Path

import click

from harness.artifacts.model import Project
from harness.cli import render
from harness.cli.common import CliError, resolve_root, root_option


@click.command()
@root_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
    help="text for people, json for programs, github for Actions annotations.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Also fail on the remaining unknown-key warnings (schema keywords in parameters "
    "and returns, keys under annotations); misspelt keys are errors without it.",
)
@click.option(
    "--connect",
    is_flag=True,
    help="Also start each upstream MCP server, list its tools and report problems "
    "(without it validate is offline).",
)
def command(root: Path | None, fmt: str, strict: bool, connect: bool) -> None:
    """Check every tool, hook, bundle and harness.md; report every problem."""
    from harness.validation import check_project

    project = check_project(resolve_root(root), strict=strict)
    project = _with_test_files(project, strict)
    base = project.root
    servers: dict[str, list[str]] | None = None
    if connect and project.servers:
        from dataclasses import replace

        from harness.upstream.check import connect as connect_servers

        servers, found = connect_servers(project)
        project = replace(project, problems=(*project.problems, *found))
    if fmt == "json":
        report = render.json_report(project, base)
        if servers is not None:
            report["servers"] = servers
        click.echo(render.dumps(report))
    else:
        lines = (
            render.github_lines(project.problems, base)
            if fmt == "github"
            else render.text_lines(project.problems, base)
        )
        for line in lines:
            click.echo(line)
        for name, tools in (servers or {}).items():
            click.echo(f'server "{name}": {len(tools)} tools: {", ".join(tools) or "(none)"}')
        click.echo(render.summary(project))
    if not project.ok:
        raise CliError(exit_code=1)


def _with_test_files(project: Project, strict: bool) -> Project:
    """Add the problems of ``.harness/tests/*.md`` (harness test's files)."""
    from dataclasses import replace

    from harness.artifacts.checks import UNKNOWN_KEY_CODES
    from harness.testing.check import check_tests

    found = check_tests(project.root, project)
    if not found:
        return project
    if strict:
        found = [
            replace(p, severity="error")
            if p.code in UNKNOWN_KEY_CODES or p.code == "test-unknown-key"
            else p
            for p in found
        ]
    problems = sorted((*project.problems, *found), key=lambda p: (p.path, p.line, p.column, p.code))
    return replace(project, problems=tuple(problems))
