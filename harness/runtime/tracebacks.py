"""What a failed script says: the message, where it failed, and the traceback.

starlark-rust's error text lists the calls on the way (``* file:line, in fn`` with
the line's code) and then the failing expression (`` --> file:line:col`` with a
caret line under it); the innermost function is listed only when it failed inside a
built-in. Scripts are compiled with their Markdown file's name and line numbers, so
every location here is a line of that file. :func:`script_error_message` reduces the
text to ``message (at file:line)`` and, when the failure is inside a helper, adds the
traceback: one line per frame with the code of that line (issue 25).

Integers: Starlark's built-ins take 32-bit integers; the engine's own wording for a
larger one (``Error unpacking value for parameter `a1` of type `int``) becomes a
message naming the built-in and the range.
"""

from __future__ import annotations

import io
import re
import tokenize
from functools import lru_cache
from typing import NamedTuple

MAX_CALLSTACK = 64
I32 = "-2147483648 to 2147483647"
# ``[ \t]*``, not ``\s*``, after ``^``: a message of many blank lines (``fail(" \n" * n)``)
# made each line start rescan the rest (quadratic); now each scans its own line only.
_FRAME = re.compile(
    r"^[ \t]*\* (?P<file>.+?):(?P<line>\d+), in (?P<fn>\S+)\n(?P<code>[^\n]*)", re.M
)
_SPAN = re.compile(r"^[ \t]*--> (?P<file>.+?):(?P<line>\d+):(?P<col>\d+)", re.M)
_ERROR_LINE = re.compile(r"^error: (?P<msg>.*?)(?=^[ \t]*-->|\Z)", re.M | re.S)
_PY_PREFIX = re.compile(r"^(?:BuiltinError|JailError|ValueError|TypeError): ")
_UNPACK = re.compile(r"Error unpacking value for parameter `(?P<param>\w+)` of type `[^`]*\bint\b")
_TOO_BIG = re.compile(r"Integer value is too big to fit in i32: (?P<n>-?\d+)")
_CALLEE = re.compile(r"(?:.*?\.)?(?P<name>[A-Za-z_]\w*)\s*\(", re.S)
_DEF = re.compile(r"^(?P<indent>\s*)def (?P<name>\w+)\s*\(")


# Functions harness compiles around a script (runtime/reach.py, runtime/when.py,
# runtime/crossing.py): not the author's frames.
_OWN = ("harness_", "__harness")


class Frame(NamedTuple):
    file: str
    line: int
    fn: str
    code: str


def script_error_message(text: str, source: str | None = None, first_line: int = 1) -> str:
    """``message (at file:line)`` of a starlark error text, plus the traceback when the
    failure is below the entry function. ``source`` (whose first line is
    ``first_line`` of the file) names the innermost function when the text does not."""
    m = _ERROR_LINE.search(text)
    msg = m.group("msg").strip() if m else text.strip().splitlines()[-1]
    msg = _PY_PREFIX.sub("", msg.removeprefix("fail: "))
    if "too deep" in msg.lower() or "stack overflow" in msg.lower():
        msg = f"recursion too deep (more than {MAX_CALLSTACK} frames): {msg}"
    frames = _frames(text, source, first_line)
    msg = _integer_message(msg, text)
    if not frames:
        return msg
    last = frames[-1]
    out = f"{msg} (at {last.file}:{last.line})"
    if len(frames) < 2 or len(frames) > MAX_CALLSTACK // 2:
        return out
    lines = [out, "Traceback (most recent call last):"]
    for f in frames:
        lines.append(f"  {f.file}:{f.line}, in {f.fn}")
        if f.code:
            lines.append(f"    {f.code}")
    return "\n".join(lines)


def _frames(text: str, source: str | None, first_line: int) -> list[Frame]:
    """The script's frames, outermost first (the built-in prelude and wrappers left out)."""
    original = source.split("\n") if source is not None else []

    def code(line: int, shown: str) -> str:
        # The script's own line: the compiled one may carry print/log markers.
        at = line - first_line
        return original[at].strip() if 0 <= at < len(original) else shown.strip()

    frames = [
        Frame(m["file"], int(m["line"]), m["fn"], code(int(m["line"]), m["code"]))
        for m in _FRAME.finditer(text)
        if not m["file"].startswith("<") and not m["fn"].startswith(_OWN)
    ]
    span = _SPAN.search(text)
    if span is not None and not span["file"].startswith("<"):
        where = (span["file"], int(span["line"]))
        if not frames or (frames[-1].file, frames[-1].line) != where:
            shown = code(where[1], _span_code(text, where[1]))
            fn = _enclosing(source, first_line, where[1])
            frames.append(Frame(where[0], where[1], fn, shown))
    return frames


def _span_code(text: str, line: int) -> str:
    m = re.search(rf"^\s*{line} \| (?P<code>.*)$", text, re.M)
    return m["code"].strip() if m else ""


def _enclosing(source: str | None, first_line: int, line: int) -> str:
    """The function around ``line`` of the file, from the script's source."""
    if source is None:
        return "?"
    lines = source.split("\n")
    at = line - first_line
    if not 0 <= at < len(lines):
        return "?"
    indent = len(lines[at]) - len(lines[at].lstrip())
    for text in reversed(lines[:at]):
        m = _DEF.match(text)
        if m and len(m["indent"]) < indent:
            return m["name"]
    return "<module>"


def _integer_message(msg: str, text: str) -> str:
    """Starlark's words for an integer too large for a built-in, said plainly."""
    unpack = _UNPACK.search(msg)
    if unpack is not None:
        param = unpack["param"]
        arg = f"argument {param[1:]}" if re.fullmatch(r"a\d+", param) else f"argument {param}"
        callee = _CALLEE.match(_span_text(text))
        name = f"{callee['name']}()" if callee else "a built-in"
        return f"{name}: {arg} is too large: Starlark built-ins take integers from {I32}"
    big = _TOO_BIG.search(msg)
    if big is not None:
        return (
            f"integer {big['n']} is too large here: indexes, slices and repetition "
            f"counts must be from {I32}"
        )
    return msg


def _span_text(text: str) -> str:
    """The source text the carets of the error point at ("" if not found)."""
    span = _SPAN.search(text)
    if span is None:
        return ""
    m = re.search(rf"^\s*{span['line']} \| (?P<code>.*)\n\s*\| (?P<carets>\s*\^+)", text, re.M)
    if m is None:
        return ""
    start = len(m["carets"]) - len(m["carets"].lstrip())
    width = len(m["carets"].strip())
    return m["code"][start : start + width]


AT = "__harness_at"  # bound per compiled module: records the file line of the next record
_LOGGERS = ("print", "harness_log")
_LOG_LEVELS = ("info", "warn", "error")
_MAYBE = re.compile(r"\b(?:print|harness_log|log)\b")


@lru_cache(maxsize=1024)
def mark_log_calls(source: str) -> str:
    """``source`` (lines numbered as in its file) with every ``print(``, ``log(`` (already
    renamed ``harness_log(``) and ``log.info/warn/error(`` call marked with its line:
    ``(__harness_at(N) or print)(...)``. ``__harness_at`` returns None, so the call is
    the same; the record it makes carries ``at: file:N`` (``harness call -v``)."""
    if _MAYBE.search(source) is None:
        return source
    try:
        toks = [
            t
            for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.NEWLINE)
            and t.type not in (tokenize.INDENT, tokenize.DEDENT)
        ]
    except (tokenize.TokenError, SyntaxError, IndentationError, ValueError):
        return source
    edits: list[tuple[int, int, int, str]] = []
    for i, tok in enumerate(toks):
        if tok.type != tokenize.NAME or (i and toks[i - 1].string == "."):
            continue
        nxt = [t.string for t in toks[i + 1 : i + 4]]
        called = tok.string in _LOGGERS and nxt[:1] == ["("]
        level = tok.string == "log" and len(nxt) == 3 and nxt[0] == "." and nxt[2] == "("
        if called or (level and nxt[1] in _LOG_LEVELS):
            (row, col), (_, end) = tok.start, tok.end
            edits.append((row - 1, col, end, f"({AT}({row}) or {tok.string})"))
    if not edits:
        return source
    lines = source.split("\n")
    for row, col, end, new in reversed(edits):
        lines[row] = lines[row][:col] + new + lines[row][end:]
    return "\n".join(lines)
