"""A Python fast path for the common shape of hook ``when`` expressions.

A ``when`` runs on every call for every hook of the event, so evaluating it through
the Starlark interpreter (converting the whole payload each time) would dominate a
fast call. Expressions made only of the constructs below are compiled into Python
closures with Starlark's semantics; anything else returns None from :func:`compile_when`
and is evaluated by Starlark as usual.

Supported: ``event``, ``payload``, str/int/bool/None literals and lists/tuples of them,
``x[const]``, ``x.get(k[, d])``, ``s.startswith/endswith(...)``, ``s.lower()/upper()``,
``len(x)``, ``==``/``!=``/``<``/``<=``/``>``/``>=``/``in``/``not in``, ``and``/``or``/
``not`` and ``a if c else b``. Differences from Python that matter here are handled:
``True == 1`` is False in Starlark, and ``and``/``or`` return an operand.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from harness.runtime.context import Outcome

Env = dict[str, Any]
Fn = Callable[[Env], Any]


class WhenError(Exception):
    """The expression failed at run time (the hook fails, as in Starlark)."""


class _Unsupported(Exception):
    pass


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) is not isinstance(b, bool):
        return False
    return bool(a == b)


def _contains(container: Any, item: Any) -> bool:
    if isinstance(container, str):
        if not isinstance(item, str):
            raise WhenError(f"'in' on a string needs a string, got {type(item).__name__}")
        return item in container
    if isinstance(container, dict):
        return item in container
    if isinstance(container, (list, tuple)):
        return any(_same(item, x) for x in container)
    raise WhenError(f"'in' is not supported on {type(container).__name__}")


def _order(op: str) -> Callable[[Any, Any], bool]:
    def cmp(a: Any, b: Any) -> bool:
        ok = (isinstance(a, str) and isinstance(b, str)) or (
            isinstance(a, int) and isinstance(b, int)
            and not isinstance(a, bool) and not isinstance(b, bool))
        if not ok:
            raise WhenError(f"cannot compare {type(a).__name__} {op} {type(b).__name__}")
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]

    return cmp


_CMP: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: _same,
    ast.NotEq: lambda a, b: not _same(a, b),
    ast.In: lambda a, b: _contains(b, a),
    ast.NotIn: lambda a, b: not _contains(b, a),
    ast.Lt: _order("<"), ast.LtE: _order("<="), ast.Gt: _order(">"), ast.GtE: _order(">="),
}
_STR_METHODS = {"startswith", "endswith", "lower", "upper", "strip"}


def _index(obj: Any, key: Any) -> Any:
    try:
        if isinstance(obj, dict):
            return obj[key]
        if isinstance(obj, (list, str)) and isinstance(key, int) and not isinstance(key, bool):
            return obj[key]
    except (KeyError, IndexError):
        raise WhenError(f"key {key!r} not found") from None
    raise WhenError(f"cannot index {type(obj).__name__} with {type(key).__name__}")


def _compile(node: ast.AST) -> Fn:
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, (str, int, bool)):
            return lambda env: value
        raise _Unsupported
    if isinstance(node, ast.Name):
        name = node.id
        if name in ("event", "payload"):
            return lambda env: env[name]
        if name in ("True", "False", "None"):  # pragma: no cover - parsed as Constant
            raise _Unsupported
        raise _Unsupported
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_compile(e) for e in node.elts]
        return lambda env: [f(env) for f in items]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and node.value.id in ("event", "payload") and isinstance(node.slice, ast.Constant) \
            and type(node.slice.value) is str:
        # payload["name"]: the commonest shape, one closure instead of three.
        var, field_key = node.value.id, node.slice.value

        def field(env: Env) -> Any:
            obj = env[var]
            if type(obj) is dict:
                try:
                    return obj[field_key]
                except KeyError:
                    raise WhenError(f"key {field_key!r} not found") from None
            return _index(obj, field_key)
        return field
    if isinstance(node, ast.Subscript):
        obj, key = _compile(node.value), _compile(node.slice)
        return lambda env: _index(obj(env), key(env))
    if isinstance(node, ast.Compare):
        left = _compile(node.left)
        pairs = [(_CMP[type(op)], _compile(c)) for op, c in zip(node.ops, node.comparators,
                                                               strict=True)
                 if type(op) in _CMP]
        if len(pairs) != len(node.ops) or len(pairs) != 1:
            raise _Unsupported  # chained comparisons differ between the languages
        op, right = pairs[0]
        const = node.comparators[0]
        if isinstance(const, ast.Constant) and type(const.value) is str \
                and type(node.ops[0]) in (ast.Eq, ast.NotEq):
            # == / != against a string literal: only an equal string can match (a bool
            # never equals a string), so Python's == is Starlark's here.
            text = const.value
            if type(node.ops[0]) is ast.Eq:
                return lambda env: left(env) == text
            return lambda env: left(env) != text
        return lambda env: op(left(env), right(env))
    if isinstance(node, ast.BoolOp):
        parts = [_compile(v) for v in node.values]
        if isinstance(node.op, ast.And):
            def and_(env: Env) -> Any:
                value: Any = True
                for p in parts:
                    value = p(env)
                    if not value:
                        return value
                return value
            return and_

        def or_(env: Env) -> Any:
            value: Any = False
            for p in parts:
                value = p(env)
                if value:
                    return value
            return value
        return or_
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _compile(node.operand)
        return lambda env: not inner(env)
    if isinstance(node, ast.IfExp):
        test, body, orelse = _compile(node.test), _compile(node.body), _compile(node.orelse)
        return lambda env: body(env) if test(env) else orelse(env)
    if isinstance(node, ast.Call) and not node.keywords:
        args = [_compile(a) for a in node.args]
        if isinstance(node.func, ast.Name) and node.func.id == "len" and len(args) == 1:
            def length(env: Env) -> int:
                v = args[0](env)
                if not isinstance(v, (str, list, dict)):
                    raise WhenError(f"len() of {type(v).__name__}")
                return len(v)
            return length
        if isinstance(node.func, ast.Attribute):
            target, method = _compile(node.func.value), node.func.attr
            if method == "get" and 1 <= len(args) <= 2:
                def get(env: Env) -> Any:
                    obj = target(env)
                    if not isinstance(obj, dict):
                        raise WhenError(f"{type(obj).__name__} has no method get")
                    return obj.get(args[0](env), args[1](env) if len(args) == 2 else None)
                return get
            if method in _STR_METHODS:
                def str_method(env: Env) -> Any:
                    obj = target(env)
                    if not isinstance(obj, str):
                        raise WhenError(f"{type(obj).__name__} has no method {method}")
                    values = [a(env) for a in args]
                    if method in ("startswith", "endswith"):
                        if len(values) != 1 or not isinstance(values[0], (str, list)):
                            raise WhenError(f"{method}() takes one string")
                        arg = tuple(values[0]) if isinstance(values[0], list) else values[0]
                        return getattr(obj, method)(arg)
                    if values:
                        raise WhenError(f"{method}() takes no arguments")
                    return getattr(obj, method)()
                return str_method
    raise _Unsupported


@lru_cache(maxsize=1024)
def compile_when(expr: str) -> Fn | None:
    """A Python closure for ``expr``, or None when Starlark must evaluate it."""
    try:
        tree = ast.parse(expr.strip(), mode="eval")
        return _compile(tree.body)
    except (SyntaxError, _Unsupported, KeyError, RecursionError, ValueError):
        return None


def fast_when(expr: str, event: str, payload: Mapping[str, Any], filename: str,
              line: int) -> Outcome | None:
    """Evaluate ``expr`` in Python when it has the supported shape, else None.

    Both runtimes call this first: a ``when`` never needs a worker round trip or a
    payload conversion when it is a plain comparison.
    """
    fn = compile_when(expr)
    if fn is None:
        return None
    try:
        return Outcome("ok", fn({"event": event, "payload": payload}), None, 0.0)
    except WhenError as exc:
        return Outcome("error", None, f"{exc} (at {filename}:{line})", 0.0)
    except (TypeError, ValueError, AttributeError) as exc:  # pragma: no cover - defensive
        return Outcome("error", None, f"{exc} (at {filename}:{line})", 0.0)
