"""The shipped .pre-commit-hooks.yaml: `harness validate` and `harness test` on the right files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

HOOKS = Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml"


@pytest.mark.parametrize(
    ("hook_id", "entry"),
    [("harness-validate", "harness validate"), ("harness-test", "harness test")],
)
def test_hook_runs_on_harness_files_only(hook_id: str, entry: str) -> None:
    hooks = {h["id"]: h for h in yaml.safe_load(HOOKS.read_text())}
    assert sorted(hooks) == ["harness-test", "harness-validate"]
    hook = hooks[hook_id]
    assert hook["entry"] == entry
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
