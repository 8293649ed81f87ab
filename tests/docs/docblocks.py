"""The doc-test collector's reading half: every fenced code block of README.md and docs/*.md.

A block is found by its fence (three or more backticks or tildes, possibly indented
inside a list item) and named ``FILE:LINE`` by the line of its opening fence. An HTML
comment on the line just before the fence gives the block a directive:

    <!-- doc-test: skip — why this block cannot run here -->
    <!-- doc-test: file .harness/tools/count_lines.md -->
    <!-- doc-test: config -->

``skip`` needs a reason (the collector refuses a bare skip); every other directive is
listed in ``DIRECTIVES`` and explained in tests/docs/README.md. A doc-test comment that
is not directly above a fence, or an unknown directive, is an error of the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(?P<body>.*?)\s*-->\s*$")
# directive -> whether it takes an argument
DIRECTIVES = {
    "skip": False,  # not run; the reason says why
    "file": True,  # the block is the file at PATH of the page's project
    "config": False,  # a harness.md frontmatter (fragment) that must validate cleanly
    "starlark": False,  # a Starlark script (a tool's run(args)) that must validate
    "tree": False,  # paths (first word of each line) that `harness init` writes
    "synopsis": False,  # a `harness COMMAND [...]` usage: every option must exist
    "project": True,  # shell/python run in a copy of tests/docs/projects/NAME (no init)
    "serve": False,  # python run while `harness serve --transport http [ARGS]` serves
    "setup": False,  # python that runs, and runs again in the project of every later block
}
REASON = re.compile(r"\s+(?:—|--|:)\s+|\s*:\s+")


class DocError(Exception):
    """A page's doc-test markup is wrong (an unknown directive, a skip without reason)."""


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository root
    line: int  # 1-based line of the opening fence
    lang: str  # first word of the info string, lower case; "" if none
    text: str  # the content, the fence's indentation removed
    directive: str = ""  # "" when the block has no doc-test comment
    arg: str = ""
    reason: str = ""

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _parse_marker(body: str, where: str) -> tuple[str, str, str]:
    parts = REASON.split(body, maxsplit=1)
    head, reason = parts[0].strip(), (parts[1].strip() if len(parts) > 1 else "")
    name, _, arg = head.partition(" ")
    arg = arg.strip()
    if name not in DIRECTIVES:
        raise DocError(f"{where}: unknown doc-test directive {name!r}; use one of {DIRECTIVES}")
    if name == "skip" and not reason:
        raise DocError(f"{where}: `doc-test: skip` needs a reason: `skip — why`")
    if DIRECTIVES[name] and not arg:
        raise DocError(f"{where}: `doc-test: {name}` needs an argument")
    return name, arg, reason


def read_blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """Every fenced block of one page, in order; DocError for bad doc-test markup."""
    rel = path.relative_to(root).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    pending: tuple[int, str, str, str] | None = None
    while i < len(lines):
        marker = MARKER.match(lines[i])
        if marker:
            if pending:
                raise DocError(f"{rel}:{pending[0]}: doc-test comment not followed by a fence")
            pending = (i + 1, *_parse_marker(marker.group("body"), f"{rel}:{i + 1}"))
            i += 1
            continue
        fence = FENCE.match(lines[i])
        if not fence:
            if pending and lines[i].strip():
                raise DocError(f"{rel}:{pending[0]}: doc-test comment not followed by a fence")
            i += 1
            continue
        indent, mark = len(fence.group("indent")), fence.group("fence")
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not re.match(
            rf"^ *{re.escape(mark[0])}{{{len(mark)},}}\s*$", lines[i]
        ):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        if i == len(lines):
            raise DocError(f"{rel}:{start + 1}: code block never closed")
        info = fence.group("info").strip().split()
        directive, arg, reason = pending[1:] if pending else ("", "", "")
        blocks.append(
            Block(
                rel,
                start + 1,
                info[0].lower() if info else "",
                "\n".join(body) + "\n",
                directive,
                arg,
                reason,
            )
        )
        pending = None
        i += 1
    if pending:
        raise DocError(f"{rel}:{pending[0]}: doc-test comment not followed by a fence")
    return blocks


def all_blocks() -> list[Block]:
    return [b for p in doc_files() for b in read_blocks(p)]
