"""``harness schema``: tool definitions exactly as a provider receives them (SPEC §11).

Without TOOL: a JSON list of every exported tool (enabled, not deferred). With TOOL
(the harness name, or the provider name such as ``git_status`` for ``git.status``):
that one definition as a JSON object, deferred tools included. Exit 0, 1 for an
unknown or disabled tool, 2 when the project does not load.
"""

from __future__ import annotations

from pathlib import Path

import click

from harness.artifacts.export import FORMATS, definition, definitions, provider_name
from harness.artifacts.model import Project, ToolSpec
from harness.cli import render
from harness.cli.common import (
    CliError,
    handle_errors,
    load_or_exit,
    root_option,
    unknown_tool_message,
)


def find_tool(project: Project, name: str, fmt: str) -> ToolSpec:
    """The tool called ``name`` (or exported as ``name`` in ``fmt``); CliError otherwise."""
    tool = project.tools.get(name)
    if tool is None:
        matches = [t for t in project.tools.values() if provider_name(t.name, fmt) == name]
        tool = matches[0] if len(matches) == 1 else None
    if tool is None:
        raise CliError(unknown_tool_message(name, project.tools), 1)
    if not tool.enabled:
        raise CliError(
            f'tool "{tool.name}" is disabled (enabled: false in {tool.source.path}); '
            "disabled tools are never exported",
            1,
        )
    return tool


@click.command()
@click.argument("tool", required=False)
@root_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(FORMATS)),
    default="openai",
    show_default=True,
    help="Provider format.",
)
@handle_errors
def command(tool: str | None, root: Path | None, fmt: str) -> None:
    """Print tool definitions as sent to a provider (all tools, or TOOL alone)."""
    project = load_or_exit(root)
    tools = [project.tools[n] for n in sorted(project.tools)]
    if tool is None:
        click.echo(render.dumps(definitions(tools, fmt)))
    else:
        click.echo(render.dumps(definition(find_tool(project, tool, fmt), fmt)))
