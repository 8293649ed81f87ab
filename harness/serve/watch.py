"""Change detection for ``harness serve --watch``: poll artifact mtimes (no dependency).

A snapshot maps every file the loader reads (``harness.md`` and the ``*.md`` files
directly inside each ``.harness/`` layer folder) to ``(mtime_ns, size)``. Two
snapshots differ when a file was added, removed or rewritten.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

LAYER_DIRS = ("builtins", "plugins", "tools", "hooks", "overrides")

Snapshot = dict[str, tuple[int, int]]


def _stat(path: Path) -> tuple[int, int] | None:
    """(mtime, size) of a regular file, else None: the loader reads nothing else (a
    missing ``harness.md`` is an empty directory while a sandbox runs, see
    runtime/placeholders.py; it is not a change)."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return st.st_mtime_ns, st.st_size


def watched_files(root: Path) -> list[Path]:
    """Every file whose change can change what the loader produces."""
    files = [root / "harness.md"]
    for layer in LAYER_DIRS:
        folder = root / ".harness" / layer
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        files.extend(folder / n for n in names if n.lower().endswith((".md", ".markdown")))
    return files


def snapshot(root: Path) -> Snapshot:
    out: Snapshot = {}
    for path in watched_files(root):
        st = _stat(path)
        if st is not None:
            out[str(path)] = st
    return out
