"""Wall time of ``harness test`` on this repository's own test files.

Run: python bench/bench_harness_test.py [--quick]

Runs the repository's ``.harness/tests/`` through :class:`harness.testing.runner.Runner`
(as ``harness test`` does, two jobs) with the case copies in memory (``/dev/shm``) and
on the temporary folder's disk, interleaved, and prints the medians and their ratio.
Every figure is measured in this run.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness.testing.runner import Runner

REPO = Path(__file__).resolve().parents[1]


def once(scratch: str | None) -> float:
    with Runner(REPO) as runner:
        runner.scratch = scratch
        files, problems = runner.collect()
        assert not problems, problems
        start = time.perf_counter()
        result = runner.run(files, jobs=2)
        took = time.perf_counter() - start
        assert result.ok
    return took


def main() -> None:
    rounds = 3 if "--quick" in sys.argv else 7
    disk = tempfile.gettempdir()
    mem: list[float] = []
    tmp: list[float] = []
    for _ in range(rounds):
        mem.append(once("/dev/shm"))
        tmp.append(once(disk))
    m, d = statistics.median(mem), statistics.median(tmp)
    with Runner(REPO) as runner:
        cases = sum(len(tf.cases) for tf in runner.collect()[0])
    print(
        f"harness test, {cases} cases of {REPO.name}/.harness/tests, 2 jobs, "
        f"{rounds} rounds interleaved"
    )
    print(f"  copies in /dev/shm: median {m:.2f} s")
    print(f"  copies in {disk}: median {d:.2f} s  ({d / m:.1f}x)")


if __name__ == "__main__":
    main()
