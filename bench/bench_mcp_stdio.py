"""One ``tools/call`` over stdio: ``harness serve`` against the MCP SDK's own server.

Run: python bench/bench_mcp_stdio.py [--quick] [--calls N]

Both servers are started as stdio subprocesses and stay open at once; one client
(``mcp.ClientSession`` over ``stdio_client``, one event loop) calls them alternately,
so every pair of calls sees the same machine state.

- harness: ``harness serve`` on a project with one Starlark tool ``add`` (a + b) and
  one ``tool.pre`` hook that allows (the default configuration: process isolation).
- MCP SDK: ``mcp.server.mcpserver.MCPServer`` serving the same ``add`` as a plain
  Python function (``server.run("stdio")``).

Reported: the median round trip of each, in ms, and the median over pairs of the
ratio harness / SDK (the figure issue 15 asks to bring to <= 1.1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

TOOL = """\
---
description: Add two integers.
parameters:
  a: {type: integer, required: true}
  b: {type: integer}
script: |
  def run(args):
      return args["a"] + args.get("b", 0)
---
Add two integers.
"""

HOOK = """\
---
event: tool.pre
script: |
  def handle(event, payload):
      return allow()
---
Allow every call.
"""

PEER = """\
from mcp.server.mcpserver import MCPServer

server = MCPServer("peer")


@server.tool()
def add(a: int, b: int = 0) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


server.run("stdio")
"""


def project(base: Path) -> Path:
    root = base / "proj"
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / ".harness" / "hooks").mkdir(parents=True)
    (root / "harness.md").write_text("---\n---\n")
    (root / ".harness" / "tools" / "add.md").write_text(TOOL)
    (root / ".harness" / "hooks" / "allow.md").write_text(HOOK)
    return root


async def run(calls: int, warmup: int) -> dict[str, Any]:
    from contextlib import AsyncExitStack

    from mcp import ClientSession, StdioServerParameters, stdio_client

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root = project(base)
        peer = base / "peer.py"
        peer.write_text(PEER)
        servers = {
            "harness": StdioServerParameters(
                command=str(Path(sys.executable).with_name("harness")),
                args=["serve", "--root", str(root), "--log-level", "warning"],
                cwd=str(root),
                env=env,
            ),
            "sdk": StdioServerParameters(
                command=sys.executable, args=[str(peer)], cwd=str(base), env=env
            ),
        }
        errlog = open(base / "stderr.log", "w")  # noqa: SIM115
        async with AsyncExitStack() as stack:
            sessions = {}
            for name, params in servers.items():
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                sessions[name] = session
            args = {"a": 2, "b": 3}
            times: dict[str, list[float]] = {name: [] for name in sessions}
            for i in range(warmup + calls):
                order = list(sessions) if i % 2 == 0 else list(reversed(sessions))
                for name in order:
                    start = time.perf_counter()
                    result = await sessions[name].call_tool("add", args)
                    took = time.perf_counter() - start
                    text = "".join(getattr(c, "text", "") for c in result.content)
                    if result.is_error or text.strip() != "5":
                        raise RuntimeError(f"{name}: unexpected result {result!r}")
                    if i >= warmup:
                        times[name].append(took)
        errlog.close()
    ratios = [h / s for h, s in zip(times["harness"], times["sdk"], strict=True)]
    return {
        "harness_ms": statistics.median(times["harness"]) * 1000,
        "sdk_ms": statistics.median(times["sdk"]) * 1000,
        "ratio": statistics.median(ratios),
        "calls": calls,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 calls each")
    parser.add_argument("--calls", type=int, default=1000)
    opts = parser.parse_args()
    calls = 200 if opts.quick else opts.calls
    out = asyncio.run(run(calls, warmup=max(20, calls // 10)))
    print(
        textwrap.dedent(f"""\
        stdio tools/call, {out["calls"]} calls each, alternating, same client
        harness serve (Starlark tool, one allow hook)   {out["harness_ms"]:7.3f} ms
        MCP SDK MCPServer (plain Python function)        {out["sdk_ms"]:7.3f} ms
        ratio harness / SDK (median over pairs)          {out["ratio"]:7.2f}x""")
    )


if __name__ == "__main__":
    main()
