"""The dependency direction of ARCHITECTURE.md, checked on the source (an import contract)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "harness"


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def modules(sub: str = "") -> list[Path]:
    return sorted((PKG / sub).rglob("*.py"))


def test_artifacts_never_import_the_runtime_or_the_pipeline() -> None:
    for path in modules("artifacts"):
        bad = {m for m in imports(path)
               if m.startswith(("harness.runtime", "harness.pipeline", "harness.core",
                                "harness.cli", "harness.serve", "starlark"))}
        assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_only_the_runtime_imports_starlark() -> None:
    for path in modules():
        if "starlark" in {m.split(".")[0] for m in imports(path)}:
            assert path.parent.name == "runtime", path.relative_to(PKG)


def test_only_the_cli_imports_click() -> None:
    for path in modules():
        if "click" in {m.split(".")[0] for m in imports(path)}:
            assert path.parent.name == "cli", path.relative_to(PKG)


def test_errors_imports_nothing_from_harness_at_run_time() -> None:
    tree = ast.parse((PKG / "errors.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness"):
            raise AssertionError(f"errors.py imports {node.module} at module level")


def test_test_file_names_are_unique() -> None:
    """Test folders have no __init__.py, so pytest needs unique basenames (rootdir import)."""
    tests = Path(__file__).resolve().parent
    seen: dict[str, Path] = {}
    for path in sorted(tests.rglob("test_*.py")):
        assert path.name not in seen, f"{path} and {seen[path.name]} share a name"
        seen[path.name] = path
