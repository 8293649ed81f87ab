"""The starter pack that ``harness init`` writes: ``harness.md`` plus tools and hooks.

The artifacts live next to this module as package data (``tools/*.md``,
``hooks/*.md``, ``harness.md``); :func:`files` maps each one to the path it gets in a
project. The repository's own ``.harness/`` is the same pack (a test keeps them equal).
"""

from __future__ import annotations

from importlib import resources

# package-data folder -> project folder
FOLDERS = {"tools": ".harness/tools", "hooks": ".harness/hooks", "tests": ".harness/tests"}
GITIGNORE = (
    ".harness/.gitignore",
    "# runtime data written by harness (spilled outputs, audit)\nstate/\n",
)


def files() -> dict[str, str]:
    """Project-relative path -> content of every file of the pack, sorted by path."""
    base = resources.files(__name__)
    out: dict[str, str] = {"harness.md": base.joinpath("harness.md").read_text("utf-8")}
    for folder, target in FOLDERS.items():
        for entry in sorted(base.joinpath(folder).iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".md"):
                out[f"{target}/{entry.name}"] = entry.read_text("utf-8")
    out[GITIGNORE[0]] = GITIGNORE[1]
    return dict(sorted(out.items()))
