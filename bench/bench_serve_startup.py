"""Startup of `harness serve` over stdio: process start to the `initialize` answer.

Clients that start a server per call (langchain-mcp-adapters' default) pay this on
every call. Measured for the repository's own .harness/ (process isolation, the
starter tools and hooks), against `python -c pass` as the interpreter's floor.

    .venv/bin/python bench/bench_serve_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}


CPU: list[float] = []


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far: unlike wall time, not
    inflated by other jobs on a busy machine."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one(argv: list[str], root: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(INIT) + "\n").encode())
    proc.stdin.flush()
    line = proc.stdout.readline()
    took = time.perf_counter() - start
    CPU.append(cpu_s(proc.pid))
    assert b'"result"' in line, line
    proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return took


def floor() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--root", type=Path, default=ROOT)
    opts = ap.parse_args()
    argv = [sys.executable, "-m", "harness.cli.main", "serve", "--root", str(opts.root)]
    one(argv, opts.root)  # warm the page cache and bytecode
    CPU.clear()
    times = [one(argv, opts.root) for _ in range(opts.runs)]
    base = [floor() for _ in range(opts.runs)]
    med, fl = statistics.median(times), statistics.median(base)
    print(
        f"harness serve (stdio) start -> initialize answer: median {med * 1000:.0f} ms "
        f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}, n={opts.runs}); "
        f"python -c pass: {fl * 1000:.0f} ms; ratio {med / fl:.1f}x; CPU used by then: "
        f"median {statistics.median(CPU) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
