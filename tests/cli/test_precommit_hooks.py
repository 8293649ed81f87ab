"""The shipped .pre-commit-hooks.yaml runs `harness validate` on the right files."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

HOOKS = Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml"


def test_harness_validate_hook() -> None:
    hooks = yaml.safe_load(HOOKS.read_text())
    assert [h["id"] for h in hooks] == ["harness-validate"]
    hook = hooks[0]
    assert hook["entry"] == "harness validate"
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is False
    files, exclude = re.compile(hook["files"]), re.compile(hook["exclude"])

    def runs_on(path: str) -> bool:
        return bool(files.search(path)) and not exclude.search(path)

    for path in (
        "harness.md",
        "pkg/harness.md",
        ".harness/tools/a.md",
        "pkg/.harness/hooks/b.md",
        ".harness/plugins/p.md",
    ):
        assert runs_on(path), path
    for path in (
        "README.md",
        "myharness.md",
        "harness.md.orig",
        ".harness/state/audit.jsonl",
        "docs/harness.txt",
    ):
        assert not runs_on(path), path
