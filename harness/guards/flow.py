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
from collections.abc import Callable
from dataclasses import replace

from harness.guards import shapes as S
from harness.guards.model import (
    MAX_HELPERS,
    PY_TYPES,
    Context,
    Env,
    Finding,
    ToolInfo,
    join_env,
    literal,
    literals,
    path_of,
)
from harness.guards.shapes import ANY, Shape, join, of, text
from harness.guards.uses import Uses

__all__ = ["Checker", "Context", "Env", "Finding", "ToolInfo", "literal"]


class Checker(Uses):
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
        path = path_of(test)
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

    def narrow_prefix(self, test: ast.Call, env: Env) -> Env:
        """``payload["name"].startswith("p")``: the tools whose names start so."""
        subject = self.expr(test.func.value, env, quiet=True)  # type: ignore[attr-defined]
        prefixes = literals(test.args[0])
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
                PY_TYPES.get(t.id, "")
                for t in (
                    test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
                )
                if isinstance(t, ast.Name)
            ]
            path = path_of(test.args[0])
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
            path = path_of(left.args[0])
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
            path = path_of(left)
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
            names = None
            if isinstance(op, ast.Eq):
                names = literals(right)
            elif isinstance(op, ast.In):
                names = self.names_in(right, self.expr(right, env, quiet=True))
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

    def e_Attribute(self, node: ast.Attribute, env: Env) -> Shape:
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in self.ctx.modules:
            if owner.id not in env.vars:
                return ANY
        self.no_such_method(node, self.expr(owner, env), node.attr, call=False)
        return ANY

    def e_Lambda(self, node: ast.Lambda, env: Env) -> Shape:
        return ANY

    # subscripts and keys

    def e_Subscript(self, node: ast.Subscript, env: Env) -> Shape:
        path = path_of(node)
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

    # comparisons

    @staticmethod
    def names_in(node: ast.AST, shape: Shape) -> frozenset[str] | None:
        """The texts a list holds: written in place, or a constant list (NAMES = [...])."""
        found = literals(node)
        if found is None and shape.kinds == {S.LIST} and shape.item is not None:
            if shape.item.kinds == {S.STR}:
                found = shape.item.texts
        return found

    def e_Compare(self, node: ast.Compare, env: Env) -> Shape:
        left = self.expr(node.left, env)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.expr(comparator, env)
            if isinstance(op, (ast.In, ast.NotIn)):
                if right.role == "toolname" and left.texts is not None:
                    self.tool_substring(node, left.texts)
                if left.role == "toolname" and right.texts is None:
                    names = self.names_in(comparator, right)
                    if names is not None:
                        self.tool_names(comparator, names)
                self.membership(node, left, right, self.src(node, ""))
            elif isinstance(op, (ast.Eq, ast.NotEq)):
                self.event_compare(node, left, right)
                self.event_compare(node, right, left)
                self.equality(node, left, right, comparator)
                self.equality(node, right, left, node.left)
            left = right
        return of(S.BOOL)

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

    def module_call(self, node: ast.Call, qualified: str, args: list[Shape]) -> Shape:
        """A built-in module's function (``re.match(...)``)."""
        if qualified in ("re.match", "re.search") and len(args) > 1:
            if args[1].role == "toolname" and args[0].texts is not None:
                self.tool_pattern(node, args[0].texts)
        if self.ctx.on_call is not None:
            self.ctx.on_call(qualified, node, args)
        for index in S.TEXT_ARGUMENTS.get(qualified, ()):
            if index < len(args):
                self.text_argument(node.args[index], args[index], qualified)
        return S.BUILTIN_RESULTS.get(qualified, ANY)

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
            return self.module_call(node, f"{owner.id}.{func.attr}", args)
        target = self.expr(owner, env)
        attr = func.attr
        if self.no_such_method(func, target, attr, call=True):
            return ANY
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
        self.dict_view(node, target, attr)
        if attr == "keys" and target.kinds == {S.DICT}:
            return of(S.LIST, item=text())
        return ANY

    def get(self, node: ast.Call, target: Shape, args: list[Shape], env: Env) -> Shape:
        default = args[1] if len(args) > 1 else of(S.NULL)
        first = self.constant_key(node.args[0], env)
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            path = path_of(node)
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
