"""The documentation speaks about this repository only, and its contract is docs/spec.md.

No path outside the repository (the team's working directories, a SPEC.md kept
elsewhere) in the user and contributor docs; every "spec §N" link and every
"docs/spec.md §N" citation in code names a section docs/spec.md has (issue 21, item 5).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "spec.md"

# What a reader of the repository can see: user docs, the README, the contributor guide
# and the repository's own harness.md (its body is the system prompt of this project).
DOC_FILES = sorted(
    {
        *(ROOT / "docs").rglob("*.md"),
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        ROOT / "harness.md",
    }
)
# Code and data that cite the contract in docstrings, comments and descriptions.
CODE_FILES = sorted(
    p
    for pattern in ("harness/**/*.py", "harness/**/*.json", "tests/**/*.py", "bench/*.py")
    for p in ROOT.glob(pattern)
    if p != Path(__file__).resolve() and "fixtures" not in p.relative_to(ROOT).parts
)

OUTSIDE = re.compile(r"/work/|shared/SPEC")
# An upper-case SPEC as a word: the old, out-of-repository contract ("SPEC §8", "SPEC.md",
# "the SPEC leaves open"). Names such as _SPECS or INSPECTOR are not words "SPEC".
OLD_SPEC = re.compile(r"\bSPEC\b")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
SECTION = re.compile(r"^(\d+(?:\.\d+)?)\.?\s")
LINK_TO_SPEC = re.compile(r"\]\((?:\./)?spec\.md#([^)\s]+)\)")
SPEC_LINK = re.compile(r"\[spec §(\d+(?:\.\d+)?)[^\]]*\]\((?:\./)?spec\.md#([^)\s]+)\)")
SELF_LINK = re.compile(r"\]\(#([^)\s]+)\)")
# "§" is spelled \u00a7 in the JSON schemas and in the Python strings that generate them.
CODE_CITATION = re.compile(r"docs/spec\.md (?:§|\\u00a7)(\d+(?:\.\d+)?)")


def _slug(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces -> '-'."""
    text = re.sub(r"`|\*\*|__", "", title).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _headings(path: Path) -> list[str]:
    out: list[str] = []
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m:
            out.append(m.group(2))
    return out


def _anchors(path: Path) -> dict[str, str]:
    """anchor -> heading title, with GitHub's -1, -2 suffixes for repeated titles."""
    anchors: dict[str, str] = {}
    for title in _headings(path):
        slug = base = _slug(title)
        n = 0
        while slug in anchors:
            n += 1
            slug = f"{base}-{n}"
        anchors[slug] = title
    return anchors


def _sections() -> dict[str, str]:
    """Section number ("8", "8.3") -> its anchor in docs/spec.md."""
    return {
        m.group(1): anchor
        for anchor, title in _anchors(SPEC).items()
        if (m := SECTION.match(title))
    }


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_specification_is_in_the_repository_with_numbered_sections() -> None:
    sections = _sections()
    assert [str(n) for n in range(1, 16)] == [s for s in sections if "." not in s]
    assert {f"8.{n}" for n in range(1, 11)} <= set(sections)


def test_the_team_notes_are_gone() -> None:
    assert not (ROOT / "docs" / "dev").exists()
    assert (ROOT / "CONTRIBUTING.md").is_file()


@pytest.mark.parametrize("path", DOC_FILES, ids=_rel)
def test_docs_name_no_path_outside_the_repository(path: Path) -> None:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        assert not OUTSIDE.search(line), f"{_rel(path)}:{number}: {line.strip()}"


@pytest.mark.parametrize("path", DOC_FILES, ids=_rel)
def test_docs_cite_docs_spec_md_not_the_old_spec(path: Path) -> None:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        assert not OLD_SPEC.search(line), (
            f"{_rel(path)}:{number}: cite the contract as [spec §N](spec.md#ANCHOR): {line.strip()}"
        )


@pytest.mark.parametrize("path", DOC_FILES, ids=_rel)
def test_every_link_into_the_spec_names_a_heading_it_has(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    anchors = _anchors(SPEC)
    sections = _sections()
    links = LINK_TO_SPEC.findall(text) + (SELF_LINK.findall(text) if path == SPEC else [])
    for anchor in links:
        assert anchor in anchors, f"{_rel(path)}: no heading in docs/spec.md for #{anchor}"
    for cited, anchor in SPEC_LINK.findall(text):
        # "spec §8.3" links to 8.3's own heading; "spec §9 step 2" to §9's.
        want = sections.get(cited) or sections.get(cited.split(".")[0])
        assert anchor == want, f"{_rel(path)}: spec §{cited} links to #{anchor}, not #{want}"


def test_links_to_other_docs_from_the_spec_resolve() -> None:
    text = SPEC.read_text(encoding="utf-8")
    for target, anchor in re.findall(r"\]\(([\w-]+\.md)(?:#([^)\s]+))?\)", text):
        page = SPEC.parent / target
        assert page.is_file(), target
        if anchor:
            assert anchor in _anchors(page), f"{target}#{anchor}"


def test_code_cites_sections_the_spec_has() -> None:
    sections = _sections()
    wrong: list[str] = []
    for path in CODE_FILES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            cited = CODE_CITATION.findall(line)
            if OLD_SPEC.search(line) or any(
                c not in sections and c.split(".")[0] not in sections for c in cited
            ):
                wrong.append(f"{_rel(path)}:{number}: {line.strip()}")
    assert not wrong, "cite an existing section as docs/spec.md §N:\n" + "\n".join(wrong)
