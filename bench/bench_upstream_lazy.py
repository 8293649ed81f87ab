"""What a declared upstream server costs a command that does not use it (issue 26 item 2).

Run: python bench/bench_upstream_lazy.py [--rounds 10] [--server time|sdk]

Two projects, identical but for one ``mcp_servers:`` declaration (``mcp-server-time``
from the dev extras by default, default ``loading``), each with one local Markdown
tool. In the same run, alternating project by project, each command is timed as a
user runs it (a new ``harness`` process):

- ``harness list`` (the declared server's listing comes from the cache in
  ``.harness/state/upstream/``, written by one ``harness list --refresh`` before the
  rounds);
- ``harness call hello`` (a local tool: no server is started);
- ``harness list --refresh`` (starts the server: what every ``list`` cost before).

Printed: the median wall time of each, and the ratio with / without the declaration;
then the same for CPU time (the command and every process it started, from
``RUSAGE_CHILDREN``), which a busy machine moves much less.
Goal: ``list`` and ``call`` within 1.3x. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELLO = '---\nscript: |\n  def run(args):\n      return "hi"\n---\nSay hi.\n'


def project(folder: Path, servers: dict[str, object] | None) -> Path:
    (folder / ".harness" / "tools").mkdir(parents=True)
    decl = f"mcp_servers: {json.dumps(servers)}\n" if servers else ""
    (folder / "harness.md").write_text(f"---\n{decl}---\nBench.\n")
    (folder / ".harness" / "tools" / "hello.md").write_text(HELLO)
    return folder


def timed(root: Path, *args: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the harness process and its children)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *args, "--root", str(root)],
        capture_output=True,
        text=True,
    )
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"harness {' '.join(args)} failed: {proc.stderr}")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return dt, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--server", choices=["time", "sdk"], default="time")
    opts = ap.parse_args()
    if opts.server == "time":
        decl: dict[str, object] = {
            "command": [str(Path(sys.executable).with_name("mcp-server-time"))]
        }
    else:
        decl = {"command": [sys.executable, str(ROOT / "tests" / "upstream" / "sdk_server.py")]}
    tmp = Path(tempfile.mkdtemp(prefix="bench-lazy-"))
    plain = project(tmp / "plain", None)
    declared = project(tmp / "declared", {opts.server: decl})
    timed(declared, "list", "--refresh")  # the cache a user has after one listing
    commands = {
        "list": ("list",),
        "call hello (local)": ("call", "hello"),
        "list --refresh": ("list", "--refresh"),
    }
    times: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    for _ in range(opts.rounds):
        for name, args in commands.items():
            for label, root in (("without", plain), ("with", declared)):
                wall, cpu = timed(root, *args)
                times.setdefault((name, label), []).append(wall)
                cpus.setdefault((name, label), []).append(cpu)
    print(
        f"harness commands with and without one declared upstream server "
        f"({opts.server}); {opts.rounds} alternating rounds, medians; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )
    for name in commands:
        a = statistics.median(times[(name, "without")])
        b = statistics.median(times[(name, "with")])
        print(f"  {name:22s} without {a * 1000:7.0f} ms  with {b * 1000:7.0f} ms  ({b / a:.2f}x)")
    print("CPU time (user + system, the command and every process it started; medians)")
    for name in commands:
        a = statistics.median(cpus[(name, "without")])
        b = statistics.median(cpus[(name, "with")])
        print(f"  {name:22s} without {a * 1000:7.0f} ms  with {b * 1000:7.0f} ms  ({b / a:.2f}x)")
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
