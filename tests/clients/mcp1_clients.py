"""Drive `harness serve` with clients whose releases pin mcp 1.x: the OpenAI Agents SDK
and langchain-mcp-adapters. Runs INSIDE their own virtualenv (see
tests/serve/test_mcp_pinned_clients.py), never in the project's (mcp 2.x).

    python mcp1_clients.py '{"stdio": [ARGV...], "cwd": DIR, "url": URL, "token": TOKEN}'

Prints one JSON object: per client and transport, the tools it listed and what a call
of ``echo`` and of ``big`` (a truncated output, then read_output) returned.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


def text_of(result: Any) -> str:
    parts = getattr(result, "content", None)
    if parts is None:
        return str(result)
    return "".join(getattr(p, "text", "") for p in parts)


async def openai_agents(cfg: dict[str, Any]) -> dict[str, Any]:
    from agents.mcp import MCPServerStdio, MCPServerStreamableHttp

    out: dict[str, Any] = {}
    servers = {
        "stdio": MCPServerStdio(
            params={
                "command": cfg["stdio"][0],
                "args": cfg["stdio"][1:],
                "cwd": cfg["cwd"],
                "env": cfg.get("env"),
            },
            cache_tools_list=True,
            client_session_timeout_seconds=60,
        ),
        "http": MCPServerStreamableHttp(
            params={"url": cfg["url"], "headers": {"Authorization": f"Bearer {cfg['token']}"}},
            cache_tools_list=True,
            client_session_timeout_seconds=60,
        ),
    }
    for transport, server in servers.items():
        async with server:
            tools = await server.list_tools()
            echo = await server.call_tool("echo", {"text": "hi"})
            big = text_of(await server.call_tool("big", {}))
            ref = big.split('read_output(ref="')[1].split('"')[0] if "read_output(" in big else None
            page = text_of(await server.call_tool("read_output", {"ref": ref})) if ref else ""
            out[transport] = {
                "tools": sorted(t.name for t in tools),
                "echo": text_of(echo),
                "echo_structured": getattr(echo, "structuredContent", None),
                "big_truncated": ref is not None,
                "page_ok": bool(page) and "unknown output ref" not in page,
                "protocol": getattr(server.session, "_protocol_version", None)
                if server.session
                else None,
            }
    return out


async def langchain(cfg: dict[str, Any]) -> dict[str, Any]:
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient(
        {
            "stdio": {
                "transport": "stdio",
                "command": cfg["stdio"][0],
                "args": cfg["stdio"][1:],
                "cwd": cfg["cwd"],
                "env": cfg.get("env"),
            },
            "http": {
                "transport": "streamable_http",
                "url": cfg["url"],
                "headers": {"Authorization": f"Bearer {cfg['token']}"},
            },
        }
    )
    out: dict[str, Any] = {}
    for transport in ("stdio", "http"):
        # The adapters' default: a new session (a new server process over stdio) per call.
        tools = {t.name: t for t in await client.get_tools(server_name=transport)}
        echo = await tools["echo"].ainvoke({"text": "hi"})
        big = await tools["big"].ainvoke({})
        big_text = big if isinstance(big, str) else json.dumps(big, default=str)
        ref = (
            big_text.split('read_output(ref=\\"' if '\\"' in big_text else 'read_output(ref="')[
                1
            ].split('\\"' if '\\"' in big_text else '"')[0]
            if "read_output(" in big_text
            else None
        )
        page = await tools["read_output"].ainvoke({"ref": ref}) if ref else ""
        page_text = page if isinstance(page, str) else json.dumps(page, default=str)
        out[transport] = {
            "tools": sorted(tools),
            "echo": json.dumps(echo, default=str),
            "big_truncated": ref is not None,
            "page_ok": bool(page_text) and "unknown output ref" not in page_text,
        }
    return out


async def main() -> None:
    cfg = json.loads(sys.argv[1])
    result: dict[str, Any] = {}
    for name, fn in (("openai-agents", openai_agents), ("langchain-mcp-adapters", langchain)):
        try:
            result[name] = await fn(cfg)
        except Exception as exc:  # noqa: BLE001 - reported, the test fails on it
            import traceback

            result[name] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-3000:],
            }
    import importlib.metadata as md

    result["versions"] = {
        d: md.version(d) for d in ("mcp", "openai-agents", "langchain-mcp-adapters")
    }
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
