"""mcp-server-git (PyPI) in the sandbox: hooks see "git.git_status", .git stays read-only."""

from __future__ import annotations

import subprocess
from pathlib import Path

from upstream_helpers import GIT_SERVER, INPROCESS

BLOCK_STATUS = """---
event: tool.pre
when: payload["name"] == "git.git_status"
script: |
  def handle(event, payload):
      return block("status is off limits in this test")
---
"""


def repo(root: Path) -> Path:
    root.mkdir(parents=True)
    for args in (
        ["init", "-q"],
        ["config", "user.email", "t@example.com"],
        ["config", "user.name", "t"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True)
    (root / "a.txt").write_text("one\n")
    subprocess.run(["git", "add", "a.txt"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "first"], cwd=root, check=True)
    (root / "a.txt").write_text("one\ntwo\n")
    return root


def test_git_server_tools_hooks_and_read_only_git(tmp_path: Path, make) -> None:
    ws = repo(tmp_path / "ws")
    server = {
        "command": [GIT_SERVER, "--repository", "."],
        "tools": {"deny": ["git_reset", "git_checkout"]},
    }
    h = make(ws, {"git": server}, hooks={"no_status": BLOCK_STATUS}, config=INPROCESS)
    names = {n for n in h.connect_tools() if n.startswith("git.")}
    assert {"git.git_status", "git.git_diff_unstaged", "git.git_log", "git.git_add"} <= names
    assert "git.git_reset" not in names and "git.git_checkout" not in names
    assert h.connect_tools()["git.git_log"].annotations["read_only"] is True
    blocked = h.call("git.git_status", {"repo_path": "."})
    assert blocked.blocked_by == "no_status"
    assert blocked.error == 'blocked by hook "no_status": status is off limits in this test'
    diff = h.call("git.git_diff_unstaged", {"repo_path": "."})
    assert not diff.is_error and "+two" in diff.text
    log = h.call("git.git_log", {"repo_path": "."})
    assert "first" in log.text
    add = h.call("git.git_add", {"repo_path": ".", "files": ["a.txt"]})
    assert add.is_error and "Read-only file system" in add.error  # .git is protected
    staged = subprocess.run(
        ["git", "diff", "--cached", "--name-only"],
        cwd=ws,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert staged == ""
