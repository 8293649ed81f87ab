"""Benchmark: the cost of process isolation, and concurrency through the worker pool.

Latency (median of N calls of a trivial tool, all in one run so ratios compare):
  bare engine      FrozenModule.call_with on a compiled script (no harness around it)
  inprocess        InProcessRuntime.run_tool
  process          ProcessRuntime.run_tool (one pipe round trip to a warm worker)
  Harness.call     the full pipeline (resolve, validate, hooks, execute), both isolations
Throughput: 64 calls that each run exec.run("sleep", ["0.1"]) through Harness.call_many
with limits.max_concurrency 16 (goal <= 0.6 s; the floor is 4 waves x 0.1 s).

Not a test: nothing asserts on time.

    python bench/bench_workers.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import starlark as sl  # noqa: E402

import harness  # noqa: E402
from harness.config import Config, Limits  # noqa: E402
from harness.runtime.context import CallContext  # noqa: E402
from harness.runtime.engine import Engine, InProcessRuntime  # noqa: E402
from harness.runtime.workers import ProcessRuntime  # noqa: E402

TRIVIAL = 'def run(args):\n    return {"ok": True, "n": args.get("n", 0)}\n'
GOAL_RATIO = 20.0
GOAL_THROUGHPUT_S = 0.6


def median_us(fn: Callable[[], Any], calls: int, rounds: int) -> float:
    """Median over ``rounds`` of the mean per-call time of ``calls`` calls, in µs."""
    for _ in range(min(calls, 200)):
        fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def project(root: Path, isolation: str, concurrency: int, sandbox: str = "auto") -> Path:
    tools = root / ".harness" / "tools"
    tools.mkdir(parents=True)
    (root / "harness.md").write_text(
        f"---\nruntime: {{isolation: {isolation}}}\nlimits: {{max_concurrency: {concurrency}}}\n"
        f'exec: {{sandbox: "{sandbox}"}}\n---\nBenchmark agent.\n'
    )
    (tools / "trivial.md").write_text(
        "---\nparameters:\n  n: {type: integer}\nscript: |\n"
        + textwrap.indent(TRIVIAL, "  ")
        + "---\nTrivial.\n"
    )
    (tools / "nap.md").write_text(
        textwrap.dedent("""\
        ---
        script: |
          def run(args):
              return exec.run("sleep", ["0.1"])["ok"]
        ---
        Sleep 0.1 s.
    """)
    )
    return root


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    opts = ap.parse_args()
    n, r = opts.calls, opts.rounds

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cfg = Config(root=root, workspace=root, limits=Limits(max_concurrency=4))
        engine = Engine()
        frozen = engine.compile("tool", TRIVIAL, "t.md", 1)
        options = sl.EvalOptions(max_callstack_size=64)
        args = {"n": 1}
        bare = median_us(lambda: frozen.call_with(options, "run", args), n, r)

        inproc = InProcessRuntime()
        inproc_us = median_us(
            lambda: inproc.run_tool(TRIVIAL, "t.md", 1, args, CallContext(config=cfg), 1000), n, r
        )
        with ProcessRuntime(cfg) as pool:
            proc_us = median_us(
                lambda: pool.run_tool(TRIVIAL, "t.md", 1, args, CallContext(config=cfg), 1000), n, r
            )
            proc_nodl_us = median_us(
                lambda: pool.run_tool(TRIVIAL, "t.md", 1, args, CallContext(config=cfg), 0), n, r
            )

        results: dict[str, float] = {}
        throughput: dict[str, float] = {}
        for isolation, sandbox in (("inprocess", "auto"), ("process", "auto"), ("process", "off")):
            h = harness.load(project(root / f"{isolation}-{sandbox}", isolation, 16, sandbox))
            with h:
                if sandbox == "auto":
                    results[isolation] = median_us(lambda h=h: h.call("trivial", {"n": 1}), n, r)
                calls = [harness.ToolCall(name="nap", arguments={}, id=str(i)) for i in range(64)]
                h.call_many(calls[:16])  # start the workers
                times = []
                for _ in range(3):
                    start = time.perf_counter()
                    out = h.call_many(calls)
                    times.append(time.perf_counter() - start)
                    assert all(res.value is True for res in out), out[0]
                throughput[f"{isolation}, exec.sandbox {sandbox}"] = statistics.median(times)

    print(f"trivial tool call, median per call ({n} calls x {r} rounds):")
    rows = [
        ("bare engine (frozen call)", bare),
        ("InProcessRuntime.run_tool", inproc_us),
        ("ProcessRuntime.run_tool", proc_us),
        ("ProcessRuntime.run_tool, no deadline", proc_nodl_us),
        ("Harness.call, inprocess", results["inprocess"]),
        ("Harness.call, process", results["process"]),
    ]
    for label, us in rows:
        print(f"  {label:<40} {us:8.1f} us  {us / bare:6.1f}x bare")
    ratio = results["process"] / bare
    print(f"  process round trip over in-process runtime: {proc_us - inproc_us:+.1f} us")
    print(
        f"  goal: Harness.call under process isolation <= {GOAL_RATIO:.0f}x bare: "
        f"{ratio:.1f}x ({'met' if ratio <= GOAL_RATIO else 'NOT met'})"
    )
    print(
        'throughput: 64 calls of exec.run("sleep", ["0.1"]) via Harness.call_many, '
        "max_concurrency 16 (median of 3):"
    )
    for label, secs in throughput.items():
        print(f"  {label:<40} {secs:8.3f} s")
    main_s = throughput["process, exec.sandbox auto"]
    print(
        f"  goal: process isolation <= {GOAL_THROUGHPUT_S} s: {main_s:.3f} s "
        f"({'met' if main_s <= GOAL_THROUGHPUT_S else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
