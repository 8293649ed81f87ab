"""Markdown tables in README.md and docs/*.md render as one table, with no repeated row.

A blank line inside a table ends it: GitHub renders the rows after it as a paragraph
of pipes. A `|` inside a cell (even in a code span) must be written `\\|`, or the row
gets an extra cell. A row repeated in a table, or a key (a first cell in backticks)
repeated in one table, is a copy left behind (issue 21).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from docblocks import ROOT, doc_files

SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


@dataclass(frozen=True)
class Table:
    line: int  # of the header row
    rows: list[tuple[int, str]]  # (line, text) of every row, header and separator included


def cells(row: str) -> list[str]:
    parts = re.split(r"(?<!\\)\|", row.strip())
    return [c.strip() for c in parts[1:-1]]


def tables(lines: list[str]) -> list[Table]:
    found: list[Table] = []
    in_code = False
    current: list[tuple[int, str]] = []
    for number, line in enumerate([*lines, ""], 1):
        if re.match(r"^\s*(```|~~~)", line):
            in_code = not in_code
        if not in_code and line.startswith("|"):
            current.append((number, line))
            continue
        if current:
            found.append(Table(current[0][0], current))
            current = []
    return found


def problems(path: Path, root: Path = ROOT) -> list[str]:
    rel = path.relative_to(root).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[str] = []
    for table in tables(lines):
        rows = table.rows
        if len(rows) < 2 or not SEPARATOR.match(rows[1][1]):
            out.append(f"{rel}:{table.line}: rows with no header (a table split by a blank line?)")
            continue
        width = len(cells(rows[0][1]))
        seen: dict[str, int] = {}
        keys: dict[str, int] = {}
        for number, row in rows[2:]:
            if len(cells(row)) != width:
                out.append(
                    f"{rel}:{number}: {len(cells(row))} cells, header {width} (escape | as \\|)"
                )
            norm = " ".join(row.split())
            if norm in seen:
                out.append(f"{rel}:{number}: the same row as line {seen[norm]}")
            seen.setdefault(norm, number)
            key = cells(row)[0] if cells(row) else ""
            if key.startswith("`"):
                earlier = keys.setdefault(key, number)
                if earlier != number:
                    out.append(f"{rel}:{number}: {key} already has a row (line {earlier})")
    return out


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_tables_are_whole_and_have_no_repeated_rows(path: Path) -> None:
    assert problems(path) == []


def test_the_check_finds_a_split_table_a_repeated_row_and_a_bare_pipe(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    text = (
        "| key | value |\n|---|---|\n| `a` | 1 |\n| `b` | 2 |\n\n| `c` | 3 |\n\n"
        "| name | meaning |\n|---|---|\n| `x|y` | z |\n| `a` | again |\n| `a` | again |\n\n"
        "| key | value |\n|---|---|\n| `b` | 4 |\n"
    )
    page.write_text(text, encoding="utf-8")
    found = problems(page, tmp_path)
    assert found == [
        "page.md:6: rows with no header (a table split by a blank line?)",
        "page.md:10: 3 cells, header 2 (escape | as \\|)",
        "page.md:12: the same row as line 11",
        "page.md:12: `a` already has a row (line 11)",
    ]
