"""exec.run("true") in the sandbox vs a plain subprocess.run(["true"]).

    /work/venv/bin/python bench/bench_sandbox.py [N]

Prints the median (and minimum) of N interleaved runs (default 100) of each case and
the overhead of the sandboxed call, started cold (prepared sandboxes off) and in the
sandbox the previous call prepared (runtime/prewarm.py; the other cases run in
between, as a model turn would). Goal (issue 3): <= 5 ms median overhead. The
"floor" row is bubblewrap doing almost nothing, for scale; on a loaded machine
compare rows within one run, and the minimums, rather than absolute medians.
"""

from __future__ import annotations

import dataclasses
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness.config import Config, ExecConfig
from harness.runtime import prewarm, sandbox
from harness.runtime.builtins.proc import run
from harness.runtime.context import CallContext


def medians_ms(
    cases: dict[str, Callable[[], object]], n: int
) -> tuple[dict[str, float], dict[str, float]]:
    """(median, minimum) per case, interleaved so load changes hit every case alike."""
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(n):
        for name, fn in cases.items():
            t = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t) * 1000.0)
    return (
        {k: statistics.median(v) for k, v in times.items()},
        {k: min(v) for k, v in times.items()},
    )


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / ".git").mkdir()
        (ws / ".harness").mkdir()
        (ws / "harness.md").write_text("---\n---\n")
        base = Config(root=ws, workspace=ws)
        boxed = CallContext(config=dataclasses.replace(base, exec=ExecConfig(sandbox="required")))
        plain_ctx = CallContext(config=dataclasses.replace(base, exec=ExecConfig(sandbox="off")))
        bwrap, flags, why = sandbox.status()  # the one-time probe, outside the timing
        if flags is None:
            sys.exit(f"bubblewrap unusable here: {why}")
        assert run(boxed, "true")["ok"]
        raw = [bwrap, *flags, *sandbox._system_binds(), "--", "/usr/bin/true"]
        floor = [bwrap, "--ro-bind", "/", "/", "/usr/bin/true"]

        def cold() -> object:
            prewarm.ENABLED = False
            try:
                return run(boxed, "true")
            finally:
                prewarm.ENABLED = True

        m, lo = medians_ms(
            {
                "plain": lambda: subprocess.run(["true"]),
                "off": lambda: run(plain_ctx, "true"),
                "floor": lambda: subprocess.run(floor),
                "bare": lambda: subprocess.run(raw),
                "cold": cold,
                "boxed": lambda: run(boxed, "true"),
            },
            n,
        )
        prewarm.discard_all()
    rows = [
        ("subprocess.run(['true'])", "plain"),
        ("exec.run('true'), sandbox off", "off"),
        ("bwrap --ro-bind / / true (floor)", "floor"),
        ("bwrap, our flags, no workspace", "bare"),
        ("exec.run('true'), sandbox cold", "cold"),
        ("exec.run('true'), sandbox prepared", "boxed"),
    ]
    print(f"{n} runs per case, interleaved        median      min")
    for label, key in rows:
        print(f"{label:36s} {m[key]:7.2f} ms {lo[key]:7.2f} ms")
    print(
        f"{'sandbox overhead, cold':36s} {m['cold'] - m['plain']:7.2f} ms "
        f"{lo['cold'] - lo['plain']:7.2f} ms"
    )
    print(
        f"{'sandbox overhead, prepared':36s} {m['boxed'] - m['plain']:7.2f} ms "
        f"{lo['boxed'] - lo['plain']:7.2f} ms   goal <= 5 ms median"
    )
    print(f"{'ratio sandboxed / plain':36s} {m['boxed'] / m['plain']:7.2f}x")


if __name__ == "__main__":
    main()
