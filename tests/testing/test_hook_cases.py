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


# -- tool.pre modify run a second time on its own output -----------------------------------

APPEND = """\
---
event: tool.pre
script: |
  def handle(event, payload):
      args = dict(payload["arguments"])
      args["command"] = args["command"] + " --dry-run"
      return modify({"arguments": args})
---
Not idempotent: appends every time.
"""
APPEND_ONCE = """\
---
event: tool.pre
script: |
  def handle(event, payload):
      args = dict(payload["arguments"])
      if not args["command"].endswith(" --dry-run"):
          args["command"] = args["command"] + " --dry-run"
      return modify({"arguments": args})
---
Idempotent: appends once.
"""
FLAGS = """\
---
event: tool.pre
script: |
  def handle(event, payload):
      args = dict(payload["arguments"])
      args["flags"] = list(args.get("flags", [])) + ["-n"]
      return modify({"arguments": args})
---
Not idempotent, in a nested list.
"""
FLIP = """\
---
event: tool.pre
script: |
  def handle(event, payload):
      if payload["arguments"]["command"].startswith("safe "):
          return block("already rewritten")
      return modify({"arguments": {"command": "safe " + payload["arguments"]["command"]}})
---
Blocks its own output.
"""
IDEMPOTENCE_TESTS = """\
---
cases:
  - name: append
    hook: append
    payload: {name: sh, arguments: {command: ls}}
    expect: {decision: modify, payload: {arguments: {command: ls --dry-run}}}
  - name: append once
    hook: append_once
    payload: {name: sh, arguments: {command: ls}}
    expect: {decision: modify, payload: {arguments: {command: ls --dry-run}}}
  - name: flags
    hook: flags
    payload: {name: sh, arguments: {command: ls}}
    expect: {decision: modify}
  - name: flip
    hook: flip
    payload: {name: sh, arguments: {command: ls}}
    expect: {decision: modify}
---
"""


def test_a_tool_pre_modify_that_is_not_idempotent_fails_its_case(tmp_path: Path) -> None:
    hooks = {"append": APPEND, "append_once": APPEND_ONCE, "flags": FLAGS, "flip": FLIP}
    root = project(tmp_path, hooks, IDEMPOTENCE_TESTS)
    code, out = run(root)
    assert code == 1, out
    assert "4 cases: 1 passed, 3 failed" in out, out
    assert (
        'hook "append": modify is not idempotent: run again on its own output it changed '
        'arguments.command ("ls --dry-run" -> "ls --dry-run --dry-run"); make the modify '
        "idempotent (docs/hooks.md: the settle rule)"
    ) in out, out
    assert 'hook "flags": modify is not idempotent' in out and "arguments.flags" in out, out
    assert (
        'hook "flip": modify is not idempotent: run again on its own output it blocked: '
        "already rewritten"
    ) in out, out
    assert 'hook "append_once"' not in out, out
    assert "docs/hooks.md" in out, out


COUNTED_APPEND = """\
---
event: tool.pre
script: |
  def handle(event, payload):
      metrics.incr("rewrites")
      args = dict(payload["arguments"])
      args["command"] = args["command"] + " --dry-run"
      return modify({"arguments": args})
---
Not idempotent, and counts its rewrites.
"""
CALL_TESTS = """\
---
cases:
  - name: once
    call: sh
    args: {command: ls}
    expect: {value: ls --dry-run}
  - name: twice
    steps:
      - call: sh
        args: {command: ls}
        expect: {value: ls --dry-run}
      - call: sh
        args: {command: pwd}
        expect: {value: pwd --dry-run}
---
"""


def test_call_cases_run_each_tool_pre_modify_again_on_the_arguments_it_made(
    tmp_path: Path,
) -> None:
    root = project(tmp_path, {"counted_append": COUNTED_APPEND}, CALL_TESTS)
    code, out = run(root)
    assert code == 1, out
    assert "2 cases: 0 passed, 2 failed" in out, out
    assert out.count('hook "counted_append": modify is not idempotent') == 2, out
    assert '("ls --dry-run" -> "ls --dry-run --dry-run")' in out, out
    assert out.count("\n.harness/tests/t.md:") == 2, out  # nothing else failed


NUMBERED = """\
---
event: tool.pre
script: |
  def handle(event, payload):
      n = metrics.incr("rewrites")
      cache.set("last", n)
      args = dict(payload["arguments"])
      if " #" not in args["command"]:
          args["command"] = args["command"] + " #%d" % n
      return modify({"arguments": args})
---
Idempotent, and numbers the calls it rewrites.
"""
NUMBERED_TESTS = """\
---
cases:
  - name: numbered
    steps:
      - call: sh
        args: {command: ls}
        expect: {value: "ls #1"}
      - call: sh
        args: {command: pwd}
        expect: {value: "pwd #2"}
---
"""


def test_the_second_run_leaves_the_session_state_alone(tmp_path: Path) -> None:
    # The check runs the hook again over a copy of metrics, cache and ctx: the steps see
    # exactly what the real calls did ("pwd #2", not "pwd #3").
    root = project(tmp_path, {"numbered": NUMBERED}, NUMBERED_TESTS)
    code, out = run(root)
    assert code == 0, out


def test_call_cases_with_idempotent_hooks_pass(tmp_path: Path) -> None:
    root = project(tmp_path, {"append_once": APPEND_ONCE}, CALL_TESTS)
    code, out = run(root)
    assert code == 0, out
