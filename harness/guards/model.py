"""The guard checker's vocabulary: findings, what it knows of the project
(:class:`Context`), the flow state of one path through a script (:class:`Env`), and
small helpers on the syntax tree."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from harness.guards import shapes as S
from harness.guards.shapes import Shape, join


class Finding(NamedTuple):
    line: int  # 1-based in the script
    column: int  # 1-based
    code: str
    message: str
    severity: str = "error"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInfo:
    params: Mapping[str, Shape] | None  # None: not known (a server's, a Python handler's)
    returns: Shape | None  # None: no ``returns``


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """What the checker knows of the project and the hook's event."""

    event: str
    payload: Shape
    tools: Mapping[str, ToolInfo]
    extra: frozenset[str] = frozenset()  # built-in tools (read_output, tool_search)
    prefixes: tuple[str, ...] = ()  # NAME. / NAME_ of declared upstream servers
    open_names: bool = False  # meta.tool_register may add tools at run time
    text_key: str | None = None
    origin: str = ""
    origin_keys: Mapping[str, str] = field(default_factory=dict)
    modules: frozenset[str] = frozenset()
    on_call: Callable[[str, ast.Call, list[Shape]], None] | None = None
    # What a tool without ``returns`` returns, read from its script (ANY: not known).
    infer: Callable[[str], Shape] | None = None

    def defines(self, name: str) -> bool:
        return name in self.tools or name in self.extra or name.startswith(self.prefixes)


@dataclass(slots=True)
class Env:
    vars: dict[str, Shape]
    paths: dict[tuple[str, ...], Shape] = field(default_factory=dict)
    tools: frozenset[str] | None = None  # the tools the payload is about; None: any

    def copy(self) -> Env:
        return Env(dict(self.vars), dict(self.paths), self.tools)


def join_env(a: Env, b: Env) -> Env:
    names = {**b.vars, **a.vars}
    merged = {
        k: join(a.vars[k], b.vars[k]) if k in a.vars and k in b.vars else v
        for k, v in names.items()
    }
    paths = {k: join(v, b.paths[k]) for k, v in a.paths.items() if k in b.paths}
    tools = None if a.tools is None or b.tools is None else a.tools | b.tools
    return Env(merged, paths, tools)


def path_of(node: ast.AST) -> tuple[str, ...] | None:
    """``payload["a"]["b"]`` -> ("payload", "a", "b"); a name -> (name,); else None."""
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        key = node.slice.value
        inner = path_of(node.value)
        if inner is not None and isinstance(key, str):
            return (*inner, key)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        inner = path_of(node.func.value)
        if inner is not None:
            return (*inner, node.args[0].value)
    return None


PY_TYPES = {
    "str": S.STR,
    "dict": S.DICT,
    "list": S.LIST,
    "int": S.INT,
    "float": S.FLOAT,
    "bool": S.BOOL,
    "tuple": S.LIST,
}
MAX_INFERRED = 64  # tools whose results a hook on every tool's result reads from scripts
MAX_HELPERS = 24  # helper bodies followed per script (each with its argument shapes)


def literals(node: ast.AST) -> frozenset[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return frozenset((node.value,))
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out = set()
        for elt in node.elts:
            if not (isinstance(elt, ast.Constant) and isinstance(elt.value, str)):
                return None
            out.add(elt.value)
        return frozenset(out)
    return None


def literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def parse(source: str, mode: str = "exec") -> ast.AST | None:
    """The Python-syntax tree of a Starlark script or expression, or None when it does not
    parse as Python (the Starlark checks report real syntax errors). Python's warnings
    about Starlark text (``"\\d"`` escapes) are not the user's business here."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source, mode=mode)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
