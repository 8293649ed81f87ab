from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import harness


def write_project(root: Path, *, tools: dict[str, str] | None = None,
                  hooks: dict[str, str] | None = None, config: str = "") -> Path:
    """Write real artifact files; ``config`` is harness.md frontmatter (YAML)."""
    (root / ".harness" / "tools").mkdir(parents=True, exist_ok=True)
    (root / ".harness" / "hooks").mkdir(parents=True, exist_ok=True)
    cfg = "runtime: {isolation: inprocess}\n" + textwrap.dedent(config)
    (root / "harness.md").write_text(f"---\n{cfg}---\nYou are a test agent.\n")
    for name, text in (tools or {}).items():
        (root / ".harness" / "tools" / f"{name}.md").write_text(textwrap.dedent(text).lstrip())
    for name, text in (hooks or {}).items():
        (root / ".harness" / "hooks" / f"{name}.md").write_text(textwrap.dedent(text).lstrip())
    return root


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
