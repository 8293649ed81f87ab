"""Attack review of issue 22, F4: the ignore-rule bound, reached through many files.

The per-file bounds (256 KiB, 1,000 rules) held, but the cache of compiled rules held
at most 10,000 rules and was emptied whole when full: 20 folders each with a 990-rule
``.gitignore`` recompiled everything on every search, and 200 folders took 33 s per
search. Now the cache evicts the least recently used entries and holds one search's
whole budget, and the rules of all ignore files one search reads are bounded
(``MAX_RULES_PER_SEARCH``): past it the search is an error result naming the limit and
``include_ignored=True``. Measured in compiles, not time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config import Config
from harness.errors import BuiltinError
from harness.runtime import jail as jail_mod
from harness.runtime.builtins import _search, fs
from harness.runtime.context import CallContext


def make_tree(root: Path, folders: int, rules: int = 990) -> None:
    """/tmp/att/gi/mk.py: ``folders`` folders, each a ``rules``-rule .gitignore + a hit."""
    for d in range(folders):
        p = root / f"d{d}"
        p.mkdir()
        (p / ".gitignore").write_text("".join(f"*x{d}_{j}*y\n" for j in range(rules)))
        (p / "file.txt").write_text("needle\n")


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # An empty cache: what earlier tests compiled must not count here.
    monkeypatch.setattr(_search, "_SPECS", OrderedDict())
    monkeypatch.setattr(_search, "_CACHED_RULES", [0])
    ws = tmp_path / "ws"
    ws.mkdir()
    yield ws
    jail_mod.clear_jails()


def test_twenty_big_ignore_files_compile_once(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_tree(ws, 20)
    ctx = CallContext(config=Config(root=ws, workspace=ws))
    counted: list[int] = []
    real = _search._compile_spec

    def counting(lines: list[str]) -> object:
        counted.append(len(lines))
        return real(lines)

    monkeypatch.setattr(_search, "_compile_spec", counting)
    first = fs.grep(ctx, "needle")
    assert len(first) == 20, first
    assert len(counted) == 20
    counted.clear()
    second = fs.grep(ctx, "needle")
    assert second == first
    assert counted == [], f"the second search compiled {len(counted)} ignore files again"
    glob = fs.glob(ctx, "**/*.txt")
    assert len(glob) == 20 and counted == []


def test_two_hundred_big_ignore_files_are_a_clear_error(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(ws, 200)
    ctx = CallContext(config=Config(root=ws, workspace=ws))
    counted: list[int] = []
    real = _search._compile_spec

    def counting(lines: list[str]) -> object:
        counted.append(len(lines))
        return real(lines)

    monkeypatch.setattr(_search, "_compile_spec", counting)
    for search in (lambda: fs.grep(ctx, "needle"), lambda: fs.glob(ctx, "**/*.txt")):
        with pytest.raises(BuiltinError) as err:
            search()
        message = str(err.value)
        assert "20,000 rules per search" in message and "include_ignored=True" in message
        assert ".gitignore" in message
    # The work done before the refusal is bounded by the budget: ~20 files, not 200.
    assert len(counted) <= 21, len(counted)
    ok = fs.grep(ctx, "needle", include_ignored=True, max_matches=1000)
    assert len(ok) == 200
