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
"""

from __future__ import annotations

import re

MAX_NESTING = 200

_TOKEN = re.compile(
    r"""(?P<str>[rRbB]{0,2}(?:'''(?:\\.|[^\\])*?(?:'''|\Z)|\"\"\"(?:\\.|[^\\])*?(?:\"\"\"|\Z)"""
    r"""|'(?:\\.|[^'\\\n])*'?|"(?:\\.|[^"\\\n])*"?))"""
    r"""|(?P<comment>\#[^\n]*)"""
    r"""|(?P<nl>\r?\n)"""
    r"""|(?P<cont>\\\r?\n)"""
    r"""|(?P<name>[A-Za-z_]\w*)"""
    r"""|(?P<num>\.?\d[\w.]*)"""
    r"""|(?P<open>[(\[{])"""
    r"""|(?P<close>[)\]}])"""
    r"""|(?P<sep>[,;])"""
    r"""|(?P<ws>[ \t\f]+)"""
    r"""|(?P<op>\*\*=?|//=?|<<=?|>>=?|->|[-+*/%&|^<>=!]=?|[~.@])"""
    r"""|(?P<other>.)""",
    re.S)
# Keywords that make a level of the syntax tree, and what each level weighs.
_KEYWORDS = {"not": 1, "and": 1, "or": 1, "if": 1, "else": 1, "for": 1, "in": 1,
             "lambda": 2}
_BLOCK = 2


def too_deep(source: str, limit: int = MAX_NESTING) -> tuple[int, int] | None:
    """``(line, column)`` (1-based) where ``source`` nests deeper than ``limit``, or None."""
    # Statement frames: [ops, sub, best] per open bracket (index 0 is the statement).
    frames: list[list[int]] = [[0, 0, 0]]
    total = 0  # sum of ops + sub over the frames: the depth of the path being read
    widths = [0]  # indentation of the open blocks
    chains = [0]  # elif chain length per block level
    blocks = 0  # block levels weighed (blocks * _BLOCK + elif chains)
    line, line_start = 1, 0
    start_of_line = True
    for match in _TOKEN.finditer(source):
        kind = match.lastgroup
        if kind == "ws" or kind == "comment":
            continue
        if kind == "nl" or kind == "cont":
            line += 1
            line_start = match.end()
            if kind == "nl" and len(frames) == 1:
                top = frames[0]
                total, top[0], top[1], top[2] = 0, 0, 0, 0
                start_of_line = True
            continue
        text = match.group()
        if start_of_line and len(frames) == 1:
            start_of_line = False
            width = match.start() - line_start
            while len(widths) > 1 and widths[-1] > width:
                widths.pop()
                chains.pop()
            if width > widths[-1]:
                widths.append(width)
                chains.append(0)
            if text == "elif":
                chains[-1] += 1
            elif text != "else":
                chains[-1] = 0
            blocks = (len(widths) - 1) * _BLOCK + sum(chains)
        if kind == "str":
            line_in = text.count("\n")
            if line_in:
                line += line_in
                line_start = match.start() + text.rfind("\n") + 1
            continue
        frame = frames[-1]
        if kind == "op" or kind == "other":
            frame[0] += 1
            total += 1
        elif kind == "name":
            weight = _KEYWORDS.get(text, 0)
            if not weight:
                continue
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
            return line, match.start() - line_start + 1
    return None


def message(what: str, limit: int = MAX_NESTING) -> str:
    return (f"{what} nests too deeply (more than {limit} levels of brackets, operators, "
            "calls, conditions or blocks); the Starlark parser would overflow its stack. "
            "Split it into smaller expressions, variables or functions")
