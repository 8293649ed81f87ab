"""``harness schema``: tool definitions exactly as a provider receives them (docs/spec.md §11).

Without TOOL: a JSON list of every exported tool (enabled, not deferred). With TOOL
(the harness name, or the provider name such as ``git_status`` for ``git.status``):
that one definition as a JSON object, deferred tools included. Exit 0, 1 for an
unknown or disabled tool, 2 when the project does not load (docs/spec.md §10: a
project that cannot load is a load error, exit 2 as for ``harness call``; docs/cli.md).

With ``--format openai-strict``, a tool whose schema strict mode cannot express is
printed with ``"strict": false`` and a ``note:`` line on stderr says why.
"""

from __future__ import annotations

from pathlib import Path

import click

from harness.artifacts.export import (
    FORMATS,
    definition,
    definitions,
    exported,
    provider_name,
    strict_incompatibilities,
)
from harness.artifacts.model import Project, ToolSpec
from harness.artifacts.problems import unknown_tool_message
from harness.cli import render
from harness.cli.common import (
    CliError,
    load_or_exit,
    root_option,
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
@click.option(
    "--refresh",
    is_flag=True,
    help="Start each upstream MCP server and list its tools again (rewrites the cached "
    "listing); without it a cached listing is used.",
)
def command(tool: str | None, root: Path | None, fmt: str, refresh: bool) -> None:
    """Print tool definitions as sent to a provider (all tools, or TOOL alone)."""
    project = load_or_exit(root)
    from harness.upstream.check import include_upstream

    # Upstream MCP servers' tools too: cached, or listed by starting the server.
    project = include_upstream(project, refresh)
    tools = [project.tools[n] for n in sorted(project.tools)]
    if tool is None:
        click.echo(render.dumps(definitions(tools, fmt)))
        shown = exported(tools)
    else:
        one = find_tool(project, tool, fmt)
        click.echo(render.dumps(definition(one, fmt)))
        shown = [one]
    if fmt == "openai-strict":
        for t in shown:
            echo_strict_fallback(t)


def echo_strict_fallback(tool: ToolSpec) -> None:
    """On stderr, why ``tool`` goes out with ``"strict": false`` (nothing if it does not)."""
    reasons = strict_incompatibilities(tool.input_schema)
    if reasons:
        click.echo(
            f'note: tool "{tool.name}" is exported with "strict": false '
            f"(not expressible in strict mode): {'; '.join(reasons)}",
            err=True,
        )
