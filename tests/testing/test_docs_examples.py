"""The worked example of docs/testing.md (a guard tested both ways) runs as printed."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from harness.cli.main import cli

DOC = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()


def block(after: str) -> str:
    m = re.search(re.escape(after) + r".*?```markdown\n(.*?)```", DOC, re.S)
    assert m, after
    return m.group(1)


def test_the_friday_guard_example_passes_and_fails_when_it_should(tmp_path: Path) -> None:
    tools, hooks, tests = (tmp_path / ".harness" / d for d in ("tools", "hooks", "tests"))
    for d in (tools, hooks, tests):
        d.mkdir(parents=True)
    (tmp_path / "harness.md").write_text("---\nruntime: {isolation: inprocess}\n---\n")
    (tools / "deploy.md").write_text(
        "---\nparameters:\n  target: {type: string, required: true}\nscript: |\n"
        '  def run(args):\n      return "deployed " + args["target"]\n---\n'
    )
    (hooks / "friday_guard.md").write_text(block("a hook that refuses deploys"))
    cases = block("`.harness/tests/friday_guard.md`")
    (tests / "friday_guard.md").write_text(cases)
    result = CliRunner().invoke(cli, ["test", "--root", str(tmp_path), "--coverage"])
    assert result.exit_code == 0, result.output
    assert "4 cases: 4 passed" in result.output
    assert "every block and modify was produced" in result.output
    # Late Thursday in UTC is Friday in Berlin: the same cases fail with a Thursday
    # clock that is already Friday there.
    (tests / "friday_guard.md").write_text(
        cases.replace("2026-01-08T16:00:00Z", "2026-01-08T23:30:00Z")
    )
    result = CliRunner().invoke(cli, ["test", "--root", str(tmp_path)])
    assert result.exit_code == 1
    assert (
        'hook "friday_guard": expected decision allow, got block: no production deploys '
        "on Fridays (Berlin time)" in result.output
    )
