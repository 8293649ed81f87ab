"""How deeply a Starlark script nests, measured before starlark ever sees it.

The Starlark parser, linter, type checker and compiler recurse on the native stack,
one frame per level of nesting; a 100,000-term ``1+1+…``, 20,000 nested lists or a
long ``elif`` chain overflows it and the process dies with SIGSEGV (no exception can
be caught). :func:`too_deep` scans the text with a small tokenizer of its own (it
never raises, whatever the input) and returns where the nesting passes
:data:`MAX_NESTING` levels, so callers refuse the script with a clear message
instead.

The measure is an upper bound of the syntax tree's depth: inside one statement,
every operator, keyword operator (``not``, ``and``, ``if``…), attribute dot and
bracket adds a level to the comma-separated element it is in, and a bracket's
content adds its deepest element; each indented block adds two levels, each
``elif`` of a chain one, each ``lambda`` two. Measured with an 8 MiB stack,
starlark-pyo3 crashes from about 1,000 nested lambdas, 1,500 nested ``def``,
1,800 ``elif``, 2,000 nested dicts or 3,300 chained ``+``; :data:`MAX_NESTING` (200)
keeps every form well under 2 MiB of stack (the smallest thread stack we run on).

Most scripts hold fewer level-making characters than the limit: a bound computed with
``str.count`` (:func:`_quick_bound`) skips the scan for them, so ``harness validate``
pays for the scan only on large scripts (``bench/bench_load.py``: no measurable change).
"""

from __future__ import annotations

import re

MAX_NESTING = 200

_KEYWORD = r"(?:not|and|or|if|else|elif|for|in|lambda)\b"
_STRING = (
    r"""[rRbB]{0,2}(?:'''(?:\\.|[^\\])*?(?:'''|\Z)|\"\"\"(?:\\.|[^\\])*?(?:\"\"\"|\Z)"""
    r"""|'(?:\\.|[^'\\\n])*'?|"(?:\\.|[^"\\\n])*"?)"""
)
# One token that can make a level per match. Blanks and names that are not keywords are
# skipped inside the match (no Python work for them); a name directly before a quote is
# a string prefix (r"...", b'...').
_TOKEN = re.compile(
    r"""(?:[ \t\f]+|(?!""" + _KEYWORD + r""")[A-Za-z_]\w*+(?!['"]))*+"""
    r"""(?:(?P<kw>""" + _KEYWORD + r""")"""
    r"""|(?P<nl>\r?\n)"""
    r"""|(?P<open>[(\[{])"""
    r"""|(?P<close>[)\]}])"""
    r"""|(?P<sep>[,;])"""
    r"""|(?P<op>\*\*=?|//=?|<<=?|>>=?|->|[-+*/%&|^<>=!]=?|[~.@])"""
    r"""|(?P<str>""" + _STRING + r""")"""
    r"""|(?P<comment>\#[^\n]*)"""
    r"""|(?P<num>\.?\d[\w.]*)"""
    r"""|(?P<cont>\\\r?\n)"""
    r"""|(?P<other>.))""",
    re.S,
)
_INDENT = re.compile(r"[ \t\f]*")
# Keywords that make a level of the syntax tree, and what each level weighs.
_WEIGHTS = {
    "not": 1,
    "and": 1,
    "or": 1,
    "if": 1,
    "else": 1,
    "elif": 1,
    "for": 1,
    "in": 1,
    "lambda": 2,
}
_BLOCK = 2


# Every character the scan can count, for a quick upper bound (see _quick_bound).
_LEVEL_CHARS = tuple("([{-+*/%&|^<>=!~.@:$?`\\")
_WORDS = ("not", "and", "or", "if", "else", "for", "in", "lambda", "lambda", "elif")
_ODD = re.compile(r"[^\t\n\x20-\x7e]")
_INDENTS = re.compile(r"\n([ \t\f]*)")


def _quick_bound(source: str) -> int | None:
    """An upper bound of what :func:`too_deep` can measure, from C-speed counts (None for
    text with characters the bound does not cover: not printable ASCII)."""
    if _ODD.search(source) is not None:
        return None
    deepest = max(map(len, _INDENTS.findall(source)), default=0)
    return (
        sum(map(source.count, _LEVEL_CHARS))
        + sum(map(source.count, _WORDS))
        + _BLOCK * (deepest + len(source) - len(source.lstrip(" \t\f")))
    )


def _indent(source: str, at: int) -> int:
    found = _INDENT.match(source, at)
    return found.end() if found is not None else at


def too_deep(source: str, limit: int = MAX_NESTING) -> tuple[int, int] | None:
    """``(line, column)`` (1-based) where ``source`` nests deeper than ``limit``, or None."""
    bound = _quick_bound(source)
    if bound is not None and bound <= limit:
        return None  # most scripts: too few level-making characters to go deeper
    return _deepest_scan(source, limit)


def _deepest_scan(source: str, limit: int) -> tuple[int, int] | None:  # noqa: C901
    """:func:`too_deep` without the quick bound."""
    # Statement frames: [ops, sub, best] per open bracket (index 0 is the statement).
    frames: list[list[int]] = [[0, 0, 0]]
    total = 0  # sum of ops + sub over the frames: the depth of the path being read
    widths = [_indent(source, 0)]  # indentation of the open blocks
    chains = [0]  # elif chain length per block level
    blocks = 0  # block levels weighed (blocks * _BLOCK + elif chains)
    line, line_start = 1, 0
    for match in _TOKEN.finditer(source):
        kind = match.lastgroup
        if kind is None or kind == "comment":
            continue
        if kind == "nl" or kind == "cont":
            line += 1
            line_start = match.end()
            if kind == "cont" or len(frames) > 1:
                continue  # the statement goes on
            top = frames[0]
            total, top[0], top[1], top[2] = 0, 0, 0, 0
            # The next statement's indentation (blank and comment lines do not count).
            first = _indent(source, line_start)
            if first >= len(source) or source[first] in "\r\n#":
                continue
            width = first - line_start
            while len(widths) > 1 and widths[-1] > width:
                widths.pop()
                chains.pop()
            if width > widths[-1]:
                widths.append(width)
                chains.append(0)
            if source.startswith("elif", first):
                chains[-1] += 1
            elif not source.startswith("else", first):
                chains[-1] = 0
            blocks = (len(widths) - 1) * _BLOCK + sum(chains)
            if blocks > limit:
                return line, width + 1
            continue
        at = match.start(kind)
        if kind == "str":
            text = match.group(kind)
            line_in = text.count("\n")
            if line_in:
                line += line_in
                line_start = at + text.rfind("\n") + 1
            continue
        frame = frames[-1]
        if kind == "op" or kind == "other":
            frame[0] += 1
            total += 1
        elif kind == "kw":
            weight = _WEIGHTS[match.group(kind)]
            frame[0] += weight
            total += weight
        elif kind == "open":
            frame[0] += 1
            total += 1
            frames.append([0, 0, 0])
        elif kind == "close":
            if len(frames) == 1:
                continue
            inner = frames.pop()
            total -= inner[0] + inner[1]
            depth = max(inner[2], inner[0] + inner[1])
            parent = frames[-1]
            if depth > parent[1]:
                total += depth - parent[1]
                parent[1] = depth
        elif kind == "sep":
            frame[2] = max(frame[2], frame[0] + frame[1])
            total -= frame[0] + frame[1]
            frame[0] = frame[1] = 0
        else:
            continue
        if total + blocks > limit:
            return line, at - line_start + 1
    return None


def message(what: str, limit: int = MAX_NESTING) -> str:
    return (
        f"{what} nests too deeply (more than {limit} levels of brackets, operators, "
        "calls, conditions or blocks); the Starlark parser would overflow its stack. "
        "Split it into smaller expressions, variables or functions"
    )


# -- values -------------------------------------------------------------------------
#
# Values nest at run time too: a script building ``x = [x]`` in a loop, a model sending
# arguments 1,100 arrays deep, an upstream server or an ``http.*`` answer with deep JSON.
# Deep values overflow recursive code on both sides of the boundary (Python's json and
# jsonschema raise RecursionError; starlark-rust's json.encode overflows the native
# stack at about 300 levels on 8 MiB, 27 KiB per level). :func:`value_problem` is the
# one rule for every value crossing into or out of a script: arguments, results, hook
# payloads and decisions, built-in results, model arguments, upstream results, JSON
# from ``http.*`` (tests/security/test_value_nesting.py walks every path).

MAX_VALUE_DEPTH = 64
_NESTED = (dict, list, tuple)


def value_depth_path(value: object, limit: int = MAX_VALUE_DEPTH) -> str | None:
    """The JSON path (``$.a[0]...``) of a container nested deeper than ``limit`` levels
    in ``value``, or None. Iterative (level by level): never recurses, whatever the depth;
    a cyclic value counts as too deep."""
    if not isinstance(value, _NESTED):
        return None
    level: list[object] = [value]
    for _depth in range(limit):
        inner: list[object] = []
        append = inner.append
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:  # type: ignore[attr-defined]
                kind = type(child)
                if kind is dict or kind is list or kind is tuple or _subclass(kind):
                    append(child)
        if not inner:
            return None
        level = inner
    return _path_to_depth(value, limit + 1)


def _subclass(kind: type) -> bool:
    """A subclass of dict, list or tuple (exact types are checked inline, first)."""
    return kind not in _SCALARS and issubclass(kind, _NESTED)


_SCALARS = frozenset((str, int, float, bool, type(None), bytes))


def _path_to_depth(value: object, depth: int) -> str:
    """The path of a container at ``depth`` (one exists: found by the walk above)."""
    stack: list[tuple[object, str, int]] = [(value, "$", 1)]
    while stack:
        item, path, level = stack.pop()
        if level >= depth:
            return path
        pairs = item.items() if isinstance(item, dict) else enumerate(item)  # type: ignore[arg-type]
        for key, child in pairs:
            if isinstance(child, _NESTED):
                step = f"[{key}]" if isinstance(key, int) else _key(key)
                stack.append((child, path + step, level + 1))
    return "$"  # pragma: no cover - unreachable when the walk found a deeper level


def _key(key: object) -> str:
    text = str(key)
    return f".{text}" if text.isidentifier() else f"[{text[:40]!r}]"


def value_problem(value: object, what: str, limit: int = MAX_VALUE_DEPTH) -> str | None:
    """The one nesting rule for values: the error message for ``what`` (``arguments for
    tool "x"``, ``the result of tool "x"`` ...) when ``value`` nests deeper than ``limit``
    levels of objects and arrays, else None."""
    path = value_depth_path(value, limit)
    if path is None:
        return None
    return f"{what} nests too deeply: {path} is deeper than {limit} levels {_OF}"


_OF = (
    "of objects and arrays (the limit for every value passed into or out of a script, "
    "a tool or a model)"
)


def too_deep_to_decode(what: str) -> str:
    """:func:`value_problem`'s message for JSON too deep for Python's decoder (no path)."""
    return f"{what} nests too deeply: deeper than {MAX_VALUE_DEPTH} levels {_OF}"


def loads(text: str | bytes, what: str) -> tuple[object, str | None]:
    """``(value, None)`` for JSON text whose value passes :func:`value_problem`, else
    ``(None, message)``; JSON too deep for Python's own decoder says the same. Other
    decoding errors raise ``ValueError`` as ``json.loads`` does."""
    import json

    try:
        value = json.loads(text)
    except RecursionError:
        return None, too_deep_to_decode(what)
    problem = value_problem(value, what)
    return (None, problem) if problem else (value, None)
