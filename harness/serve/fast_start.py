"""A fast ``initialize`` answer for ``harness serve`` over stdio (no MCP SDK import).

Importing the MCP SDK takes most of a second, and clients that start a server per call
pay it every time. So the stdio server reads the client's first line itself, loads
the project, and when that line is a (handshake-era) ``initialize`` request answers it
at once, with what the SDK would answer. Only then is the SDK imported; the first
line is replayed into it and its own answer to that request is dropped (and compared
with ours: a difference is logged, and the tests check there is none).

This module must not import ``mcp``, ``mcp_types``, ``anyio`` or ``pydantic``.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from harness.serve.info import changes_possible, version

log = logging.getLogger("harness.serve")

# The handshake protocol versions of the installed SDK (mcp_types.version); checked
# against the SDK's own answer on every start (see stdio.Connection).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MAX_LINE = 1 << 20


def read_first_line(fd: int = 0) -> bytes:
    """The first line the client sends, read without buffering past its end (so the
    SDK's reader gets everything after it)."""
    out = bytearray()
    while len(out) < MAX_LINE:
        chunk = os.read(fd, 1)
        if not chunk:
            break
        out += chunk
        if chunk == b"\n":
            break
    return bytes(out)


def initialize_answer(
    line: bytes, *, instructions: str | None, version: str, tools_changed: bool
) -> dict[str, Any] | None:
    """The answer to ``line`` when it is a well-formed ``initialize`` request, else None
    (the SDK answers anything else, errors included)."""
    try:
        request = json.loads(line)
    except ValueError:
        return None
    if not isinstance(request, dict) or request.get("method") != "initialize":
        return None
    rid, params = request.get("id"), request.get("params")
    if (
        request.get("jsonrpc") != "2.0"
        or type(rid) not in (int, str)
        or not isinstance(params, dict)
    ):
        return None
    client = params.get("clientInfo")
    requested = params.get("protocolVersion")
    if (
        not isinstance(requested, str)
        or not isinstance(params.get("capabilities"), dict)
        or not isinstance(client, dict)
        or not isinstance(client.get("name"), str)
        or not isinstance(client.get("version"), str)
    ):
        return None
    negotiated = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    result: dict[str, Any] = {"capabilities": {"tools": {"listChanged": tools_changed}}}
    if instructions is not None:
        result["instructions"] = instructions
    result["protocolVersion"] = negotiated
    result["serverInfo"] = {"name": "harness", "version": version}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def write_answer(answer: dict[str, Any], fd: int = 1) -> None:
    data = (json.dumps(answer, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def serve_stdio(
    root: Any, *, watch: bool = False, watch_interval: float = 0.5, harness: Any = None
) -> None:
    """``harness serve`` over stdio: answer ``initialize`` first, then start the SDK.
    ``harness``: an already loaded Harness to serve (``harness.serve(h)``)."""
    import asyncio

    from harness.core import load as load_harness

    for name in ("mcp", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)
    line = read_first_line()
    if not line.strip():
        return  # the client went away before saying anything
    if harness is None:
        harness = load_harness(root)  # LoadError propagates: the CLI prints the problems
    answer = initialize_answer(
        line,
        instructions=harness.system_prompt,
        version=version(),
        tools_changed=changes_possible(harness, watch),
    )
    if answer is not None:
        write_answer(answer)
    from harness.serve.mcp import HarnessMCPServer, quiet_sdk_logs
    from harness.serve.stdio import serve_stdio as serve_connection

    quiet_sdk_logs()
    server = HarnessMCPServer(root, watch=watch, watch_interval=watch_interval, harness=harness)
    try:
        asyncio.run(serve_connection(server, replay=(line, answer)))
    finally:
        server.close()
