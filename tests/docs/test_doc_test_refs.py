"""The tests the docs cite exist: docs/security.md puts each invariant beside the test
that proves it (`tests/PATH.py::test_name`, then `::other_name` in the same file), and
other pages name test files; a renamed or deleted test must not leave a dead citation.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docblocks import ROOT, doc_files

CITE = re.compile(r"(tests/[\w/.-]+\.py)|::(\w+)\*?|`(test_\w+\.py)`")


# Blocks with these doc-test markers hold a reader's own project files (a
# `tests/test_calc.py` there is theirs), never a citation of this repository's tests.
PROJECT_BLOCK = re.compile(r"<!--\s*doc-test:\s*(setup|file\s|skip)")
FENCE = re.compile(r"^\s*(```|~~~)")


def dead_citations(path: Path) -> list[str]:
    out: list[str] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    fenced = skipping = False
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
            skipping = fenced and number > 1 and bool(PROJECT_BLOCK.match(lines[number - 2]))
            continue
        if skipping:
            continue
        current: Path | None = None
        for m in CITE.finditer(line):
            file, name, bare = m.groups()
            where = f"{path.name}:{number}"
            if file:
                current = ROOT / file
                if not current.is_file():
                    out.append(f"{where}: {file} does not exist")
                    current = None
            elif name and current is not None:
                prefix = m.group(0).endswith("*")
                pattern = rf"def {name}\w*" if prefix else rf"def {name}\b"
                if not re.search(pattern, current.read_text(encoding="utf-8")):
                    out.append(f"{where}: {current.relative_to(ROOT)} has no {name}")
            elif bare and not list((ROOT / "tests").rglob(bare)):
                out.append(f"{where}: no test file {bare}")
    return out


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_cited_test_exists(path: Path) -> None:
    assert dead_citations(path) == []


def test_a_dead_citation_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "| x | `tests/docs/test_doc_test_refs.py::test_every_cited_test_exists`, "
        "`::test_gone` |\n| y | `tests/nowhere.py` and `test_nowhere_at_all.py` |\n"
    )
    assert dead_citations(page) == [
        "page.md:1: tests/docs/test_doc_test_refs.py has no test_gone",
        "page.md:2: tests/nowhere.py does not exist",
        "page.md:2: no test file test_nowhere_at_all.py",
    ]
