"""The dependency direction of ARCHITECTURE.md, checked on the source (an import contract)."""

from __future__ import annotations

import ast
import re
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
        bad = {
            m
            for m in imports(path)
            if m.startswith(
                (
                    "harness.runtime",
                    "harness.pipeline",
                    "harness.core",
                    "harness.cli",
                    "harness.serve",
                    "starlark",
                )
            )
        }
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


# -- no import cycles ------------------------------------------------------------------
# Every import counts: module level, inside functions (lazy imports) and under
# ``if TYPE_CHECKING:``. A cycle through a lazy import still ties two modules into one
# unit nobody can read alone; a type-only cycle is the same knot for a reader. An edge
# goes to the module named (``from harness.a import b`` is an edge to ``harness.a.b``
# when that is a module, else to ``harness.a``); a package's ``__init__`` is a node of
# its own, reached only when imported by name.


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in modules()}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in paths)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package[: len(package) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    if target in paths:
                        edges.add(target)
                    elif base in paths:
                        edges.add(base)
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def test_the_graph_sees_lazy_and_type_only_imports() -> None:
    graph = import_graph()
    assert "harness.config" in graph["harness.artifacts.model"]  # under TYPE_CHECKING
    assert "harness.runtime.engine" in graph["harness.runtime.worker_main"]  # in a function


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (break them with a leaf module): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_no_top_level_module_is_over_480_lines() -> None:
    # 400 lines in the hand layout became 480 when the tree was ruff-formatted (issue 21:
    # the formatter spreads calls and literals over more lines; the code did not grow).
    for path in sorted(PKG.glob("*.py")):
        lines = len(path.read_text().splitlines())
        assert lines <= 480, f"{path.name} has {lines} lines; give a job its own module"


def test_sessions_read_only_the_public_surface_of_harness() -> None:
    """session.py and session_tools.py use Harness through named properties
    (``defined_tools``, ``hook_chain``, ``audit``, ``upstream``...), never its private
    attributes."""
    for name in ("session.py", "session_tools.py"):
        text = (PKG / name).read_text()
        found = re.findall(r"harness\._\w+", text)
        assert not found, f"harness/{name} reads private attributes of Harness: {found}"
