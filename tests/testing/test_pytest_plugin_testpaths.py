"""`harness_tests = true` collects .harness/tests/ even when the project sets testpaths."""

from __future__ import annotations

from pathlib import Path

from test_harness_test import PASSING, project
from test_pytest_plugin import pytest_run


def test_testpaths_does_not_hide_the_harness_cases(tmp_path: Path) -> None:
    root = project(tmp_path, {"pass": PASSING})
    (root / "tests").mkdir()
    (root / "tests" / "test_unit.py").write_text("def test_unit():\n    assert True\n")
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = tests\nharness_tests = true\n")
    out = pytest_run(root, "-k", "guard or unit")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 passed" in out.stdout
    # Paths on the command line still decide alone.
    out = pytest_run(root, "tests")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout


def test_a_testpaths_that_names_the_folder_collects_it_once(tmp_path: Path) -> None:
    root = project(tmp_path, {"pass": PASSING})
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = .harness/tests\nharness_tests = true\n")
    out = pytest_run(root, "-k", "guard")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout
