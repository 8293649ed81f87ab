"""An MCP server (the SDK's low-level ``Server``) that lists exactly the tools it is told.

Run: ``python listing_server.py TOOLS_JSON``, where TOOLS_JSON is a JSON list of
``{"name", "inputSchema"?, "outputSchema"?, "result"?}``. Every call answers ``result``
(as structured content when the tool declares an output schema, else as text) or, by
default, the tool's name. The attack tests use it to list what an upstream server
could list: clashing names, backtracking patterns, patterns no linear engine runs.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS: list[dict[str, Any]] = json.loads(sys.argv[1])


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name=t["name"],
                description=f"The {t['name']} tool.",
                input_schema=t.get("inputSchema", {"type": "object"}),
                output_schema=t.get("outputSchema"),
            )
            for t in TOOLS
        ]
    )


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    tool = next((t for t in TOOLS if t["name"] == params.name), None)
    if tool is None:
        return types.CallToolResult(
            content=[types.TextContent(text=f"no tool {params.name}")], is_error=True
        )
    result = tool.get("result", params.name)
    if tool.get("outputSchema") is not None:
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(result))], structured_content=result
        )
    return types.CallToolResult(content=[types.TextContent(text=str(result))])


server = Server("listing-test", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
