"""``harness test`` hook cases: session state built-ins work there (issue 23 class 6), and
every tool.pre modify is run again on its own output (the settle rule, docs/hooks.md)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import cli

TOOL = """\
---
parameters:
  command: {type: string, required: true}
  flags: {type: array, items: {type: string}}
script: |
  def run(args):
      return args["command"]
---
Runs nothing.
"""


def project(
    tmp_path: Path, hooks: dict[str, str], tests: str, isolation: str = "inprocess"
) -> Path:
    (tmp_path / "harness.md").write_text(
        f"---\nruntime: {{isolation: {isolation}}}\nmeta: {{enabled: true}}\n---\nPrompt.\n"
    )
    for kind, items in (("tools", {"sh": TOOL}), ("hooks", hooks), ("tests", {"t": tests})):
        folder = tmp_path / ".harness" / kind
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in items.items():
            (folder / f"{name}.md").write_text(textwrap.dedent(text))
    return tmp_path


def run(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["test", "--root", str(root), *args])
    return result.exit_code, result.output


# -- metrics, ctx and cache in hook cases --------------------------------------------------

COUNTER = """\
---
event: meta.tool_register
script: |
  def handle(event, payload):
      n = metrics.incr("registrations")
      ctx.set("last", payload["name"])
      cache.set("seen", cache.get("seen", 0) + 1)
      if ctx.get("last") != payload["name"] or cache.get("seen") != n:
          return block("state is broken")
      if n > 1:
          return block("registration number %d" % n)
      return allow()
---
Counts registrations.
"""
BUDGET = """\
---
event: tool.pre
script: |
  def handle(event, payload):
      calls = metrics.incr("calls." + payload["name"])
      ctx.set("seen", ctx.get("seen", 0) + 1)
      if calls > 3:
          return block("budget spent")
      return allow()
---
A call budget.
"""
STATE_TESTS = """\
---
cases:
  - name: registration counter
    hook: counter
    payload: {name: helper, description: d, parameters: {}, script: "", replace: false}
    expect: {decision: allow}
  - name: budget
    hook: budget
    payload: {name: sh, arguments: {command: ls}}
    expect: {decision: allow}
---
"""


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
def test_hook_cases_have_metrics_ctx_and_cache(tmp_path: Path, isolation: str) -> None:
    # Before: "metrics are only available inside a session" made both hooks fail closed.
    root = project(tmp_path, {"counter": COUNTER, "budget": BUDGET}, STATE_TESTS, isolation)
    code, out = run(root)
    assert code == 0, out
    assert "2 passed" in out, out
