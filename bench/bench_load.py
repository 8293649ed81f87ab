"""Benchmark: `harness validate` end to end on 1,000 tools and 50 hooks.

Generates the project in a temporary directory, runs validation as a new process
five times and prints the median, the time per artifact and the ratio to the goal
(0.6 s on the 2-core reference machine). Not a test: nothing asserts on time.

    python bench/bench_load.py [--tools N] [--hooks N] [--runs N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 0.6

TOOL = """---
parameters:
  path:
    type: string
    description: File to search, relative to the workspace
    required: true
  pattern:
    type: string
    description: Text to look for
  limit:
    type: integer
    minimum: 1
    default: 10
timeout_ms: 2000
script: |
  def run(args):
      text = fs.read(args["path"])
      out = []
      for i, line in enumerate(text.split("\\n")):
          if args.get("pattern", "") in line:
              out.append({{"line": i + 1, "text": line}})
      log.info("searched", path=args["path"], count=len(out))
      if not out:
          return {{"matches": [], "note": "no match in tool {n}"}}
      return {{"matches": out[:args.get("limit", 10)]}}
---
Search one file for lines containing a pattern (tool {n}).
"""

HOOK = """---
event: tool.pre
priority: {n}
when: payload["name"].startswith("tool_{n:04d}")
script: |
  def handle(event, payload):
      args = payload["arguments"]
      if "path" in args and args["path"].startswith("/"):
          return block("absolute paths are not allowed")
      log.info("checked", tool=payload["name"])
      return allow()
---
Refuse absolute paths (hook {n}).
"""


def generate(root: Path, tools: int, hooks: int) -> None:
    (root / ".harness" / "tools").mkdir(parents=True, exist_ok=True)
    (root / ".harness" / "hooks").mkdir(parents=True, exist_ok=True)
    (root / "harness.md").write_text("---\nlimits: {max_output_bytes: 65536}\n---\nBe careful.\n")
    for n in range(tools):
        (root / ".harness" / "tools" / f"tool_{n:04d}.md").write_text(TOOL.format(n=n))
    for n in range(hooks):
        (root / ".harness" / "hooks" / f"hook_{n:03d}.md").write_text(HOOK.format(n=n))


def command(root: Path) -> list[str]:
    try:
        from harness.cli import validate

        implemented = "not implemented" not in (validate.__doc__ or "")
    except ImportError:
        implemented = False
    script = Path(sys.executable).with_name("harness")
    if implemented and script.exists():
        return [str(script), "validate", "--root", str(root)]
    if implemented:
        return [
            sys.executable,
            "-c",
            "from harness.cli.main import main; main()",
            "validate",
            "--root",
            str(root),
        ]
    code = (
        "import sys; from pathlib import Path; from harness.validation import check_project; "
        "p = check_project(Path(sys.argv[1])); "
        "print(len(p.tools), len(p.hooks), len(p.problems)); sys.exit(0 if p.ok else 1)"
    )
    return [sys.executable, "-c", code, str(root)]


def stale_bytecode() -> int:
    """How many harness modules the timed process compiles from source on every run.

    With PYTHONDONTWRITEBYTECODE set (as in some dev shells) a module edited since its
    .pyc was written is recompiled each run, which adds tens of ms; installs do not.
    """
    import importlib.util

    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return 0
    package = Path(__file__).resolve().parents[1] / "harness"
    stale = 0
    for source in package.rglob("*.py"):
        cached = Path(importlib.util.cache_from_source(str(source)))
        try:
            head = cached.read_bytes()[:16]
        except OSError:
            stale += 1
            continue
        stat = source.stat()
        if (
            int.from_bytes(head[8:12], "little") != int(stat.st_mtime) & 0xFFFFFFFF
            or int.from_bytes(head[12:16], "little") != stat.st_size & 0xFFFFFFFF
        ):
            stale += 1
    return stale


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=1000)
    ap.add_argument("--hooks", type=int, default=50)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="generate into this directory and keep it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        generate(root, args.tools, args.hooks)
        cmd = command(root)
        times, cpu = [], []
        for _ in range(args.runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
            times.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if proc.returncode not in (0, 1):
                sys.exit(f"validate failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        artifacts = args.tools + args.hooks
        median = statistics.median(times)
        print(f"command: {' '.join(cmd[:3])} ...")
        print(
            f"artifacts: {args.tools} tools + {args.hooks} hooks; exit {proc.returncode}; "
            f"last output: {proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ''}"
        )
        print(
            f"runs: {', '.join(f'{t:.3f}' for t in times)} s wall; "
            f"cpu (user+sys): {', '.join(f'{t:.3f}' for t in cpu)} s; "
            f"load average {os.getloadavg()[0]:.1f} (wall time suffers when the machine is busy)"
        )
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        print(
            f"median cpu: {statistics.median(cpu):.3f} s (all processes); best wall: "
            f"{min(times):.3f} s; {cores} usable cores"
        )
        stale = stale_bytecode()
        if stale:
            print(
                f"note: PYTHONDONTWRITEBYTECODE is set and {stale} harness modules have no "
                "up-to-date .pyc: each run compiles them (run `python -m compileall harness` "
                "without that variable to time what an install runs)"
            )
        print(
            f"median: {median:.3f} s total, {median / artifacts * 1000:.3f} ms per artifact, "
            f"{median / GOAL_S:.2f}x the {GOAL_S} s goal"
        )


if __name__ == "__main__":
    main()
