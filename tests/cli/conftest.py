"""Shared helpers for the CLI tests: the runner and the fixture projects."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def project_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Copy fixture CASE to tmp_path/CASE, chdir into tmp_path, return the copy's path."""

    def copy(case: str) -> Path:
        dest = tmp_path / case
        shutil.copytree(FIXTURES / case, dest)
        monkeypatch.chdir(tmp_path)
        return dest

    return copy
