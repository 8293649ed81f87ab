"""Origin-style (ai-harness) artifacts written as a migrating user has them."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "agent"))

import harness  # noqa: E402


def write(root: Path, files: dict[str, str]) -> Path:
    """Write ``{relative path: text}`` (dedented); harness.md gets in-process isolation
    unless it says otherwise."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    if "harness.md" not in files:
        (root / "harness.md").write_text("---\nruntime: {isolation: inprocess}\n---\nAgent.\n")
    return root


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
