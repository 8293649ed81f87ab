"""Write origin-style (ai-harness) projects as a migrating user has them."""

from __future__ import annotations

import textwrap
from pathlib import Path


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
