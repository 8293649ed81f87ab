"""Per-case cost of real project context (``include: [.git, .venv]``) in ``harness test``.

Run: python bench/bench_test_context.py [--quick]

Builds a small real project (a package, pytest tests, a virtualenv holding pytest, a
git history of N commits) and runs one trivial case (a tool that reads a file: no
command, so only the copy differs) many times with ``include:`` of nothing, ``.venv``
(a link plus a read-only bind), ``.git`` (a copy) and both. Prints the median
milliseconds per case and the difference to no include. Every figure is measured in
this run; nothing is compared with a threshold.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "testing"))

from test_real_context import git, make_venv  # noqa: E402

from harness.testing.runner import Runner  # noqa: E402

TOOL = """\
---
script: |
  def run(args):
      return fs.read("calc/__init__.py")
---
"""


def project(root: Path, commits: int) -> None:
    (root / "calc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "harness.md").write_text("---\nruntime: {isolation: inprocess}\n---\n")
    (root / "tests" / "test_calc.py").write_text("def test_x():\n    assert True\n")
    (root / ".gitignore").write_text(".venv/\n.harness/\n")
    git(root, "init", "-q", "-b", "main")
    for i in range(commits):
        (root / "calc" / "__init__.py").write_text(f"VERSION = {i}\n" + "x = 1\n" * i)
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", f"commit {i}")
    make_venv(root)
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / ".harness" / "tools" / "read_calc.md").write_text(TOOL)


def per_case_ms(root: Path, include: str, cases: int) -> float:
    (root / ".harness" / "tests").mkdir(parents=True, exist_ok=True)
    body = "".join(f"  - {{name: c{i}, call: read_calc}}\n" for i in range(cases))
    test = f"---\ninclude: [{include}]\ncases:\n{body}---\n"
    (root / ".harness" / "tests" / "t.md").write_text(textwrap.dedent(test))
    with Runner(root) as runner:
        files, problems = runner.collect()
        assert not problems, problems
        start = time.perf_counter()
        result = runner.run(files, jobs=1)
        took = time.perf_counter() - start
        assert result.ok, [f.message for r in result.results for f in r.failures]
    return took * 1000.0 / cases


def main() -> None:
    rounds, cases = (3, 10) if "--quick" in sys.argv else (7, 20)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "proj"
        project(root, commits=50)
        variants = ["", ".venv", ".git", ".git, .venv"]
        times: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(rounds):
            for v in variants:  # interleaved: a busy moment hits every variant
                times[v].append(per_case_ms(root, v, cases))
        base = statistics.median(times[""])
        print(f"{cases} cases x {rounds} rounds, median ms per case:")
        for v in variants:
            m = statistics.median(times[v])
            print(f"  include: [{v}]".ljust(28) + f"{m:7.1f} ms  ({m - base:+.1f} ms)")


if __name__ == "__main__":
    main()
