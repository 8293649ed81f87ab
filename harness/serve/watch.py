"""Change detection for ``harness serve --watch``: poll artifact mtimes (no dependency).

A snapshot maps every file the loader reads (``harness.md`` and the ``*.md`` files
directly inside each ``.harness/`` layer folder) to ``(mtime_ns, size)``. Two
snapshots differ when a file was added, removed or rewritten. :func:`load_guarded`
loads for a reload and refuses one that loosens the sandbox when a sandboxed command
or server ran meanwhile.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from harness.artifacts.model import Project
from harness.core import Harness
from harness.errors import LoadError
from harness.validation import check_project

LAYER_DIRS = ("builtins", "plugins", "tools", "hooks", "overrides", "servers")

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


# ---------------------------------------------------------------- reload guard

# Defence in depth (issue 22 item 1): a sandboxed command or server cannot create or
# change what the loader reads (runtime/placeholders.py). Should anything ever let one,
# a reload made while one ran still never loosens the sandbox or starts a new server.


class ReloadRefused(Exception):
    """The change loosens the sandbox and was seen while a sandboxed command ran."""

    def __init__(self, loosened: list[str]) -> None:
        super().__init__("; ".join(loosened))
        self.loosened = loosened


def _new(old: tuple[str, ...], new: tuple[str, ...]) -> list[str]:
    return [v for v in new if v not in old]


def loosened(old: Project, new: Project) -> list[str]:
    """What ``new`` allows that ``old`` did not: the sandbox turned off (or down to
    auto), host mounts, environment names, commands or network domains added, and
    every upstream server that is new or declared differently."""
    out: list[str] = []
    a, b = old.config.exec, new.config.exec
    if b.sandbox != a.sandbox and (b.sandbox == "off" or a.sandbox == "required"):
        out.append(f"exec.sandbox: {b.sandbox}")
    for key, added in (
        ("exec.mounts", _new(a.mounts, b.mounts)),
        ("exec.env", _new(a.env, b.env)),
        (
            "network.allowed_domains",
            _new(old.config.network.allowed_domains, new.config.network.allowed_domains),
        ),
    ):
        if added:
            out.append(f"{key} adds {', '.join(added)}")
    if a.allowed_commands and (
        not b.allowed_commands or _new(a.allowed_commands, b.allowed_commands)
    ):
        out.append("exec.allowed_commands allows more")
    for name, spec in new.servers.items():
        if old.servers.get(name) != spec:
            out.append(f'upstream server "{name}" is new or changed')
    return out


def load_guarded(root: Path, old: Project, during_sandbox: bool) -> Harness:
    """Load ``root`` for a reload. ``during_sandbox``: a sandboxed command or server
    ran while the change was made; then a change that loosens anything (see
    :func:`loosened`) raises ReloadRefused before any server is started."""
    project = check_project(root)
    if not project.ok:
        raise LoadError([p for p in project.problems if p.severity == "error"])
    if during_sandbox:
        what = loosened(old, project)
        if what:
            raise ReloadRefused(what)
    return Harness(project)
