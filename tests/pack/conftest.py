"""Fixtures of the starter-pack tests (helpers in pack_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pack_helpers import git, init_workspace


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    """A fresh workspace made by `harness init`, with a few files."""
    root = init_workspace(tmp_path / "ws")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main():\n    print('hello')\n\n\nmain()\n")
    (root / "README.md").write_text("# Demo\n\nHello world.\n")
    return root


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace that is a git repository with two commits (read-only tests share it)."""
    root = init_workspace(tmp_path_factory.mktemp("repo") / "ws")
    git(root, "init", "-q", "-b", "main")
    (root / "app.py").write_text("x = 1\n")
    (root / ".env").write_text("SECRET=1\n")
    git(root, "add", "app.py", "harness.md")
    git(root, "add", "-f", ".env")
    git(root, "commit", "-q", "-m", "first commit")
    (root / "app.py").write_text("x = 2\ny = 3\n")
    git(root, "commit", "-q", "-am", "second commit")
    (root / "app.py").write_text("x = 2\ny = 4\n")  # an uncommitted change
    return root
