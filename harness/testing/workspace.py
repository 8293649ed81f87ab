"""A case's copy of the workspace: what is left out, and what a test file brings back.

Copies leave out harness's own folder, VCS data, environments and caches
(:data:`SKIP_DIRS`). A test file's ``include: [.git, .venv]`` brings some back
(the real project context, docs/testing.md):

- a virtualenv (``runtime.mounts.is_venv``) or ``node_modules`` becomes a symlink to
  the real one, and the real one is bound **read-only** into the command sandbox (an
  ``exec.mounts`` entry of the case), so its scripts' shebangs (absolute paths to the
  real venv) work and nothing a case runs can change it. Without a working sandbox
  the folder is copied instead (a command could write through a link).
- anything else (``.git`` first of all) is copied: a case may commit, check out or
  break it, the real one never changes. In a copied repository the tracked files of
  ``.harness/`` (never in a copy) are marked skip-worktree, so git does not see them
  as deleted. A ``.git`` *file* (a worktree or submodule
  pointing elsewhere) is refused: its commands would act on the real repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.testing.expect import CaseError

SKIP_DIRS = frozenset(
    {
        ".harness",
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".tox",
    }
)


def ignore(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in SKIP_DIRS}


def tree_size(root: Path) -> int:
    """Bytes a copy of ``root`` takes (what copytree with :func:`ignore` copies)."""
    total = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in names:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size + 4096
            except OSError:
                pass
    return total


def linkable(path: Path) -> bool:
    """Whether an included ``path`` is shown through a read-only link (an environment)."""
    from harness.runtime.mounts import is_venv

    return path.name == "node_modules" or is_venv(str(path))


def copy_workspace(
    root: Path, copy: Path, include: Sequence[str], sandboxed: bool
) -> tuple[str, ...]:
    """Copy ``root`` to ``copy`` with the ``include``d paths; the real paths to bind
    read-only into the sandbox (linked environments)."""
    shutil.copytree(root, copy, symlinks=True, ignore=ignore)
    mounts: list[str] = []
    real_root = root.resolve()
    for rel in include:
        source = root / rel
        # Neither end may lead out through a symlink on the way (a linked parent folder
        # would make the copy, or the removal below, happen elsewhere).
        if not source.parent.resolve().is_relative_to(real_root):
            raise CaseError(f'include: "{rel}" leads outside the project through a symlink')
        target = inside(copy, rel)
        if not source.exists() and not source.is_symlink():
            raise CaseError(
                f'include: "{rel}" does not exist in {root}; remove it from include: '
                "or create it (e.g. python -m venv .venv, git init)"
            )
        if Path(rel).name == ".git" and source.is_file():
            raise CaseError(
                f'include: "{rel}" is a file pointing at a git directory elsewhere (a '
                "worktree or submodule); a case would change the real repository through "
                "it. Run the tests from a clone, or give the case its own repository "
                "with files: or a setup step"
            )
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)  # a nested folder copied already (not left out)
        target.parent.mkdir(parents=True, exist_ok=True)
        if sandboxed and source.is_dir() and linkable(source):
            real = os.path.realpath(source)
            os.symlink(real, target)
            mounts.append(real)
        elif source.is_dir():  # a copy of what a link points at, never the link
            shutil.copytree(source.resolve(), target, symlinks=True)
        else:
            shutil.copy2(source, target)
        if Path(rel).name == ".git" and source.is_dir():
            _hide_left_out(target.parent)
    return tuple(mounts)


def _hide_left_out(work: Path) -> None:
    """In a copied repository, mark the tracked files of ``.harness/`` (left out of
    every copy) skip-worktree, so ``git status`` and ``git diff`` do not report them
    as deleted. Best effort: without git on the host there is nothing to hide from."""
    git = shutil.which("git")
    if git is None:
        return
    env = {"PATH": os.environ.get("PATH", os.defpath), "GIT_CONFIG_NOSYSTEM": "1"}
    try:
        listed = subprocess.run(
            [git, "-C", str(work), "ls-files", "-z", "--", ".harness"],
            capture_output=True,
            env=env,
            timeout=30,
            check=True,
        ).stdout
        if listed:
            subprocess.run(
                [git, "-C", str(work), "update-index", "--skip-worktree", "-z", "--stdin"],
                input=listed,
                capture_output=True,
                env=env,
                timeout=30,
                check=True,
            )
    except (OSError, subprocess.SubprocessError) as exc:
        raise CaseError(f"include: .git: could not hide .harness/ from git: {exc}") from None


def inside(workspace: Path, rel: str) -> Path:
    """``workspace / rel``, refusing a path that a symlink in the copy leads out of it
    (an absolute link would otherwise write into the real workspace)."""
    base = workspace.resolve()
    target = (base / rel).resolve()
    if target != base and base not in target.parents:
        raise CaseError(
            f'files: "{rel}" leads outside the workspace copy (through a '
            "symlink); fixture files are written inside it only"
        )
    return base / rel
