"""Upstream MCP servers as governed tool sources (``.harness/servers/``, ``mcp_servers:``).

:class:`Upstream` turns each declared server's tools into ``NAME.TOOL`` registry tools
whose handler calls the server; the pipeline treats them like any other tool.
"""

from __future__ import annotations

from harness.upstream.connection import UpstreamFailure
from harness.upstream.source import Upstream

__all__ = ["Upstream", "UpstreamFailure"]
