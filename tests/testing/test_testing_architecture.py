"""harness/testing/ imports the pipeline, never the other way round; its test-file
parser stays pure so harness validate can use it without the runtime."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "harness"


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_nothing_outside_testing_and_cli_imports_testing() -> None:
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.parts[0] in ("testing", "cli"):
            continue
        bad = {m for m in imports(path) if m.startswith("harness.testing")}
        assert not bad, f"{rel} imports {bad}"


def test_the_test_and_eval_file_parsers_are_pure() -> None:
    for name in ("spec.py", "evalspec.py"):
        bad = {
            m
            for m in imports(PKG / "testing" / name)
            if m.startswith(
                (
                    "harness.runtime",
                    "harness.pipeline",
                    "harness.core",
                    "harness.hooks",
                    "harness.testing.runner",
                    "starlark",
                    "click",
                )
            )
        }
        assert not bad, (name, bad)


def test_artifacts_know_nothing_of_testing() -> None:
    for path in sorted((PKG / "artifacts").rglob("*.py")):
        assert not {m for m in imports(path) if m.startswith("harness.testing")}
