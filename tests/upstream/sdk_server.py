"""A real MCP server written with the official SDK (``MCPServer``), for the upstream tests.

Run: ``python sdk_server.py stdio`` or ``python sdk_server.py http PORT``. Tools:
echo, add (structured output), secret (returns a token a hook redacts), big (a large
output), fail (an isError result), flaky (crashes the process on its first call per
marker file: a transient failure), slow (sleeps), pid, whoami_env, read_path (reads any
host path: the sandbox test), fetch (opens a TCP connection), grow (adds a tool and
sends tools/list_changed), write_once (annotated non-idempotent).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

server = MCPServer("sdk-test")


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return text


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@server.tool(description="Return a string holding a secret token.")
def secret() -> str:
    return "the key is sk-live-123456 keep it safe"


@server.tool(description="Return a large text of N kilobytes.")
def big(kb: Annotated[int, Field(ge=1, le=4096)] = 200) -> str:
    line = "0123456789abcdef" * 4 + "\n"
    return line * (kb * 1024 // len(line))


@server.tool(description="Always fails with an isError result.")
def fail(reason: str = "nope") -> str:
    raise ToolError(f"failing on purpose: {reason}")


@server.tool(description="Crash the server process on the first call for a marker file.")
def flaky(marker: str) -> str:
    if not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write("crashed once\n")
        print("flaky: going down on purpose", file=sys.stderr, flush=True)
        os._exit(3)
    return "recovered"


@server.tool(description="Sleep for ms milliseconds.")
async def slow(ms: int) -> str:
    await asyncio.sleep(ms / 1000)
    return f"slept {ms} ms"


@server.tool(description="The server's process id.")
def pid() -> int:
    return os.getpid()


@server.tool(description="The server's environment variables.")
def whoami_env() -> dict[str, str]:
    return dict(os.environ)


@server.tool(description="Read a file at any path.")
def read_path(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(2000)
    except OSError as exc:
        raise ToolError(str(exc)) from None


@server.tool(description="Write a file in the current directory.")
def write_file(path: str, text: str) -> str:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise ToolError(str(exc)) from None
    return os.path.abspath(path)


@server.tool(description="Open a TCP connection to host:port.")
def connect(host: str, port: int) -> str:
    try:
        with socket.create_connection((host, port), timeout=3):
            return "connected"
    except OSError as exc:
        return f"refused: {exc}"


@server.tool(description="GET a URL with urllib (which follows the *_proxy variables).")
def fetch(url: str) -> str:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        raise ToolError(f"HTTP {exc.code}: {exc.read().decode('utf-8', 'replace')}") from None
    except OSError as exc:
        raise ToolError(f"unreachable: {exc}") from None


@server.tool(
    description="Append to a counter file; not idempotent.",
    annotations=ToolAnnotations(idempotentHint=False, destructiveHint=True),
)
def write_once(marker: str) -> str:
    with open(marker, "a") as f:
        f.write("x")
    if os.path.getsize(marker) == 1:
        os._exit(4)
    return "written"


@server.tool(description="Add a tool named NAME and tell the client the list changed.")
async def grow(name: str, ctx: Context) -> str:
    def extra() -> str:
        return f"I am {name}"

    server.add_tool(extra, name=name, description=f"grown tool {name}")
    # Both ways a server says so: the 2025 notification and the 2026 listen bus.
    try:
        await ctx.request_context.session.send_tool_list_changed()
    except Exception:  # noqa: BLE001 - not a handshake-era connection
        pass
    await ctx.notify_tools_changed()
    return f"added {name}"


@server.tool(description="The value of an HTTP request header (HTTP transport only).")
def header(name: str, ctx: Context) -> str:
    return dict(ctx.headers or {}).get(name.lower(), "")


def fail_first_call(app, marker: str):
    """ASGI middleware: the first tools/call of a "flaky_http" tool gets HTTP 503 (once
    per marker file), as a proxy or a restarting server would answer."""

    async def wrapped(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        chunks, more = [], True
        while more:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            more = msg.get("more_body", False)
        body = b"".join(chunks)
        if b'"flaky_http"' in body and not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write("503 once\n")
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [(b"content-type", b"text/plain")],
                }
            )
            await send({"type": "http.response.body", "body": b"try again"})
            return None
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await app(scope, replay, send)

    return wrapped


@server.tool(description="Answers once the HTTP server stops failing (see fail_first_call).")
def flaky_http() -> str:
    return "ok after 503"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        import uvicorn

        marker = sys.argv[3] if len(sys.argv) > 3 else os.devnull + ".none"
        app = fail_first_call(server.streamable_http_app(), marker)
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        server.run()
