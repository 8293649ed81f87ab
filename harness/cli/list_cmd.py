"""``harness list``: tools with one-line descriptions, hooks with event and priority.

Every tool is listed, deferred and disabled ones marked. Exit 0; a project that does
not load prints its errors on stderr and exits 2 (docs/spec.md §10: nothing can be
listed, so it is a load error like ``harness call``'s; decision in docs/cli.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from harness.artifacts.model import TOOL_EVENTS, HookSpec, Project, ToolSpec
from harness.cli import render
from harness.cli.common import load_or_exit, root_option

SUMMARY_WIDTH = 80


def first_line(text: str, name: str = "") -> str:
    """The first non-blank line of ``text``, stripped; a leading Markdown heading that only
    repeats ``name`` (``# read_file``, ``## Read File``) is skipped."""
    skipped = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if name and not skipped and stripped.startswith("#"):
            skipped = True
            if _words(stripped.lstrip("#")) == _words(name):
                continue
        return stripped
    return ""


def _words(text: str) -> str:
    return " ".join(re.split(r"[\s_.\-`]+", text.strip().lower())).strip()


def _marks(tool: ToolSpec) -> list[str]:
    marks = []
    if tool.loading == "deferred":
        marks.append("deferred")
    if not tool.enabled:
        marks.append("disabled")
    return marks


def _hooks(project: Project) -> list[HookSpec]:
    """Hooks in run order: by event (TOOL_EVENTS order, then custom events by name),
    priority, name."""

    def key(h: HookSpec) -> tuple[int, str, int, str]:
        rank = TOOL_EVENTS.index(h.event) if h.event in TOOL_EVENTS else len(TOOL_EVENTS)
        return (rank, h.event, h.priority, h.name)

    return sorted(project.hooks, key=key)


def _short(text: str) -> str:
    return text if len(text) <= SUMMARY_WIDTH else text[: SUMMARY_WIDTH - 3] + "..."


def _timeout(tool: ToolSpec, project: Project) -> str:
    """``timeout N ms`` and, unless the tool sets it itself, the setting it comes from."""
    from harness.plans import effective_timeout

    ms, source = effective_timeout(tool.timeout_ms, project.config)
    if not ms:
        return "no timeout (limits.default_timeout_ms and limits.max_timeout_ms are 0)"
    return f"timeout {ms} ms" + ("" if source == "timeout_ms" else f" ({source})")


def text_listing(project: Project, verbose: bool = False) -> list[str]:
    tools = [project.tools[n] for n in sorted(project.tools)]
    hooks = _hooks(project)
    lines = [f"tools ({len(tools)}):"]
    width = max((len(t.name) for t in tools), default=0)
    for t in tools:
        marks = "".join(f" [{m}]" for m in _marks(t))
        lines.append(
            f"  {t.name:<{width}}  {_short(first_line(t.description, t.name))}{marks}".rstrip()
        )
        if verbose:
            lines.append(f"  {'':<{width}}  {_timeout(t, project)}")
    if not tools:
        lines.append("  (none)")
    lines.append(f"hooks ({len(hooks)}):")
    width = max((len(h.name) for h in hooks), default=0)
    ewidth = max((len(h.event) for h in hooks), default=0)
    for h in hooks:
        line = f"  {h.name:<{width}}  {h.event:<{ewidth}}  priority {h.priority}"
        lines.append(line + (f"  timeout {h.timeout_ms} ms" if verbose else ""))
    if not hooks:
        lines.append("  (none)")
    return lines


def json_listing(project: Project, verbose: bool = False) -> dict[str, Any]:
    from harness.plans import effective_timeout

    def more(t: ToolSpec) -> dict[str, Any]:
        if not verbose:
            return {}
        ms, source = effective_timeout(t.timeout_ms, project.config)
        return {"timeout_ms": ms, "timeout_from": source}

    return {
        "tools": [
            {
                "name": t.name,
                "description": first_line(t.description, t.name),
                "loading": t.loading,
                "enabled": t.enabled,
                **more(t),
            }
            for t in (project.tools[n] for n in sorted(project.tools))
        ],
        "hooks": [
            {
                "name": h.name,
                "event": h.event,
                "priority": h.priority,
                **({"timeout_ms": h.timeout_ms} if verbose else {}),
            }
            for h in _hooks(project)
        ],
    }


@click.command()
@root_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Also show each tool's and hook's timeout and the setting it comes from.",
)
@click.option(
    "--refresh",
    is_flag=True,
    help="Start each upstream MCP server and list its tools again (rewrites the cached "
    "listing in .harness/state/upstream/); without it a cached listing is used.",
)
def command(root: Path | None, fmt: str, verbose: bool, refresh: bool) -> None:
    """List tools (one-line description; deferred/disabled marked) and hooks."""
    project = load_or_exit(root)
    from harness.upstream.check import include_upstream

    # Upstream MCP servers' tools too: cached, or listed by starting the server.
    project = include_upstream(project, refresh)
    if fmt == "json":
        click.echo(render.dumps(json_listing(project, verbose)))
    else:
        for line in text_listing(project, verbose):
            click.echo(line)
