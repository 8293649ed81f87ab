"""Every fenced code block of README.md and docs/*.md runs (issue 21): one test per block.

The collector (tests/docs/docblocks.py) and the runners (tests/docs/docrun.py) are
described in tests/docs/README.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from docblocks import Block, DocError, doc_files, read_blocks
from docrun import run_block


def _pages() -> dict[str, list[Block]]:
    return {p.name: read_blocks(p) for p in doc_files()}


PAGES = _pages()
BLOCKS = [b for blocks in PAGES.values() for b in blocks]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_block(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `harness` on PATH for blocks that start it as a program (an MCP client's server).
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    run_block(block, PAGES[Path(block.path).name], tmp_path)


def test_every_page_has_blocks_and_every_block_a_language_or_marker() -> None:
    assert len(BLOCKS) > 50
    bare = [b.id for b in BLOCKS if not b.lang and not b.directive]
    assert not bare, f"blocks without a language or a doc-test marker: {bare}"


def test_a_skip_without_a_reason_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- doc-test: skip -->\n```bash\nrm -rf /\n```\n")
    with pytest.raises(DocError, match="needs a reason"):
        read_blocks(page, tmp_path)


def test_a_marker_not_above_a_fence_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- doc-test: skip — x -->\nSome text.\n```bash\nls\n```\n")
    with pytest.raises(DocError, match="not followed by a fence"):
        read_blocks(page, tmp_path)


def test_an_unknown_directive_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- doc-test: skipp — typo -->\n```bash\nls\n```\n")
    with pytest.raises(DocError, match="unknown doc-test directive 'skipp'"):
        read_blocks(page, tmp_path)
