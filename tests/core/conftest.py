from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from core_samples import write_project

import harness


@pytest.fixture
def make_harness(tmp_path: Path) -> Callable[..., harness.Harness]:
    opened: list[harness.Harness] = []

    def make(**kw: object) -> harness.Harness:
        write_project(tmp_path, **kw)  # type: ignore[arg-type]
        h = harness.load(tmp_path)
        opened.append(h)
        return h

    yield make  # type: ignore[misc]
    for h in opened:
        h.close()
