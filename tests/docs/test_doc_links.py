"""Relative links between the docs lead somewhere: the file exists and, for a
`page.md#anchor` link, the page has a heading with that anchor (GitHub's rule: lower
case, punctuation dropped, spaces to hyphens, `-1`, `-2` for repeats)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docblocks import ROOT, doc_files

LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCED = re.compile(r"^ *(```|~~~).*?^ *\1", re.S | re.M)


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.*)$", FENCED.sub("", page.read_text("utf-8")), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        name, n = slug, 0
        while name in found:
            n += 1
            name = f"{slug}-{n}"
        found.add(name)
    return found


def dead_links(page: Path) -> list[str]:
    out = []
    for target in LINK.findall(FENCED.sub("", page.read_text("utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            out.append(f"{page.name}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{page.name}: {target}: no heading with that anchor")
    return out


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_lead_somewhere(path: Path) -> None:
    assert dead_links(path) == []


def test_a_dead_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Toolchains (`exec.mounts`)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[a](other.md#toolchains-execmounts) [b](other.md#nope) [c](gone.md) "
        "[d](https://example.com/x.md)\n"
    )
    assert dead_links(page) == [
        "page.md: other.md#nope: no heading with that anchor",
        "page.md: gone.md: no such file",
    ]
