"""Parameter descriptions from a docstring, in the three common styles (``@h.tool``).

- Google: an ``Args:`` (``Arguments:``, ``Parameters:``, ``Params:``, ``Keyword Args:``,
  ``Attributes:``) section of ``name (type): text`` or ``name: text`` entries;
- NumPy: a ``Parameters`` (or ``Attributes``) heading underlined with dashes, then
  ``name : type`` lines with the text indented below;
- Sphinx: ``:param name: text`` or ``:param type name: text`` fields (``:type name:``
  lines are dropped).

:func:`parse` returns the docstring without those sections (the tool's description)
and the text of each parameter. Continuation lines join with one space.
"""

from __future__ import annotations

import re

_GOOGLE = re.compile(
    r"^(args|arguments|parameters|params|keyword args|keyword arguments|attributes):\s*$",
    re.IGNORECASE,
)
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY = re.compile(r"^(parameters|attributes|other parameters)\s*$", re.IGNORECASE)
_NUMPY_ENTRY = re.compile(r"^\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?::.*)?$")
_SPHINX = re.compile(
    r"^:(param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?([A-Za-z_]\w*)\s*:\s*(.*)$"
)
_SPHINX_TYPE = re.compile(r"^:type\s+[A-Za-z_]\w*\s*:")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def parse(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(description without parameter sections, {name: text})`` of a docstring."""
    if not doc:
        return "", {}
    lines = doc.expandtabs().splitlines()
    kept: list[str] = []
    found: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        text = line.strip()
        if _GOOGLE.match(text):
            i = _google(lines, i + 1, _indent(line), found)
        elif _NUMPY.match(text) and i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}:
            i = _numpy(lines, i + 2, _indent(line), found)
        elif m := _SPHINX.match(text):
            i = _sphinx(lines, i, m.group(2), m.group(3), found)
        elif _SPHINX_TYPE.match(text):
            i = _continued(lines, i + 1, _indent(line))[1]
        else:
            kept.append(line)
            i += 1
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return description, found


def _continued(lines: list[str], i: int, indent: int) -> tuple[list[str], int]:
    """The lines from ``i`` indented deeper than ``indent`` (blank lines inside kept)."""
    out: list[str] = []
    while i < len(lines):
        line = lines[i]
        if line.strip() and _indent(line) <= indent:
            break
        out.append(line.strip())
        i += 1
    while out and not out[-1]:
        out.pop()
    return out, i


def _join(parts: list[str]) -> str:
    return " ".join(p for p in parts if p).strip()


def _google(lines: list[str], i: int, indent: int, found: dict[str, str]) -> int:
    _body, end = _continued(lines, i, indent)
    entry_indent: int | None = None
    name: str | None = None
    parts: list[str] = []
    for raw in lines[i:end]:
        if not raw.strip():
            continue
        level = _indent(raw)
        if entry_indent is None:
            entry_indent = level
        m = _GOOGLE_ENTRY.match(raw.strip()) if level == entry_indent else None
        if m:
            if name:
                found.setdefault(name, _join(parts))
            name, parts = m.group(1), [m.group(2)]
        elif name:
            parts.append(raw.strip())
    if name:
        found.setdefault(name, _join(parts))
    return end


def _numpy(lines: list[str], i: int, indent: int, found: dict[str, str]) -> int:
    while i < len(lines):
        line = lines[i]
        text = line.strip()
        if not text:
            # A blank line ends the section when what follows is not indented more
            # than the heading and is not another entry.
            nxt = next((x for x in lines[i + 1 :] if x.strip()), None)
            if nxt is None or (_indent(nxt) <= indent and not _is_entry(lines, i + 1)):
                return i
            i += 1
            continue
        if _indent(line) < indent or (
            _indent(line) == indent and i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}
        ):
            return i
        m = _NUMPY_ENTRY.match(text)
        if m is None or _indent(line) != indent:
            return i
        body, i = _continued(lines, i + 1, indent)
        found.setdefault(m.group(1), _join(body))
    return i


def _is_entry(lines: list[str], i: int) -> bool:
    """Whether the next non-blank line from ``i`` is a NumPy entry with text below it."""
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i + 1 >= len(lines):
        return False
    this, below = lines[i], lines[i + 1]
    return bool(
        _NUMPY_ENTRY.match(this.strip())
        and below.strip()
        and _indent(below) > _indent(this)
        and set(below.strip()) != {"-"}
    )


def _sphinx(lines: list[str], i: int, name: str, first: str, found: dict[str, str]) -> int:
    body, end = _continued(lines, i + 1, _indent(lines[i]))
    found.setdefault(name, _join([first, *body]))
    return end
