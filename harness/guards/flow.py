"""Follow ``payload`` through a hook's ``when`` and ``handle`` (nothing is executed).

An abstract interpreter over the script's Python-syntax tree (Starlark parses as
Python here): every expression gets a :class:`~harness.guards.shapes.Shape`, ``if``
tests narrow names and ``payload[...]`` paths the way typed checkers for dynamic
languages do (``type(x) == "string"``, ``if x:``, ``x != None``, ``payload["name"] ==
"t"`` narrows the tools the payload is about), branches join, top-level helpers are
followed with their argument shapes. Where a use of a value can never do what it says
(membership, comparison, a string method or ``len`` on the wrong shape; a key, tool or
argument that does not exist) it is a :class:`Finding`; where the shape is not known it
is a warning saying what to write instead.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from harness.artifacts.problems import closest, suggest
from harness.guards import shapes as S
from harness.guards.shapes import ANY, Shape, join, of, text


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


def _path(node: ast.AST) -> tuple[str, ...] | None:
    """``payload["a"]["b"]`` -> ("payload", "a", "b"); a name -> (name,); else None."""
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        key = node.slice.value
        inner = _path(node.value)
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
        inner = _path(node.func.value)
        if inner is not None:
            return (*inner, node.args[0].value)
    return None


_PY_TYPES = {
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


class Checker:
    """One script's analysis; ``findings`` collects what it reports."""

    def __init__(self, ctx: Context, module: ast.Module | None, source: str = "") -> None:
        self.ctx = ctx
        self.source = source
        self.findings: dict[tuple[int, int, str], Finding] = {}
        self.defs: dict[str, ast.FunctionDef] = {}
        self.globals: dict[str, Shape] = {}
        self.decisions: list[tuple[str, ast.AST, list[Shape]]] = []
        self.helpers = 0
        self.returns: list[Shape] = []
        if module is not None:
            for node in module.body:
                if isinstance(node, ast.FunctionDef):
                    self.defs[node.name] = node
            env = Env({})
            for node in module.body:
                if isinstance(node, ast.Assign):
                    self.stmt(node, env)
            self.globals = env.vars

    # -- reporting -------------------------------------------------------------------

    def report(self, node: ast.AST, code: str, message: str, severity: str = "error") -> None:
        line, col = getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1
        key = (line, col, code)
        if key not in self.findings:
            self.findings[key] = Finding(line, col, code, message, severity)

    def src(self, node: ast.AST, default: str) -> str:
        """How the script wrote ``node`` (one line), or ``default``."""
        if self.source:
            seg = ast.get_source_segment(self.source, node)
            if seg and "\n" not in seg and len(seg) <= 60:
                return seg
        return default

    def _hint(self, shape: Shape) -> str:
        """What to write instead of using ``shape`` as text."""
        if shape.role == "payload" and self.ctx.text_key:
            origin = f" ({self.ctx.origin})" if self.ctx.origin else ""
            return f'{origin}; for the text write payload["{self.ctx.text_key}"]'
        if shape.unknown:
            return f"; {shape.unknown}"
        if shape.role == "result":
            return (
                '; payload["result"] is the value the tool returned (ai-harness: the '
                'result text); for the text the model sees write payload["content"]'
            )
        return ""

    def _shape_of(self, shape: Shape) -> str:
        what = shape.what or "the value"
        if shape.role == "payload":
            keys = ", ".join(shape.keys or ())
            return f"{what} is a dict ({keys})" if keys else f"{what} is a dict"
        if shape.keys:
            return f"{what} is {shape.text()} with keys {', '.join(shape.keys)}"
        return f"{what} is {shape.text()}"

    # -- statements -----------------------------------------------------------------

    def block(self, body: list[ast.stmt], env: Env) -> tuple[Env, bool]:
        """``env`` after ``body``, and whether every path through it ends (return)."""
        for node in body:
            env, done = self.stmt(node, env)
            if done:
                return env, True
        return env, False

    def stmt(self, node: ast.stmt, env: Env) -> tuple[Env, bool]:
        if isinstance(node, ast.Return):
            shape = self.expr(node.value, env) if node.value is not None else of(S.NULL)
            self.returns.append(shape)
            return env, True
        if isinstance(node, (ast.Break, ast.Continue)):
            return env, True
        if isinstance(node, ast.Assign):
            shape = self.expr(node.value, env)
            for target in node.targets:
                self.bind(target, shape, env)
            return env, False
        if isinstance(node, ast.AugAssign):
            left = self.expr(node.target, env)
            right = self.expr(node.value, env)
            self.bind(node.target, self.binop(node.op, left, right), env)
            return env, False
        if isinstance(node, ast.If):
            return self.if_(node, env)
        if isinstance(node, ast.For):
            return self.for_(node, env), False
        if isinstance(node, ast.Expr):
            self.expr(node.value, env)
        return env, False

    def bind(self, target: ast.AST, shape: Shape, env: Env) -> None:
        if isinstance(target, ast.Name):
            env.vars[target.id] = shape if shape.what else replace(shape, what=target.id)
            for path in [p for p in env.paths if p[0] == target.id]:
                del env.paths[path]
        elif isinstance(target, (ast.Tuple, ast.List)):
            item = shape.item if shape.item is not None else ANY
            for elt in target.elts:
                self.bind(elt, item if isinstance(elt, ast.Name) else ANY, env)

    def if_(self, node: ast.If, env: Env) -> tuple[Env, bool]:
        self.expr(node.test, env)
        yes, done_yes = self.block(node.body, self.narrow(node.test, env.copy(), True))
        no, done_no = self.block(node.orelse, self.narrow(node.test, env.copy(), False))
        if done_yes and done_no:
            return env, True
        if done_yes:
            return no, False
        if done_no:
            return yes, False
        return join_env(yes, no), False

    def for_(self, node: ast.For, env: Env) -> Env:
        items = self.expr(node.iter, env)
        inner = env.copy()
        self.bind(node.target, self.item_of(items), inner)
        after, _ = self.block(node.body, inner)
        return join_env(env, after)

    def item_of(self, shape: Shape) -> Shape:
        if shape.item is not None and shape.kinds <= {S.LIST}:
            return shape.item
        if shape.kinds == {S.STR}:
            return text()
        if shape.kinds == {S.DICT}:
            return text() if shape.keys is None else text().named("a key")
        return ANY

    # -- narrowing ---------------------------------------------------------------------

    def narrow(self, test: ast.AST, env: Env, truth: bool) -> Env:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.narrow(test.operand, env, not truth)
        if isinstance(test, ast.BoolOp):
            conj = isinstance(test.op, ast.And)
            if conj == truth:  # every part has this truth
                for value in test.values:
                    env = self.narrow(value, env, truth)
                return env
            out: Env | None = None
            before = env
            for value in test.values:
                branch = self.narrow(value, before.copy(), truth)
                out = branch if out is None else join_env(out, branch)
                before = self.narrow(value, before.copy(), not truth)
            return out if out is not None else env
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            return self.narrow_compare(test, env, truth)
        if isinstance(test, ast.Call) and isinstance(test.func, ast.Name):
            return self.narrow_call(test, env, truth)
        if (
            truth
            and isinstance(test, ast.Call)
            and isinstance(test.func, ast.Attribute)
            and test.func.attr == "startswith"
            and len(test.args) == 1
        ):
            return self.narrow_prefix(test, env)
        path = _path(test)
        if path is not None and truth:
            return self.refine(path, test, env, lambda s: s.without((S.NULL,)))
        return env

    def refine(
        self, path: tuple[str, ...], node: ast.AST, env: Env, how: Callable[[Shape], Shape]
    ) -> Env:
        shape = how(self.expr(node, env, quiet=True))
        if len(path) == 1:
            env.vars[path[0]] = shape
        else:
            env.paths[path] = shape
        return env

    def starting(self, prefix: str) -> list[str]:
        """The tool names that start with ``prefix``."""
        fast = getattr(self.ctx.tools, "starting", None)
        if fast is not None:
            found: list[str] = fast(prefix)
            return found
        return [t for t in self.ctx.tools if t.startswith(prefix)]

    def narrow_prefix(self, test: ast.Call, env: Env) -> Env:
        """``payload["name"].startswith("p")``: the tools whose names start so."""
        subject = self.expr(test.func.value, env, quiet=True)  # type: ignore[attr-defined]
        prefixes = _literals(test.args[0])
        if subject.role != "toolname" or prefixes is None:
            return env
        if self.ctx.open_names or any(
            p.startswith(q) or q.startswith(p) for p in prefixes for q in self.ctx.prefixes
        ):
            return env  # names a server or a script may add: not known here
        names = frozenset(n for p in prefixes for n in self.starting(p))
        env.tools = names if env.tools is None else env.tools & names
        return env

    def narrow_call(self, test: ast.Call, env: Env, truth: bool) -> Env:
        name = test.func.id  # type: ignore[attr-defined]
        if name == "isinstance" and len(test.args) == 2:
            kinds = [
                _PY_TYPES.get(t.id, "")
                for t in (
                    test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
                )
                if isinstance(t, ast.Name)
            ]
            path = _path(test.args[0])
            if path is not None:
                keep = frozenset(kinds)
                return self.refine(
                    path,
                    test.args[0],
                    env,
                    (lambda s: s.only(keep)) if truth else (lambda s: s.without(keep)),
                )
        return env

    def narrow_compare(self, test: ast.Compare, env: Env, truth: bool) -> Env:
        op, left, right = test.ops[0], test.left, test.comparators[0]
        if isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn)):
            truth = not truth
            op = {ast.NotEq: ast.Eq(), ast.IsNot: ast.Is(), ast.NotIn: ast.In()}[type(op)]
        if isinstance(right, ast.Call) and not isinstance(left, ast.Call):
            left, right = right, left
        # type(x) == "string"
        if (
            isinstance(left, ast.Call)
            and isinstance(left.func, ast.Name)
            and left.func.id == "type"
            and len(left.args) == 1
            and isinstance(right, ast.Constant)
            and right.value in S.TYPE_NAMES
            and isinstance(op, ast.Eq)
        ):
            path = _path(left.args[0])
            if path is not None:
                kind = S.TYPE_NAMES[str(right.value)]
                return self.refine(
                    path,
                    left.args[0],
                    env,
                    (lambda s: s.only((kind,))) if truth else (lambda s: s.without((kind,))),
                )
            return env
        # x == None, x is None
        if (
            isinstance(right, ast.Constant)
            and right.value is None
            and isinstance(op, (ast.Eq, ast.Is))
        ):
            path = _path(left)
            if path is not None:
                return self.refine(
                    path,
                    left,
                    env,
                    (lambda s: s.only((S.NULL,))) if truth else (lambda s: s.without((S.NULL,))),
                )
            return env
        # payload["name"] == "x" / in ("x", "y"): the tools the payload is about
        subject = self.expr(left, env, quiet=True)
        if subject.role == "toolname" and truth:
            names = _literals(right) if isinstance(op, (ast.Eq, ast.In)) else None
            if names is not None:
                env.tools = names if env.tools is None else env.tools & names
        return env

    # -- expressions ----------------------------------------------------------------------

    def expr(self, node: ast.AST | None, env: Env, quiet: bool = False) -> Shape:
        if node is None:
            return ANY
        if quiet:
            saved = self.findings
            self.findings = {}
            try:
                return self.expr(node, env)
            finally:
                self.findings = saved
        method = getattr(self, "e_" + type(node).__name__, None)
        if method is None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child, env)
            return ANY
        shape: Shape = method(node, env)
        return shape

    def e_Constant(self, node: ast.Constant, env: Env) -> Shape:
        v = node.value
        if isinstance(v, str):
            return text(v)
        if v is None:
            return of(S.NULL)
        if isinstance(v, bool):
            return of(S.BOOL)
        if isinstance(v, int):
            return of(S.INT)
        if isinstance(v, float):
            return of(S.FLOAT)
        return ANY

    def e_Name(self, node: ast.Name, env: Env) -> Shape:
        if node.id in env.vars:
            return env.vars[node.id]
        if node.id in self.globals:
            return self.globals[node.id]
        if node.id in ("True", "False"):
            return of(S.BOOL)
        if node.id == "None":
            return of(S.NULL)
        return ANY

    def e_List(self, node: ast.List | ast.Tuple | ast.Set, env: Env) -> Shape:
        item = S.NOTHING
        for elt in node.elts:
            item = join(item, self.expr(elt, env))
        return of(S.LIST, item=item if item.kinds else None)

    e_Tuple = e_List
    e_Set = e_List

    def e_Dict(self, node: ast.Dict, env: Env) -> Shape:
        keys: dict[str, Shape] | None = {}
        for k, v in zip(node.keys, node.values, strict=True):
            value = self.expr(v, env)
            if keys is not None and isinstance(k, ast.Constant) and isinstance(k.value, str):
                keys[k.value] = value
            else:
                keys = None
        return of(S.DICT, keys=keys)

    def e_ListComp(self, node: ast.ListComp | ast.GeneratorExp, env: Env) -> Shape:
        inner = self.comprehension(node.generators, env)
        return of(S.LIST, item=self.expr(node.elt, inner))

    e_GeneratorExp = e_ListComp

    def e_DictComp(self, node: ast.DictComp, env: Env) -> Shape:
        inner = self.comprehension(node.generators, env)
        self.expr(node.key, inner)
        self.expr(node.value, inner)
        return of(S.DICT)

    def comprehension(self, generators: list[ast.comprehension], env: Env) -> Env:
        inner = env.copy()
        for gen in generators:
            self.bind(gen.target, self.item_of(self.expr(gen.iter, inner)), inner)
            for cond in gen.ifs:
                self.expr(cond, inner)
                inner = self.narrow(cond, inner, True)
        return inner

    def e_JoinedStr(self, node: ast.JoinedStr, env: Env) -> Shape:
        for value in node.values:
            self.expr(value, env)
        return text()

    def e_FormattedValue(self, node: ast.FormattedValue, env: Env) -> Shape:
        self.expr(node.value, env)
        return text()

    def e_IfExp(self, node: ast.IfExp, env: Env) -> Shape:
        self.expr(node.test, env)
        yes = self.expr(node.body, self.narrow(node.test, env.copy(), True))
        no = self.expr(node.orelse, self.narrow(node.test, env.copy(), False))
        return join(yes, no)

    def e_BoolOp(self, node: ast.BoolOp, env: Env) -> Shape:
        out = S.NOTHING
        current = env.copy()
        conj = isinstance(node.op, ast.And)
        for value in node.values:
            out = join(out, self.expr(value, current))
            current = self.narrow(value, current, conj)
        return out

    def e_UnaryOp(self, node: ast.UnaryOp, env: Env) -> Shape:
        inner = self.expr(node.operand, env)
        if isinstance(node.op, ast.Not):
            return of(S.BOOL)
        return inner.only((S.INT, S.FLOAT)) if inner.known else of(S.INT, S.FLOAT)

    def e_BinOp(self, node: ast.BinOp, env: Env) -> Shape:
        return self.binop(node.op, self.expr(node.left, env), self.expr(node.right, env))

    def binop(self, op: ast.operator, left: Shape, right: Shape) -> Shape:
        if left.kinds == {S.STR} and isinstance(op, (ast.Add, ast.Mod)):
            return text()
        if left.kinds == {S.LIST} and isinstance(op, ast.Add):
            item = join(left.item or ANY, right.item or ANY)
            return of(S.LIST, item=item)
        if left.known and right.known and left.kinds | right.kinds <= {S.INT, S.FLOAT}:
            return of(*(left.kinds | right.kinds))
        return ANY

    def e_Lambda(self, node: ast.Lambda, env: Env) -> Shape:
        return ANY

    # subscripts and keys

    def e_Subscript(self, node: ast.Subscript, env: Env) -> Shape:
        path = _path(node)
        if path is not None and len(path) > 1 and path in env.paths:
            self.expr(node.value, env)
            return env.paths[path]
        obj = self.expr(node.value, env)
        key = self.expr(node.slice, env)
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return self.key(node, obj, node.slice.value, env, how="[]")
        if isinstance(node.slice, ast.Slice):
            return obj.only((S.STR, S.LIST)) if obj.known else ANY
        if key.kinds <= {S.INT} and obj.kinds == {S.LIST} and obj.item is not None:
            return obj.item
        if key.kinds <= {S.INT} and obj.kinds == {S.STR}:
            return text()
        return ANY

    def key(self, node: ast.AST, obj: Shape, name: str, env: Env, how: str) -> Shape:
        """``obj[name]`` / ``obj.get(name)``: its shape, or a finding when never there."""
        shown = f'{obj.what}["{name}"]' if obj.what else f'["{name}"]'
        if obj.role == "arguments":
            return self.argument(node, obj, name, env, shown)
        if obj.role == "payload" and obj.keys is not None and name in obj.keys:
            return self.payload_key(name, obj.keys[name], env, shown)
        if obj.keys is not None and S.DICT in obj.kinds and name not in obj.keys:
            self.unknown_key(node, obj, name, how)
            return ANY.named(shown)
        if obj.keys is not None and name in obj.keys:
            return obj.keys[name].named(shown)
        if obj.known and obj.kinds and S.DICT not in obj.kinds and how == "[]":
            self.report(
                node,
                "guard-shape",
                f"{self._shape_of(obj)}, so {shown} fails at run time (the hook then "
                f"fails closed){self._hint(obj)}",
            )
        return ANY.named(shown)

    def unknown_key(self, node: ast.AST, obj: Shape, name: str, how: str) -> None:
        keys = sorted(obj.keys or ())
        if obj.role == "payload":
            instead = self.ctx.origin_keys.get(name)
            fix = f"; write {instead}" if instead else suggest(name, keys)
            self.report(
                node,
                "payload-key-unknown",
                f'reads payload key "{name}", which {self.ctx.event} payloads never carry, so '
                f"it is always missing{fix}; they carry: {', '.join(obj.keys or ())}",
            )
            return
        what = obj.what or "the value"
        self.report(
            node,
            "guard-key-unknown",
            f'reads key "{name}" of {what}, which never has it{suggest(name, keys)}; '
            f"its keys: {', '.join(keys)}",
        )

    def payload_key(self, name: str, declared: Shape, env: Env, shown: str) -> Shape:
        if name == "name" and self.ctx.event in ("tool.pre", "tool.post"):
            return declared.named(shown, "toolname")
        if name in ("arguments", "args") and self.ctx.event in ("tool.pre", "tool.post"):
            return self.arguments_shape(env).named(shown, "arguments")
        if name == "result" and self.ctx.event == "tool.post":
            return self.result_shape(env).named(shown, "result")
        return declared.named(shown)

    def tools_of(self, env: Env) -> list[str]:
        if env.tools is None:
            return sorted(self.ctx.tools)
        return sorted(t for t in env.tools if t in self.ctx.tools)

    def arguments_shape(self, env: Env) -> Shape:
        if env.tools is None and (self.ctx.prefixes or self.ctx.open_names):
            return of(S.DICT)
        every = getattr(self.ctx.tools, "every_argument", None)
        if env.tools is None and every is not None:
            shape: Shape = every()
            return shape
        names = self.tools_of(env)
        keys: dict[str, Shape] = {}
        for name in names:
            params = self.ctx.tools[name].params
            if params is None:
                return of(S.DICT)
            for k, v in params.items():
                keys[k] = join(keys[k], v) if k in keys else v
        if env.tools is None and (self.ctx.prefixes or self.ctx.open_names):
            return of(S.DICT)
        if env.tools is not None and any(not self.ctx.defines(t) for t in env.tools):
            return of(S.DICT)
        if env.tools is not None and any(t not in self.ctx.tools for t in env.tools):
            return of(S.DICT)  # a server's tool: its parameters are not known here
        return of(S.DICT, keys=keys)

    def argument(self, node: ast.AST, obj: Shape, name: str, env: Env, shown: str) -> Shape:
        if obj.keys is None:
            return ANY.named(shown)
        if name in obj.keys:
            return obj.keys[name].named(shown)
        names = self.tools_of(env)
        if env.tools is not None and not names:
            return ANY.named(shown)  # no tool at all: reported where the names are
        if env.tools is None:
            who = "no tool declares it"
        elif len(names) == 1:
            params = ", ".join(self.ctx.tools[names[0]].params or ()) or "none"
            who = f'tool "{names[0]}" does not declare it (its parameters: {params})'
        else:
            who = f"none of the tools it applies to ({', '.join(names)}) declares it"
        self.report(
            node,
            "guard-argument-unknown",
            f'reads argument "{name}", but {who}, so it is always missing and the guard '
            f"never fires{suggest(name, obj.keys)}",
        )
        return ANY.named(shown)

    def result_shape(self, env: Env) -> Shape:
        names = self.tools_of(env)
        if (env.tools is None and len(names) > MAX_INFERRED) or not names:
            why = (
                "this hook sees every tool's result, whose type is not declared; for the "
                'text the model sees write payload["content"]'
            )
            return replace(ANY, unknown=why)
        out = S.NOTHING
        for name in names:
            returns = self.ctx.tools[name].returns
            if returns is None and self.ctx.infer is not None:
                returns = self.ctx.infer(name)
                returns = returns if returns.known else None
            if returns is None:
                why = (
                    f'tool "{name}" declares no `returns` and its result cannot be read '
                    "from a script, so its type is not known; for the text the model "
                    'sees write payload["content"]'
                )
                return replace(ANY, unknown=why)
            out = join(out, returns)
        if env.tools is not None and any(t not in self.ctx.tools for t in env.tools):
            return replace(
                ANY,
                unknown="a server's tool result has no declared type; for "
                'the text the model sees write payload["content"]',
            )
        return out

    # comparisons

    def e_Compare(self, node: ast.Compare, env: Env) -> Shape:
        left = self.expr(node.left, env)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.expr(comparator, env)
            if isinstance(op, (ast.In, ast.NotIn)):
                if left.role == "toolname" and right.texts is None:
                    names = _literals(comparator)
                    if names is not None:
                        self.tool_names(comparator, names)
                self.membership(node, left, right, self.src(node, ""))
            elif isinstance(op, (ast.Eq, ast.NotEq)):
                self.equality(node, left, right, comparator)
                self.equality(node, right, left, node.left)
            left = right
        return of(S.BOOL)

    def membership(self, node: ast.AST, item: Shape, box: Shape, written: str = "") -> None:
        if item.role == "toolname" or box.role == "toolname":
            return
        if not box.known:
            if box.unknown and S.STR in item.kinds:
                self.report(
                    node,
                    "guard-shape-unknown",
                    f"`in` on {box.what or 'a value'} of unknown type: {box.unknown}",
                    "warning",
                )
            return
        if not box.kinds:
            return
        if box.kinds <= {S.INT, S.FLOAT, S.BOOL, S.NULL}:
            self.report(
                node,
                "guard-shape",
                f"{self._shape_of(box)}: `in` fails on it at run time{self._hint(box)}",
            )
            return
        if box.role == "result" and item.kinds == {S.STR} and S.DICT in box.kinds:
            self.report(
                node,
                "guard-shape",
                f"{self._shape_of(box)}: `{written or 'in'}` tests the keys of a dict result, "
                f"not its text{self._hint(box)}",
            )
        elif box.kinds == {S.DICT} and item.kinds == {S.STR}:
            self.in_dict(node, item, box, written)
        elif box.kinds == {S.LIST} and box.item is not None and item.kinds == {S.STR}:
            if box.item.known and box.item.kinds and S.STR not in box.item.kinds:
                fix = ""
                if box.item.keys and "name" in box.item.keys:
                    fix = '; compare names: [e["name"] for e in ...], or use fs.exists(path)'
                self.report(
                    node,
                    "guard-shape",
                    f"{box.what or 'the list'} is a list of {box.item.text().split(' ', 1)[-1]}s"
                    f"{' ' + '{' + ', '.join(box.item.keys) + '}' if box.item.keys else ''}, "
                    f"so a string is never in it{fix}",
                )

    def in_dict(self, node: ast.AST, item: Shape, box: Shape, written: str) -> None:
        keys = box.keys
        if keys is None:
            return  # a dict whose keys are not known (a custom event emitted from Python)
        missing = None if item.texts is None else sorted(item.texts - set(keys))
        if missing == []:
            return
        if missing is None and box.role != "payload":
            return  # a key that comes from elsewhere: may be one of them
        shown = f'"{missing[0]}"' if missing else (item.what or "a string")
        written = written or f"{shown} in {box.what or 'it'}"
        self.report(
            node,
            "guard-shape",
            f"{self._shape_of(box)}: `{written}` tests for a key ({shown}), "
            f"which is never there{self._hint(box)}",
        )

    def equality(self, node: ast.AST, value: Shape, other: Shape, other_node: ast.AST) -> None:
        if other.kinds != {S.STR} or other.texts is None:
            return
        if value.role == "toolname":
            self.tool_names(other_node, other.texts)
            return
        if not value.known:
            if value.unknown:
                self.report(
                    node,
                    "guard-shape-unknown",
                    f"compares {value.what or 'a value'} of unknown type with a "
                    f"string: {value.unknown}",
                    "warning",
                )
            return
        if value.kinds and S.STR not in value.kinds:
            self.report(
                node,
                "guard-shape",
                f"{self._shape_of(value)}, never equal to a string{self._hint(value)}",
            )

    def tool_names(self, node: ast.AST, names: frozenset[str]) -> None:
        for name in sorted(names):
            if self.ctx.defines(name):
                continue
            match = closest(name, self.ctx.tools)
            hint = f' (did you mean "{match}"?)' if match else ""
            severity = "warning" if self.ctx.open_names else "error"
            more = (
                " unless a script registers it at run time (meta.tool_register)"
                if self.ctx.open_names
                else ""
            )
            self.report(
                node,
                "guard-tool-unknown",
                f'compares payload["name"] with "{name}", which no tool defines{hint}; '
                f"the guard never fires for it{more}",
                severity,
            )

    # calls

    def e_Call(self, node: ast.Call, env: Env) -> Shape:
        func = node.func
        if isinstance(func, ast.Attribute):
            return self.method(node, func, env)
        args = [self.expr(a, env) for a in node.args]
        for kw in node.keywords:
            self.expr(kw.value, env)
        if not isinstance(func, ast.Name):
            self.expr(func, env)
            return ANY
        name = func.id
        if self.ctx.on_call is not None:
            self.ctx.on_call(name, node, args)
        if name in ("block", "modify", "allow") and name not in env.vars:
            self.decisions.append((name, node, args))
            return of(S.DICT)
        if name == "len" and args:
            self.length(node, args[0])
        if name == "dict" and len(args) == 1 and args[0].kinds == {S.DICT}:
            return args[0].named(args[0].what, args[0].role if args[0].role == "arguments" else "")
        if name in self.defs and name not in env.vars:
            return self.helper(self.defs[name], args, env)
        return S.FUNCTION_RESULTS.get(name, ANY)

    def length(self, node: ast.AST, value: Shape) -> None:
        if value.role == "payload" and self.ctx.text_key:
            self.report(
                node,
                "guard-shape",
                f"len(payload) counts the keys of the {self.ctx.event} payload (a dict of "
                f"{len(value.keys or ())}){self._hint(value)}",
            )
        elif value.known and value.kinds and value.kinds <= {S.INT, S.FLOAT, S.BOOL, S.NULL}:
            self.report(
                node, "guard-shape", f"{self._shape_of(value)}: len() fails on it at run time"
            )
        elif not value.known and value.unknown:
            self.report(
                node,
                "guard-shape-unknown",
                f"len() of {value.what or 'a value'} of unknown type: {value.unknown}",
                "warning",
            )

    def helper(self, fn: ast.FunctionDef, args: list[Shape], env: Env) -> Shape:
        if self.helpers >= MAX_HELPERS:
            return ANY
        self.helpers += 1
        inner = Env({}, {}, env.tools)
        params = [a.arg for a in fn.args.args]
        for i, param in enumerate(params):
            inner.vars[param] = args[i] if i < len(args) else ANY
        saved = self.returns
        self.returns = []
        try:
            self.block(fn.body, inner)
            out = S.NOTHING
            for shape in self.returns:
                out = join(out, shape)
            return out if out.kinds else ANY
        finally:
            self.returns = saved

    def method(self, node: ast.Call, func: ast.Attribute, env: Env) -> Shape:
        args = [self.expr(a, env) for a in node.args]
        for kw in node.keywords:
            self.expr(kw.value, env)
        owner = func.value
        if (
            isinstance(owner, ast.Name)
            and owner.id in self.ctx.modules
            and owner.id not in env.vars
            and owner.id not in self.globals
        ):
            qualified = f"{owner.id}.{func.attr}"
            if self.ctx.on_call is not None:
                self.ctx.on_call(qualified, node, args)
            return S.BUILTIN_RESULTS.get(qualified, ANY)
        target = self.expr(owner, env)
        attr = func.attr
        if attr == "get" and args:
            return self.get(node, target, args, env)
        if attr in S.STR_METHODS and attr not in S.LIST_METHODS and attr not in S.DICT_METHODS:
            self.str_method(node, target, attr)
            if attr == "startswith" and target.role == "toolname" and args:
                self.prefixes(node.args[0], args[0])
            if attr in ("lower", "upper", "strip", "lstrip", "rstrip", "replace", "title"):
                return text().named(target.what, target.role)
            return S.STR_RESULTS.get(
                attr, of(S.BOOL) if attr.startswith(("is", "starts", "ends")) else text()
            )
        if attr in ("keys", "values", "items") and target.known and S.DICT not in target.kinds:
            self.report(
                node,
                "guard-shape",
                f"{self._shape_of(target)}: it has no {attr}(){self._hint(target)}",
            )
        if attr == "keys" and target.kinds == {S.DICT}:
            return of(S.LIST, item=text())
        return ANY

    def prefixes(self, node: ast.AST, arg: Shape) -> None:
        if arg.texts is None:
            return
        for prefix in arg.texts:
            if self.ctx.open_names or self.starting(prefix):
                continue
            if any(p.startswith(prefix) or prefix.startswith(p) for p in self.ctx.prefixes):
                continue
            self.report(
                node,
                "guard-tool-unknown",
                f'no tool name starts with "{prefix}", so the guard never fires'
                f"{suggest(prefix, {t[: len(prefix)] for t in self.ctx.tools})}",
            )

    def get(self, node: ast.Call, target: Shape, args: list[Shape], env: Env) -> Shape:
        default = args[1] if len(args) > 1 else of(S.NULL)
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            path = _path(node)
            if path is not None and path in env.paths:
                return env.paths[path]
            if target.known and target.kinds and S.DICT not in target.kinds:
                self.report(
                    node,
                    "guard-shape",
                    f"{self._shape_of(target)}: it has no get(){self._hint(target)}",
                )
                return ANY
            found = self.key(node, target, first.value, env, how="get")
            if target.role == "payload" or not found.known:
                return found  # a declared payload key is always there: no default
            return join(found, default)
        return ANY

    def str_method(self, node: ast.AST, target: Shape, attr: str) -> None:
        if not target.known:
            if target.unknown:
                self.report(
                    node,
                    "guard-shape-unknown",
                    f"{target.what or 'the value'}.{attr}() on a value of unknown "
                    f"type: {target.unknown}",
                    "warning",
                )
            return
        if target.kinds and S.STR not in target.kinds:
            self.report(
                node,
                "guard-shape",
                f"{self._shape_of(target)}, not a string: .{attr}() fails at run time"
                f"{self._hint(target)}",
            )


def _literals(node: ast.AST) -> frozenset[str] | None:
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


def walk_calls(tree: ast.AST) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None
