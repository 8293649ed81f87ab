"""The matcher behind ``fs.edit`` (private: no built-ins here, see :mod:`.fs`).

:func:`apply_edit` replaces the one occurrence of ``old`` in a file's text, trying four
levels from strictest to loosest (``exact``, ``line_endings``, ``trimmed``,
``indentation``); the first level with any match decides, and more than one match
there is an error asking for more context. Line breaks in ``new`` follow the file's
dominant line ending.
"""

from __future__ import annotations

import bisect
import re

from harness.errors import BuiltinError

__all__ = ["STRATEGIES", "apply_edit"]

_EOL = re.compile(r"\r\n|\r|\n")  # fixed pattern: stdlib re is safe here
STRATEGIES = ("exact", "line_endings", "trimmed", "indentation")


def _eol_style(text: str) -> str | None:
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    cr = text.count("\r") - crlf
    if not crlf + lf + cr:
        return None
    return max((crlf, "\r\n"), (lf, "\n"), (cr, "\r"))[1]


def _find(haystack: str, needle: str) -> list[int]:
    """Start offsets of ``needle``, overlapping ones included, at most two."""
    hits: list[int] = []
    at = haystack.find(needle)
    while at >= 0 and len(hits) < 2:
        hits.append(at)
        at = haystack.find(needle, at + 1)
    return hits


def _ambiguous(path: str, norm: str, hits: list[int], strategy: str) -> BuiltinError:
    lines = " and ".join(str(norm.count("\n", 0, h) + 1) for h in hits)
    return BuiltinError(
        f'fs.edit: old text matches more than one place in "{path}" ({strategy} match, '
        f"lines {lines}, maybe more); include more surrounding lines in old so that it "
        "matches exactly one place"
    )


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _strip_blank(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def apply_edit(path: str, text: str, old: str, new: str) -> tuple[str, str]:  # noqa: C901
    """Replace the one occurrence of ``old`` (four levels, strictest first; the first
    level with any match decides). Line endings of the file are kept."""
    style = _eol_style(text)

    def styled(s: str) -> str:
        return _EOL.sub(style, s) if style else s

    hits = _find(text, old)
    if len(hits) > 1:
        raise _ambiguous(path, text, hits, "exact")
    if hits:
        return text[: hits[0]] + styled(new) + text[hits[0] + len(old) :], "exact"

    # The file with every line ending as "\n"; extra[k] = CRLFs among the first k ends.
    ends = [(m.start(), m.end() - m.start()) for m in _EOL.finditer(text)]
    norm = _EOL.sub("\n", text)
    npos: list[int] = []
    extra, acc = [0], 0
    for start, length in ends:
        npos.append(start - acc)
        acc += length - 1
        extra.append(acc)

    def orig(p: int) -> int:
        return p + extra[bisect.bisect_left(npos, p)]

    def splice(start: int, end: int, replacement: str) -> str:
        return text[: orig(start)] + styled(replacement) + text[orig(end) :]

    old_n, new_n = _EOL.sub("\n", old), _EOL.sub("\n", new)
    hits = _find(norm, old_n)
    if len(hits) > 1:
        raise _ambiguous(path, norm, hits, "line-ending-normalized")
    if hits:
        return splice(hits[0], hits[0] + len(old_n), new_n), "line_endings"

    core = old_n.strip()
    if core and core != old_n:
        hits = _find(norm, core)
        if len(hits) > 1:
            raise _ambiguous(path, norm, hits, "trimmed")
        if hits:
            lead = old_n[: len(old_n) - len(old_n.lstrip())]
            trail = old_n[len(old_n.rstrip()) :]
            repl = new_n.removeprefix(lead)
            if trail:
                repl = repl.removesuffix(trail)
            return splice(hits[0], hits[0] + len(core), repl), "trimmed"

    want = [line.strip() for line in _strip_blank(old_n.split("\n"))]
    if want:
        lines = norm.split("\n")
        keys = [line.strip() for line in lines]
        k = len(want)
        found = [
            i for i in range(len(lines) - k + 1) if keys[i] == want[0] and keys[i : i + k] == want
        ]
        if len(found) > 1:
            starts = [sum(len(x) + 1 for x in lines[:i]) for i in found[:2]]
            raise _ambiguous(path, norm, starts, "indentation-insensitive")
        if found:
            i = found[0]
            start = sum(len(x) + 1 for x in lines[:i])
            end = start + sum(len(x) + 1 for x in lines[i : i + k]) - 1
            old_base = _indent(_strip_blank(old_n.split("\n"))[0])
            file_base = _indent(lines[i])
            body = []
            for line in _strip_blank(new_n.split("\n")):
                if not line.strip():
                    body.append("")
                elif line.startswith(old_base):
                    body.append(file_base + line[len(old_base) :])
                else:
                    body.append(file_base + line.lstrip())
            if not body and end < len(norm):
                end += 1  # deleting the lines: take their last line ending too
            return splice(start, end, "\n".join(body)), "indentation"

    raise BuiltinError(
        f'fs.edit: old text not found in "{path}" (tried exact, line-ending-normalized, '
        "trimmed and indentation-insensitive matching); read the file again and copy the "
        "text to replace exactly"
    )
