"""What both the fast stdio start and the SDK server answer about this server:
its version (``serverInfo``) and whether its tool listing can change.

A leaf of ``harness/serve/``: ``fast_start`` answers ``initialize`` with it before the
MCP SDK is imported, and ``mcp`` answers with the same values afterwards.
"""

from __future__ import annotations

from typing import Any

from harness.plans import policy_allows
from harness.search import TOOL_SEARCH as NAME


def changes_possible(harness: Any, watch: bool) -> bool:
    """Whether the tool listing can ever change (``tools.listChanged``): a reload, or
    deferred tools that the built-in tool_search surfaces, or an upstream MCP server's
    own tools/list_changed (harness/upstream/)."""
    if watch or getattr(harness, "upstream", None) is not None:
        return True
    if NAME in harness.all_tools:
        return False
    return any(
        t.loading == "deferred"
        and t.enabled
        and n != "read_output"
        and policy_allows(harness.config, n)
        for n, t in harness.all_tools.items()
    )


def version() -> str:
    """The installed distribution's version (``harness-md``): the MCP serverInfo."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    from harness import DISTRIBUTION

    try:
        return dist_version(DISTRIBUTION)
    except PackageNotFoundError:  # pragma: no cover - running from a checkout
        return "0"
