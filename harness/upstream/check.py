"""``harness validate --connect`` and the upstream tools ``list``/``schema`` show.

``connect`` starts every declared server, lists its tools and reports what is wrong with
the file and line of the declaration; the servers are stopped before it returns.
"""

from __future__ import annotations

import fnmatch
import logging
from dataclasses import replace
from typing import Any

from harness.artifacts.export import join_upstream
from harness.artifacts.model import Problem, Project
from harness.artifacts.params import compile_error
from harness.upstream.connection import UpstreamFailure
from harness.upstream.source import Upstream

log = logging.getLogger("harness.upstream")


def connect(project: Project) -> tuple[dict[str, list[str]], list[Problem]]:  # noqa: C901
    """Each server's tool names (as harness names them), and the problems found."""
    listed: dict[str, list[str]] = {}
    problems: list[Problem] = []
    up = Upstream(project.servers, project.config)
    try:
        for name, spec in up.servers.items():
            src = spec.source

            def problem(message: str, code: str, severity: str = "error", src: Any = src) -> None:
                problems.append(
                    Problem(
                        path=src.path,
                        line=src.line,
                        column=1,
                        code=code,
                        severity=severity,  # type: ignore[arg-type]
                        message=message,
                    )
                )

            try:
                up.start(name)
            except UpstreamFailure as exc:
                problem(str(exc), "server-unreachable")
                continue
            listing = up._listings[name]
            listed[name] = sorted(listing.specs)
            for tool in listing.skipped:
                problem(
                    f'server "{name}" tool "{tool}" is left out: "{name}.{tool}" is not a '
                    "valid tool name",
                    "server-tool-name",
                    "warning",
                )
            for why in listing.refused.values():
                problem(why, "server-tool-refused", "warning")
            upstream_names = set(listing.upstream.values())
            for pattern in spec.allow:
                if pattern != "*" and not any(
                    fnmatch.fnmatchcase(t, pattern) for t in upstream_names
                ):
                    problem(
                        f'server "{name}" tools.allow pattern "{pattern}" matches no tool '
                        f"of the server (it has: {', '.join(sorted(upstream_names))})",
                        "server-tool-unknown",
                        "warning",
                    )
            for tool in spec.per_tool:
                if tool not in upstream_names:
                    problem(
                        f'server "{name}" per_tool names "{tool}", which the server does '
                        f"not offer (or tools: filters out)",
                        "server-tool-unknown",
                        "warning",
                    )
            for full, tspec in listing.specs.items():
                if full in project.tools:
                    other = project.tools[full].source
                    problem(
                        f'server "{name}" tool "{full}" has the name of the tool defined in '
                        f"{other.path}:{other.line}; rename that tool or deny this one "
                        "with tools.deny",
                        "duplicate-name",
                    )
                for key, schema in (
                    ("inputSchema", tspec.input_schema),
                    ("outputSchema", tspec.returns),
                ):
                    if schema is not None and compile_error(schema) is not None:
                        problem(
                            f'server "{name}" tool "{full}" has an {key} that cannot be '
                            f"compiled: {compile_error(schema)}",
                            "server-tool-schema",
                            "warning",
                        )
        problems.extend(_export_clashes(project, up))
    finally:
        up.close()
    return listed, problems


def _export_clashes(project: Project, up: Upstream) -> list[Problem]:
    """Upstream tools left out because they would export like a local tool or a tool of
    another server (``export.join_upstream``, the rule a run applies)."""
    out = []
    _joined, left_out = join_upstream(project.tools, up.tools(), up.server_of)
    for name, why in left_out.items():
        if name in project.tools:
            continue  # reported above as duplicate-name
        src = up.servers[str(up.server_of(name))].source
        out.append(
            Problem(
                path=src.path,
                line=src.line,
                column=1,
                code="server-tool-refused",
                severity="warning",
                message=why,
            )
        )
    return out


def include_upstream(project: Project, refresh: bool = False) -> Project:
    """``project`` with the tools of its upstream servers: from each server's cached
    listing (listing_cache.py) when there is one and not ``refresh``, else listed by
    starting the server (then stopped), which writes the cache."""
    if not project.servers:
        return project
    up = Upstream(project.servers, project.config)
    try:
        if refresh:
            up.start_all()
        else:
            up.start_uncached()
        listed = {**up.cached_tools(), **up.tools()}
        tools, left_out = join_upstream(project.tools, listed, up.server_of)
    finally:
        up.close()
    for why in left_out.values():
        log.warning("%s", why)
    return replace(project, tools=dict(sorted(tools.items())))
