"""Fixtures of the serve tests: a temporary project (see serve_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from serve_helpers import write_project


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "proj")
