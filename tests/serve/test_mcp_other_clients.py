"""Clients nobody here wrote: fastmcp's Client and pydantic-ai's MCPToolset, against
`harness serve` over streamable HTTP with a bearer token."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from serve_helpers import MODERN, http_server, spilled_ref

TOKEN = "other-clients-token-0123456789"
ENV = {"OTHER_TOKEN": TOKEN}


def _text(result: object) -> str:
    return "".join(getattr(c, "text", "") for c in getattr(result, "content", []))


def test_fastmcp_client(project: Path) -> None:
    from fastmcp import Client

    async def go() -> None:
        async with http_server(project, "--auth-token-env", "OTHER_TOKEN", env=ENV) as url:
            async with Client(url, auth=TOKEN) as c:
                assert c.session.protocol_version == MODERN  # fastmcp 4 negotiates 2026
                names = {t.name for t in await c.list_tools()}
                assert {"echo", "read_output", "tool_search"} <= names
                echo = await c.call_tool("echo", {"text": "hi"})
                assert echo.structured_content == {"echo": "hi"}
                big = await c.call_tool("big", {})
                ref, offset = spilled_ref(_text(big))
                page = await c.call_tool("read_output", {"ref": ref, "offset": offset})
                assert "xxxx" in _text(page)
                typed = await c.call_tool("big_typed", {}, raise_on_error=False)
                assert typed.is_error is True and 'read_output(ref="' in _text(typed)
            refused = False
            try:
                async with Client(url, auth="wrong-token-0123456789"):
                    pass
            except Exception:  # noqa: BLE001 - fastmcp reports the 401 as an MCPError
                refused = True
            assert refused, "a wrong token must not connect"

    anyio.run(go)


def test_pydantic_ai_agent_calls_a_served_tool(project: Path) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.extend(t.name for t in info.function_tools)
        returns = [
            p
            for m in messages
            for p in getattr(m, "parts", [])
            if getattr(p, "part_kind", "") == "tool-return"
        ]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("echo", {"text": "pong", "times": 2})])
        return ModelResponse(parts=[TextPart(f"tool said {returns[-1].content}")])

    async def go() -> str:
        async with http_server(project, "--auth-token-env", "OTHER_TOKEN", env=ENV) as url:
            toolset = MCPToolset(url, headers={"Authorization": f"Bearer {TOKEN}"})
            agent = Agent(FunctionModel(model), toolsets=[toolset])
            async with agent:
                result = await agent.run("ping")
            return str(result.output)

    out = anyio.run(go)
    assert "pongpong" in out
    assert {"echo", "read_output"} <= set(seen)


INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"


@pytest.fixture(scope="session")
def inspector() -> str:
    """The MCP Inspector CLI from npm, installed once under .ci/node (git-ignored)."""
    import shutil
    import subprocess

    prefix = Path(__file__).resolve().parents[2] / ".ci" / "node"
    binary = prefix / "node_modules" / ".bin" / "mcp-inspector"
    if not binary.exists():
        npm = shutil.which("npm")
        assert npm is not None, "the Inspector test needs node and npm (apt-get install npm)"
        subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--silent",
                "--prefix",
                str(prefix),
                INSPECTOR,
            ],
            check=True,
            timeout=600,
        )
    return str(binary)


def _inspect(inspector: str, *args: str) -> dict:
    import json
    import subprocess

    done = subprocess.run([inspector, "--cli", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


def test_inspector_cli_stdio_and_http(project: Path, inspector: str) -> None:
    import os
    import sys

    from serve_helpers import serve_argv

    argv = serve_argv(project)
    listed = _inspect(
        inspector, "-e", f"PYTHONPATH={os.pathsep.join(sys.path)}", *argv, "--method", "tools/list"
    )
    names = {t["name"] for t in listed["tools"]}
    assert {"echo", "read_output", "tool_search"} <= names
    echo = _inspect(
        inspector,
        "-e",
        f"PYTHONPATH={os.pathsep.join(sys.path)}",
        *argv,
        "--method",
        "tools/call",
        "--tool-name",
        "echo",
        "--tool-arg",
        "text=hi",
    )
    assert echo["structuredContent"] == {"echo": "hi"}

    async def go() -> None:
        async with http_server(project, "--auth-token-env", "OTHER_TOKEN", env=ENV) as url:
            auth = ["--header", f"Authorization: Bearer {TOKEN}"]
            big = await anyio.to_thread.run_sync(
                lambda: _inspect(
                    inspector, url, *auth, "--method", "tools/call", "--tool-name", "big"
                )
            )
            ref, offset = spilled_ref(big["content"][0]["text"])
            # A second Inspector process (a new connection) reads it: same token.
            page = await anyio.to_thread.run_sync(
                lambda: _inspect(
                    inspector,
                    url,
                    *auth,
                    "--method",
                    "tools/call",
                    "--tool-name",
                    "read_output",
                    "--tool-arg",
                    f"ref={ref}",
                    f"offset={offset}",
                )
            )
            assert "xxxx" in page["content"][0]["text"] and not page.get("isError")

    anyio.run(go)
