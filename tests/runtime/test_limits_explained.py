"""Limits that explain themselves (issue 25): a default timeout for tools that set
none, a CPU loop reported as a timeout (not as memory), a memory bomb as memory, and
an integer too large for a built-in named as such. Real Starlark, real workers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import harness
from harness.cli.main import cli

LOOP = """---
script: |
  def run(args):
      n = 0
      for i in range(1000000000):
          n += i
      return n
---
A plain CPU loop.
"""
BIG_RANGE = """---
script: |
  def helper(n):
      return len(range(n))

  def run(args):
      return helper(100000000000)
---
An integer too large for range().
"""
QUICK = """---
script: |
  def run(args):
      return 1
---
Quick.
"""
CAPPED = """---
timeout_ms: 2000
script: |
  def run(args):
      return 1
---
Capped.
"""


def _project(root: Path, config: str = "", **tools: str) -> Path:
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / "harness.md").write_text(f"---\n{config}---\n")
    for name, text in tools.items():
        (root / ".harness" / "tools" / f"{name}.md").write_text(text)
    return root


def test_a_tool_without_timeout_gets_the_default(tmp_path: Path) -> None:
    with harness.load(_project(tmp_path, quick=QUICK, capped=CAPPED)) as h:
        assert h.config.limits.default_timeout_ms == 30000
        assert h.registry.plans["quick"].timeout_ms == 30000
        assert h.registry.plans["capped"].timeout_ms == 2000


def test_the_default_is_configurable_and_stays_within_the_maximum(tmp_path: Path) -> None:
    cfg = "limits:\n  default_timeout_ms: 5000\n"
    with harness.load(_project(tmp_path / "a", cfg, quick=QUICK)) as h:
        assert h.registry.plans["quick"].timeout_ms == 5000
    cfg = "limits:\n  default_timeout_ms: 5000\n  max_timeout_ms: 1000\n"
    with harness.load(_project(tmp_path / "b", cfg, quick=QUICK)) as h:
        assert h.registry.plans["quick"].timeout_ms == 1000
    cfg = "limits:\n  default_timeout_ms: 0\n"  # off: up to max_timeout_ms
    with harness.load(_project(tmp_path / "c", cfg, quick=QUICK)) as h:
        assert h.registry.plans["quick"].timeout_ms == 600000


def test_list_verbose_shows_each_tool_timeout(tmp_path: Path) -> None:
    root = _project(tmp_path, quick=QUICK, capped=CAPPED)
    r = CliRunner().invoke(cli, ["list", "-v", "--root", str(root)])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[1:5] == [
        "  capped  Capped.",
        "          timeout 2000 ms",
        "  quick   Quick.",
        "          timeout 30000 ms (limits.default_timeout_ms)",
    ], r.stdout
    plain = CliRunner().invoke(cli, ["list", "--root", str(root)])
    assert "timeout" not in plain.stdout


def test_validate_warns_on_a_tool_without_cap_when_the_default_is_off(tmp_path: Path) -> None:
    cfg = "limits:\n  default_timeout_ms: 0\n"
    root = _project(tmp_path, cfg, quick=QUICK, capped=CAPPED)
    found = [p for p in harness.check(root) if p.code == "timeout-unbounded"]
    assert len(found) == 1
    p = found[0]
    assert p.severity == "warning" and p.path == ".harness/tools/quick.md"
    assert "timeout_ms" in p.message and "limits.default_timeout_ms" in p.message
    assert not [
        p
        for p in harness.check(_project(tmp_path / "on", quick=QUICK))
        if p.code == "timeout-unbounded"
    ]


@pytest.mark.parametrize("isolation", ["process", "inprocess"])
def test_an_integer_too_large_for_a_builtin_names_it(tmp_path: Path, isolation: str) -> None:
    root = _project(tmp_path, f"runtime:\n  isolation: {isolation}\n", big=BIG_RANGE)
    with harness.load(root) as h:
        r = h.call("big", {})
    assert r.is_error
    assert "Error unpacking" not in r.error
    assert r.error.startswith("range(): argument 1 is too large"), r.error
    assert "-2147483648" in r.error and "2147483647" in r.error
    assert "(at .harness/tools/big.md:4)" in r.error


def test_a_cpu_loop_is_reported_as_a_timeout(tmp_path: Path) -> None:
    # Starlark keeps every value a call makes until it returns: the loop's integers fill
    # the worker's 512 MB long before its 30 s. That is a runaway loop, not a memory bomb.
    with harness.load(_project(tmp_path, loop=LOOP)) as h:
        r = h.call("loop", {})
    assert r.is_error
    assert r.error.startswith('tool "loop" timed out'), r.error
    assert "memory limit (512 MB)" in r.error and "30000 ms" in r.error


def test_a_memory_bomb_is_still_reported_as_memory(tmp_path: Path) -> None:
    bomb = '---\nscript: |\n  def run(args):\n      return len("x" * 1500000000)\n---\nBomb.\n'
    with harness.load(_project(tmp_path, bomb=bomb)) as h:
        r = h.call("bomb", {})
    assert r.error == 'tool "bomb" exceeded its memory limit (512 MB)'
