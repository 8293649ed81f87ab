"""A Python fast path for the common shape of hook ``when`` expressions.

A ``when`` runs on every call for every hook of the event, so evaluating it through
the Starlark interpreter (converting the whole payload each time) would dominate a
fast call. Expressions made only of the constructs below are compiled into Python
closures; anything else returns None from :func:`compile_when` and is evaluated by
Starlark as usual.

The rule is **exact or Starlark** (issue 10, item 4): a closure computes a value
only where Python's answer is provably Starlark's; at any other point it raises
:class:`Fallback` and the caller evaluates the whole expression in Starlark. So the
fast path can only ever be faster, never different.

Supported shapes: ``event``, ``payload``; plain literals (decimal ints, strings
without escapes or prefixes, ``True``/``False``/``None``) and lists/tuples of them;
``x[k]``, ``x.get(k[, d])``, ``s.startswith/endswith(...)``, ``s.lower()/upper()/
strip()``, ``len(x)``; one ``==``/``!=``/``<``/``<=``/``>``/``>=``/``in``/``not in``
per comparison; ``and``/``or``/``not`` and ``a if c else b``.

Values handled in Python: exact ``str``, ``int``, ``bool``, ``None``, ``list`` and
``dict`` (as JSON gives them; tuple literals keep their own type). Everything else,
and every case below, falls back:

- a ``float`` in ``==``, ``in`` or an ordering (Starlark compares int and float
  through float, which is not Python's exact comparison);
- ordering anything but int/int or str/str (Starlark orders lists, tuples, bools);
- a non-string key (dict lookups, ``in`` a dict), a payload tuple or any other type;
- ``lower``/``upper`` of non-ASCII text (Unicode tables differ between versions);
- ``startswith``/``endswith`` with anything but a string or a tuple of strings;
- every error (a missing key, an index out of range, a method of the wrong type):
  Starlark raises it with its own message.
``strip()`` removes exactly Unicode White_Space, as Starlark (Rust's ``trim``) does;
Python's ``str.strip()`` also removes U+001C..U+001F, so it is not used.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import starlark as sl

from harness.runtime.context import Outcome

Env = dict[str, Any]
Fn = Callable[[Env], Any]


class Fallback(Exception):
    """Python cannot answer exactly here: evaluate the expression in Starlark."""


# The old name: callers that caught a run-time failure now catch the fallback signal.
WhenError = Fallback
# What a compiled closure may raise; every one means "ask Starlark". (A TypeError and
# the like cannot happen by design; should one, Starlark answers, not Python.)
FALLBACK_ERRORS = (
    Fallback,
    TypeError,
    ValueError,
    AttributeError,
    KeyError,
    IndexError,
    RecursionError,
)


class _Unsupported(Exception):
    pass


class _Tuple(tuple[Any, ...]):
    """A tuple written in the expression (a tuple in the payload falls back)."""

    __slots__ = ()


_NoneType = type(None)
# Exact types whose ==, truth value and container behaviour match Starlark's.
_KNOWN = frozenset({str, int, bool, _NoneType, list, dict, _Tuple})
_SCALAR = frozenset({str, int, bool, _NoneType})
# Unicode White_Space: what Starlark's strip() removes (Rust's str::trim).
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _eq(a: Any, b: Any) -> bool:
    """Starlark's ``a == b``, or Fallback."""
    ta, tb = type(a), type(b)
    if ta not in _KNOWN or tb not in _KNOWN:
        raise Fallback  # float (int/float compare through float), tuples, anything else
    if ta is not tb:
        return False  # no other cross-type equality in Starlark (True != 1, [] != ())
    if ta in _SCALAR:
        return bool(a == b)
    if ta is dict:
        if len(a) != len(b):
            return False
        for k, v in a.items():
            if type(k) is not str:
                raise Fallback
            if k not in b or not _eq(v, b[k]):
                return False
        return True
    return len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b, strict=True))


def _contains(container: Any, item: Any) -> bool:
    kind = type(container)
    if kind is str:
        if type(item) is not str:
            raise Fallback
        return item in container
    if kind is list or kind is _Tuple:
        return any(_eq(item, x) for x in container)
    if kind is dict and type(item) is str:
        return item in container
    raise Fallback


def _order(op: str) -> Callable[[Any, Any], bool]:
    def cmp(a: Any, b: Any) -> bool:
        ta = type(a)
        if ta is not type(b) or (ta is not int and ta is not str):
            raise Fallback
        if op == "<":
            return bool(a < b)
        if op == "<=":
            return bool(a <= b)
        if op == ">":
            return bool(a > b)
        return bool(a >= b)

    return cmp


_CMP: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: _eq,
    ast.NotEq: lambda a, b: not _eq(a, b),
    ast.In: lambda a, b: _contains(b, a),
    ast.NotIn: lambda a, b: not _contains(b, a),
    ast.Lt: _order("<"),
    ast.LtE: _order("<="),
    ast.Gt: _order(">"),
    ast.GtE: _order(">="),
}


def _truth(value: Any) -> bool:
    if type(value) in _KNOWN or type(value) is float:
        return bool(value)
    raise Fallback


def _index(obj: Any, key: Any) -> Any:
    kind = type(obj)
    try:
        if kind is dict and type(key) is str:
            return obj[key]
        if (kind is list or kind is str or kind is _Tuple) and type(key) is int:
            return obj[key]
    except (KeyError, IndexError):
        pass  # Starlark reports it
    raise Fallback


_NOT_CONST = object()
# Literals whose Python value is their Starlark value, by their source text.
_PLAIN_LITERAL = re.compile(r'(?:0|[1-9][0-9]*|"[^"\\\n]*"|\'[^\'\\\n]*\'|True|False|None)\Z')


class _Compiler:
    def __init__(self, source: str) -> None:
        self.source = source

    def compile(self, node: ast.AST) -> Fn:  # noqa: C901 - one branch per shape
        if isinstance(node, ast.Constant):
            value = node.value
            text = ast.get_source_segment(self.source, node)
            if (
                (value is None or type(value) in (str, int, bool))
                and text is not None
                and _PLAIN_LITERAL.match(text)
            ):
                return lambda env: value
            raise _Unsupported
        if isinstance(node, ast.Name):
            name = node.id
            if name in ("event", "payload"):
                return lambda env: env[name]
            raise _Unsupported
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.compile(e) for e in node.elts]
            const = self.constant(node)
            if const is not _NOT_CONST:
                return lambda env: const  # never mutated: built once
            if isinstance(node, ast.Tuple):
                return lambda env: _Tuple([f(env) for f in items])
            return lambda env: [f(env) for f in items]
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("event", "payload")
            and isinstance(node.slice, ast.Constant)
            and type(node.slice.value) is str
        ):
            self.compile(node.slice)  # the literal must be plain
            # payload["name"]: the commonest shape, one closure instead of three.
            var, field_key = node.value.id, node.slice.value

            def field(env: Env) -> Any:
                obj = env[var]
                if type(obj) is dict:
                    try:
                        return obj[field_key]
                    except KeyError:
                        raise Fallback from None
                return _index(obj, field_key)

            return field
        if isinstance(node, ast.Subscript):
            obj, key = self.compile(node.value), self.compile(node.slice)
            return lambda env: _index(obj(env), key(env))
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.BoolOp):
            return self._boolop(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.compile(node.operand)
            return lambda env: not _truth(inner(env))
        if isinstance(node, ast.IfExp):
            test, body, orelse = (
                self.compile(node.test),
                self.compile(node.body),
                self.compile(node.orelse),
            )
            return lambda env: body(env) if _truth(test(env)) else orelse(env)
        if isinstance(node, ast.Call) and not node.keywords:
            return self._call(node)
        raise _Unsupported

    def constant(self, node: ast.AST) -> Any:
        """The value of a literal (list/tuple of literals), or _NOT_CONST."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.constant(e) for e in node.elts]
            if any(v is _NOT_CONST for v in items):
                return _NOT_CONST
            return _Tuple(items) if isinstance(node, ast.Tuple) else items
        return _NOT_CONST

    def _compare(self, node: ast.Compare) -> Fn:
        if len(node.ops) != 1 or type(node.ops[0]) not in _CMP:
            raise _Unsupported  # chained comparisons are a syntax error in Starlark
        left, right = self.compile(node.left), self.compile(node.comparators[0])
        op = _CMP[type(node.ops[0])]
        const = node.comparators[0]
        if (
            isinstance(const, ast.Constant)
            and type(const.value) is str
            and type(node.ops[0]) in (ast.Eq, ast.NotEq)
        ):
            # == / != against a string literal: only an equal str can match.
            text, negate = const.value, type(node.ops[0]) is ast.NotEq

            def eq_text(env: Env) -> bool:
                v = left(env)
                if type(v) is str:
                    return (v == text) is not negate
                if type(v) in _KNOWN or type(v) is float:
                    return negate
                raise Fallback

            return eq_text
        container = self.constant(const)
        if (
            type(node.ops[0]) in (ast.In, ast.NotIn)
            and type(container) in (list, _Tuple)
            and all(type(v) is str for v in container)
        ):
            # x in ["a", "b"]: only an equal str can be found (the commonest filter).
            texts, negate = frozenset(container), type(node.ops[0]) is ast.NotIn

            def in_texts(env: Env) -> bool:
                v = left(env)
                if type(v) is str:
                    return (v in texts) is not negate
                if type(v) in _KNOWN or type(v) is float:
                    return negate
                raise Fallback

            return in_texts
        return lambda env: op(left(env), right(env))

    def _boolop(self, node: ast.BoolOp) -> Fn:
        parts = [self.compile(v) for v in node.values]
        if isinstance(node.op, ast.And):

            def and_(env: Env) -> Any:
                value: Any = True
                for p in parts:
                    value = p(env)
                    if not _truth(value):
                        return value
                return value

            return and_

        def or_(env: Env) -> Any:
            value: Any = False
            for p in parts:
                value = p(env)
                if _truth(value):
                    return value
            return value

        return or_

    def _call(self, node: ast.Call) -> Fn:  # noqa: C901
        args = [self.compile(a) for a in node.args]
        if isinstance(node.func, ast.Name) and node.func.id == "len" and len(args) == 1:
            arg = args[0]

            def length(env: Env) -> int:
                v = arg(env)
                kind = type(v)
                if kind is str or kind is list or kind is dict or kind is _Tuple:
                    return len(v)
                raise Fallback

            return length
        if not isinstance(node.func, ast.Attribute):
            raise _Unsupported
        target, method = self.compile(node.func.value), node.func.attr
        if method == "get" and 1 <= len(args) <= 2:
            key_fn = args[0]
            default_fn = args[1] if len(args) == 2 else (lambda env: None)

            def get(env: Env) -> Any:
                obj, key, default = target(env), key_fn(env), default_fn(env)
                if type(obj) is not dict or type(key) is not str:
                    raise Fallback
                return obj.get(key, default)

            return get
        if method in ("startswith", "endswith") and len(args) == 1:
            arg = args[0]

            def affix(env: Env) -> bool:
                obj, value = target(env), arg(env)
                if type(obj) is not str:
                    raise Fallback
                if type(value) is _Tuple and all(type(v) is str for v in value):
                    value = tuple(value)
                elif type(value) is not str:
                    raise Fallback
                return bool(getattr(obj, method)(value))

            return affix
        if method in ("lower", "upper", "strip") and not args:

            def str_method(env: Env) -> str:
                obj = target(env)
                if type(obj) is not str:
                    raise Fallback
                if method == "strip":
                    return obj.strip(WHITE_SPACE)
                if not obj.isascii():
                    raise Fallback
                return obj.lower() if method == "lower" else obj.upper()

            return str_method
        raise _Unsupported


def _result(value: Any) -> Any:
    """The value as Starlark hands it back (through JSON: tuples become lists)."""
    kind = type(value)
    if kind is list or isinstance(value, tuple):
        return [_result(v) for v in value]
    if kind is dict:
        return {k: _result(v) for k, v in value.items()}
    return value


def when_source(expr: str) -> str:
    """Wrap a ``when`` expression as a function; line 1 of the result is line 1 of expr."""
    return "def harness_when(event, payload): return (" + expr.strip() + "\n)\n"


def _parses_as_starlark(expr: str) -> bool:
    try:
        sl.parse("when", when_source(expr), sl.Dialect.standard())
    except Exception:  # noqa: BLE001 - Starlark reports the syntax error itself
        return False
    return True


@lru_cache(maxsize=1024)
def compile_when(expr: str) -> Fn | None:
    """A Python closure for ``expr``, or None when Starlark must evaluate it.

    The closure returns the value Starlark would return, or raises one of
    :data:`FALLBACK_ERRORS` (by design :class:`Fallback`).
    """
    source = expr.strip()
    try:
        tree = ast.parse(source, mode="eval")
        body = _Compiler(source).compile(tree.body)
    except (SyntaxError, _Unsupported, KeyError, RecursionError, ValueError, MemoryError):
        return None
    if not _parses_as_starlark(expr):
        return None
    if isinstance(tree.body, ast.Compare) or (
        isinstance(tree.body, ast.UnaryOp) and isinstance(tree.body.op, ast.Not)
    ):
        return body  # always a bool: nothing to convert

    def run(env: Env) -> Any:
        value = body(env)
        kind = type(value)
        if kind is list or kind is dict or isinstance(value, tuple):
            value = _result(value)
        return value

    return run


NO_ANSWER = object()  # the Python evaluator cannot answer exactly: Starlark decides


def fast_value(fn: Fn | None, event: str, payload: Mapping[str, Any]) -> Any:
    """The value of a compiled ``when`` (:func:`compile_when`), or ``NO_ANSWER``.

    The hook chain does the same inline with the ``when`` its plan compiled
    (``hooks.HookPlan``) before asking the runtime: a plain comparison needs no
    context, no worker round trip and no payload conversion. The runtimes'
    ``eval_when`` always evaluate in Starlark.
    """
    if fn is None:
        return NO_ANSWER
    try:
        return fn({"event": event, "payload": payload})
    except FALLBACK_ERRORS:
        return NO_ANSWER


def fast_when(
    expr: str, event: str, payload: Mapping[str, Any], filename: str, line: int
) -> Outcome | None:
    """``expr`` evaluated in Python as an Outcome when that is exact, else None."""
    value = fast_value(compile_when(expr), event, payload)
    return None if value is NO_ANSWER else Outcome("ok", value, None, 0.0)
