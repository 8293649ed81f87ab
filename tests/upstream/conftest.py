"""The ``make`` fixture: a loaded Harness over a project declaring upstream servers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from upstream_helpers import write_project

import harness


@pytest.fixture
def make() -> Iterator[object]:
    """make(root, servers, ...) -> a loaded Harness, closed after the test."""
    opened: list[harness.Harness] = []

    def build(root: Path, servers: dict[str, dict], **kw: object) -> harness.Harness:
        write_project(root, servers, **kw)  # type: ignore[arg-type]
        h = harness.load(root)
        opened.append(h)
        return h

    yield build
    for h in opened:
        h.close()
