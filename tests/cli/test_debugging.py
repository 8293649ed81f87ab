"""Debugging a script (issue 25): ``harness call -v`` / ``harness test -v`` show what
scripts print and log with the file and line of the call, and script errors carry the
traceback of every frame, helpers included, in the Markdown file's lines. Both
isolation modes; real Starlark, real workers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import cli

TOOL = """---
script: |
  def helper(d):
      print("in helper", d["a"])
      log.info("about to look up", key = "x")
      return d["missing"]

  def run(args):
      log("start")
      return helper({"a": 1})
---
Fails in a helper.
"""
# Line numbers in keyerr.md: the script starts on line 3.
PRINT_LINE, LOG_LINE, LOOKUP_LINE, START_LINE, CALL_LINE = 4, 5, 6, 9, 10
TESTS = """---
cases:
  - name: keyerr fails
    call: keyerr
    expect:
      error_contains: missing
---
"""


def _project(root: Path, isolation: str) -> Path:
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / ".harness" / "tests").mkdir()
    (root / "harness.md").write_text(f"---\nruntime:\n  isolation: {isolation}\n---\n")
    (root / ".harness" / "tools" / "keyerr.md").write_text(TOOL)
    (root / ".harness" / "tests" / "debug.md").write_text(TESTS)
    return root


ISOLATION = ["process", "inprocess"]
T = ".harness/tools/keyerr.md"


@pytest.mark.parametrize("isolation", ISOLATION)
def test_call_verbose_shows_print_and_log_with_file_and_line(
    tmp_path: Path, isolation: str
) -> None:
    root = _project(tmp_path, isolation)
    r = CliRunner().invoke(cli, ["call", "-v", "keyerr", "--root", str(root)])
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    assert lines[:3] == [
        f"{T}:{START_LINE}: info: start",
        f"{T}:{PRINT_LINE}: print: in helper 1",
        f'{T}:{LOG_LINE}: info: about to look up key="x"',
    ], r.stderr
    quiet = CliRunner().invoke(cli, ["call", "keyerr", "--root", str(root)])
    assert "print:" not in quiet.stderr and "about to look up" not in quiet.stderr


@pytest.mark.parametrize("isolation", ISOLATION)
def test_a_script_error_carries_the_traceback_of_every_frame(
    tmp_path: Path, isolation: str
) -> None:
    root = _project(tmp_path, isolation)
    r = CliRunner().invoke(cli, ["call", "keyerr", "--root", str(root)])
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        f'Key `"missing"` was not found (at {T}:{LOOKUP_LINE})',
        "Traceback (most recent call last):",
        f"  {T}:{CALL_LINE}, in run",
        '    return helper({"a": 1})',
        f"  {T}:{LOOKUP_LINE}, in helper",
        '    return d["missing"]',
    ]


def test_a_failing_builtin_in_a_helper_names_both_frames(tmp_path: Path) -> None:
    root = _project(tmp_path, "inprocess")
    (root / ".harness" / "tools" / "keyerr.md").write_text(
        TOOL.replace('return d["missing"]', 'return fs.read("nope.txt")')
    )
    r = CliRunner().invoke(cli, ["call", "keyerr", "--root", str(root)])
    lines = r.stderr.splitlines()
    assert lines[0].endswith(f"(at {T}:{LOOKUP_LINE})"), r.stderr
    assert lines[2:] == [
        f"  {T}:{CALL_LINE}, in run",
        '    return helper({"a": 1})',
        f"  {T}:{LOOKUP_LINE}, in helper",
        '    return fs.read("nope.txt")',
    ]


@pytest.mark.parametrize("isolation", ISOLATION)
def test_test_verbose_shows_each_case_output(tmp_path: Path, isolation: str) -> None:
    root = _project(tmp_path, isolation)
    r = CliRunner().invoke(cli, ["test", "-v", "--root", str(root)])
    assert r.exit_code == 0, r.output
    assert r.stderr.splitlines() == [
        "-- .harness/tests/debug.md::keyerr fails",
        f"   {T}:{START_LINE}: info: start",
        f"   {T}:{PRINT_LINE}: print: in helper 1",
        f'   {T}:{LOG_LINE}: info: about to look up key="x"',
    ]
    quiet = CliRunner().invoke(cli, ["test", "--root", str(root)])
    assert quiet.exit_code == 0 and quiet.stderr == ""
