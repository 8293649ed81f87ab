"""The pytest plugin collects test files as items (opt-in with -p or the ini option)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from test_harness_test import FAILING, PASSING, project


def pytest_run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_plugin_with_p_collects_cases(tmp_path: Path) -> None:
    root = project(tmp_path, {"pass": PASSING, "fail": FAILING})
    out = pytest_run(root, "-p", "harness.testing.pytest_plugin", ".harness/tests")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "11 failed, 13 passed" in out.stdout
    assert (
        '.harness/tests/fail.md:30: hook "prod_guard": expected decision block, got allow'
        in out.stdout
    )


def test_plugin_through_ini_option(tmp_path: Path) -> None:
    root = project(tmp_path, {"pass": PASSING})
    (root / "pytest.ini").write_text(
        textwrap.dedent("""\
        [pytest]
        harness_tests = true
        """)
    )
    (root / "test_unit.py").write_text("def test_unit():\n    assert True\n")
    out = pytest_run(root, "-k", "guard or unit")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 passed" in out.stdout


def test_without_opt_in_nothing_is_collected(tmp_path: Path) -> None:
    root = project(tmp_path, {"pass": PASSING})
    out = pytest_run(root, ".harness/tests")
    assert "no tests ran" in out.stdout
    out = pytest_run(root, "-p", "no:harness.testing.pytest_plugin", "-p", "no:randomly")
    assert "no tests ran" in out.stdout


def test_the_plugin_is_registered_by_the_installation(tmp_path: Path) -> None:
    root = project(tmp_path, {"pass": PASSING})
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\nharness_tests = true\n")
    out = pytest_run(root, "-k", "guard")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout
