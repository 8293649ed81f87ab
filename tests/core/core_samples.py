"""Artifact texts and a project writer shared by the core tests."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_project(
    root: Path,
    *,
    tools: dict[str, str] | None = None,
    hooks: dict[str, str] | None = None,
    config: str = "",
) -> Path:
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


ECHO = """
---
parameters:
  path: {type: string, required: true}
  n: {type: integer}
script: |
  def run(args):
      return {"path": args["path"], "n": args.get("n", 0)}
---
Echo the arguments back.
"""
