"""Second attack review: ``metrics`` names are bounded. The store held at most 10,000
names but each of any length, so one tool call could park gigabytes in the serving
process (10,000 names of 1 MB). A name longer than ``MAX_METRIC_NAME`` is an error
result, checked where the counters live (the host side, also for worker isolation)."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness
from harness.runtime.builtins.session_state import MAX_METRIC_NAME


def tool(body: str) -> str:
    lines = "\n".join("      " + ln for ln in body.strip().splitlines())
    return f"---\nscript: |\n  def run(args):\n{lines}\n---\nA tool.\n"


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
def test_a_huge_metric_name_is_refused(tmp_path: Path, isolation: str) -> None:
    (tmp_path / ".harness" / "tools").mkdir(parents=True)
    (tmp_path / "harness.md").write_text(f"---\nruntime: {{isolation: {isolation}}}\n---\nA\n")
    (tmp_path / ".harness" / "tools" / "m.md").write_text(
        tool(
            'big = "x" * 1000000\n'
            "for i in range(3):\n"
            "    metrics.incr(big + str(i))\n"
            "return len(metrics.snapshot())"
        )
    )
    (tmp_path / ".harness" / "tools" / "ok.md").write_text(
        tool(
            f'metrics.incr("n" * {MAX_METRIC_NAME})\nmetrics.set("b", 2)\n'
            'return metrics.snapshot()["b"]'
        )
    )
    with harness.load(tmp_path) as h:
        r = h.call("m")
        assert r.is_error and f"at most {MAX_METRIC_NAME} characters" in r.text, r.text
        assert h.call("ok").value == 2
