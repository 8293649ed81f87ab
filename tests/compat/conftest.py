"""Origin-style (ai-harness) artifacts written as a migrating user has them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "agent"))

from compat_samples import write  # noqa: E402

import harness  # noqa: E402


@pytest.fixture
def origin(tmp_path: Path) -> Iterator[Callable[..., harness.Harness]]:
    opened: list[harness.Harness] = []

    def make(files: dict[str, str], sub: str = "p") -> harness.Harness:
        h = harness.load(write(tmp_path / sub, files))
        opened.append(h)
        return h

    yield make
    for h in opened:
        h.close()
