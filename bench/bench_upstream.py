"""Per-call overhead of governing an upstream MCP server (harness/upstream/).

Run: python bench/bench_upstream.py [--quick]

The same server (tests/upstream/sdk_server.py, the official SDK's MCPServer over stdio)
is called two ways, interleaved in rounds so both see the same machine state:

(a) direct: the official SDK client (``mcp.Client``, the client harness itself uses)
    calling ``echo`` from an asyncio loop: one JSON-RPC round trip;
(b) proxy: ``Harness.call("sdk.echo", ...)``: resolve, validate the arguments against the
    upstream inputSchema, tool.pre hooks, the call on the same client from the harness's
    upstream loop thread, outputSchema check, tool.post hooks, rendering;
(b') the same with one tool.pre and one tool.post hook that match (in-process runtime).

Both talk to an unsandboxed server (``sandbox: off``) so the figure is the proxy's cost;
the sandbox adds to start-up, not to a call (one more run, (c), shows the call is the same).
Every figure is the median of per-call times measured in this run; the overhead is the
median of the per-step differences (b) - (a). The CPU time this process spends per call
(process_time, all threads) is printed too: it is what the proxy itself costs, and it
moves much less than wall time when the machine is busy.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = str(ROOT / "tests" / "upstream" / "sdk_server.py")
HOOKS = {
    "pre": "---\nevent: tool.pre\nscript: |\n  def handle(event, payload):\n"
    "      return allow()\n---\n",
    "post": "---\nevent: tool.post\nscript: |\n  def handle(event, payload):\n"
    "      return allow()\n---\n",
}


def project(root: Path, sandbox: str, hooks: bool) -> Path:
    root.mkdir(parents=True)
    servers = {"sdk": {"command": [sys.executable, SERVER], "sandbox": sandbox}}
    (root / "harness.md").write_text(
        f"---\nmcp_servers: {json.dumps(servers)}\nruntime: {{isolation: inprocess}}\n---\n"
    )
    if hooks:
        (root / ".harness" / "hooks").mkdir(parents=True)
        for name, text in HOOKS.items():
            (root / ".harness" / "hooks" / f"{name}.md").write_text(text)
    return root


def main() -> None:  # noqa: C901
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    import harness

    quick = "--quick" in sys.argv
    rounds, per_round = (5, 40) if quick else (10, 100)
    args = {"text": "hello"}
    tmp = Path(tempfile.mkdtemp(prefix="bench-upstream-"))
    plain = harness.load(project(tmp / "plain", "off", False))
    hooked = harness.load(project(tmp / "hooked", "off", True))
    boxed = harness.load(project(tmp / "boxed", "auto", False))
    for h in (plain, hooked, boxed):
        assert not h.call("sdk.echo", args).is_error  # start the server, list its tools

    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    times: dict[str, list[float]] = {
        "direct": [],
        "proxy": [],
        "proxy+2 hooks": [],
        "proxy, sandboxed": [],
    }

    cpu: dict[str, list[float]] = {k: [] for k in times}

    def proxied(h: harness.Harness, key: str | None = None) -> float:
        c0, t0 = time.process_time(), time.perf_counter()
        r = h.call("sdk.echo", args)
        dt = time.perf_counter() - t0
        if key:
            cpu[key].append(time.process_time() - c0)
        assert not r.is_error, r.error
        return dt

    async def measure() -> None:
        async with Client(stdio_client(params), mode="legacy", cache=None) as client:

            async def direct(record: bool = False) -> float:
                c0, t0 = time.process_time(), time.perf_counter()
                r = await client.call_tool("echo", args)
                dt = time.perf_counter() - t0
                if record:
                    cpu["direct"].append(time.process_time() - c0)
                assert not r.is_error
                return dt

            for _ in range(20):  # warm up
                await direct()
                proxied(plain)
            # Interleaved call by call: the four figures of one step see the same machine
            # state, so the per-step differences stay meaningful on a busy machine.
            for _ in range(rounds * per_round):
                times["direct"].append(await direct(True))
                times["proxy"].append(proxied(plain, "proxy"))
                times["proxy+2 hooks"].append(proxied(hooked, "proxy+2 hooks"))
                times["proxy, sandboxed"].append(proxied(boxed, "proxy, sandboxed"))

    asyncio.run(measure())
    for h in (plain, hooked, boxed):
        h.close()

    base = statistics.median(times["direct"]) * 1e6
    print(
        f"upstream call overhead ({rounds * per_round} interleaved steps; medians; "
        "overhead = median of the per-step differences)"
    )
    for name, values in times.items():
        med = statistics.median(values) * 1e6
        if name == "direct":
            print(f"  {name:18s} {med:8.0f} us")
            continue
        diff = statistics.median(v - d for v, d in zip(values, times["direct"], strict=True)) * 1e6
        print(f"  {name:18s} {med:8.0f} us  overhead {diff:+6.0f} us  (x{med / base:.2f})")
    # CPU time of this process per call (the server's work is in another process): what
    # the proxy itself spends, much less sensitive to other load on the machine.
    cbase = statistics.median(cpu["direct"]) * 1e6
    print("CPU time in the calling process per call (medians)")
    for name, values in cpu.items():
        med = statistics.median(values) * 1e6
        extra = "" if name == "direct" else f"  (+{med - cbase:.0f} us)"
        print(f"  {name:18s} {med:8.0f} us{extra}")


if __name__ == "__main__":
    main()
