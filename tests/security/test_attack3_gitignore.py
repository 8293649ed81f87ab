"""Issue 22 item 13: a huge ``.gitignore`` must not cost seconds on every search.

A 1 MiB ``.gitignore`` cost 6–10 s of CPU per file on every search (files over 64 KiB
were never cached, and a rule set too large for RE2 was retried line by line, then
dropped: every rule silently lost); six made one ``fs.grep`` take 45 s. Now an ignore
file over ``MAX_GITIGNORE_BYTES`` or ``MAX_GITIGNORE_RULES`` is a clear error result
naming the file and the limit (``include_ignored=True`` searches without the rules),
rules that cannot be compiled together are an error too (never silently none), and
compiled rules are cached by content whatever the file's size.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.config import Config
from harness.errors import BuiltinError
from harness.runtime import jail as jail_mod
from harness.runtime.builtins import _search, fs
from harness.runtime.context import CallContext

fs_list = fs.FUNCTIONS["fs.list"]


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "sub").mkdir()
    (ws / "sub" / "a.txt").write_text("hit\n")
    (ws / "b.txt").write_text("hit\n")
    yield ws
    jail_mod.clear_jails()


@pytest.fixture
def ctx(ws: Path) -> CallContext:
    return CallContext(config=Config(root=ws, workspace=ws))


def rules(count: int) -> str:
    return "".join(f"build{i}/**/*.tmp{i}\n" for i in range(count))


def searches(ctx: CallContext) -> list[tuple[str, Any]]:
    return [
        ("fs.grep", lambda: fs.grep(ctx, "hit")),
        ("fs.glob", lambda: fs.glob(ctx, "**/*.txt")),
        ("fs.list", lambda: fs_list(ctx, "sub", include_ignored=False)),
    ]


def test_a_one_mib_gitignore_is_a_clear_error_naming_the_file_and_the_limit(
    ctx: CallContext, ws: Path
) -> None:
    data = rules(60_000)[: 1 << 20]
    (ws / "sub" / ".gitignore").write_text(data)
    for name, search in searches(ctx):
        with pytest.raises(BuiltinError) as caught:
            search()
        message = str(caught.value)
        assert message.startswith(f"{name}: "), message
        assert '"sub/.gitignore"' in message, message
        assert f"{_search.MAX_GITIGNORE_BYTES:,} bytes" in message, message
        assert "include_ignored=True" in message, message
    # Without the rules, the same search runs.
    assert [m["path"] for m in fs.grep(ctx, "hit", include_ignored=True)] == [
        "b.txt",
        "sub/a.txt",
    ]


def test_more_rules_than_the_limit_is_a_clear_error(ctx: CallContext, ws: Path) -> None:
    data = rules(_search.MAX_GITIGNORE_RULES + 1)
    assert len(data) < _search.MAX_GITIGNORE_BYTES
    (ws / ".gitignore").write_text(data)
    with pytest.raises(BuiltinError) as caught:
        fs.grep(ctx, "hit")
    message = str(caught.value)
    assert '".gitignore"' in message and f"{_search.MAX_GITIGNORE_RULES:,} rules" in message
    assert f"{_search.MAX_GITIGNORE_RULES + 1:,}" in message, message


def test_git_info_exclude_has_the_same_limits(ctx: CallContext, ws: Path) -> None:
    (ws / ".git" / "info").mkdir(parents=True)
    (ws / ".git" / "info" / "exclude").write_text(rules(_search.MAX_GITIGNORE_RULES + 1))
    with pytest.raises(BuiltinError, match=r'"\.git/info/exclude"'):
        fs.glob(ctx, "*.txt")


def test_rules_that_cannot_be_compiled_together_are_an_error_not_silently_dropped(
    ctx: CallContext, ws: Path
) -> None:
    """Each rule is valid alone; together they exceed RE2's memory budget. Rules were
    dropped silently (every file searched as if there were no .gitignore)."""
    stars = "*".join("abcdefghijklmnop")
    lines = [f"**/{stars}{i}" for i in range(_search.MAX_GITIGNORE_RULES - 1)] + ["*.txt"]
    (ws / ".gitignore").write_text("\n".join(lines) + "\n")
    with pytest.raises(BuiltinError) as caught:
        fs.grep(ctx, "hit")
    assert '".gitignore"' in str(caught.value) and "split" in str(caught.value), caught.value


def test_a_large_gitignore_is_compiled_once(
    ctx: CallContext, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files over 64 KiB were compiled again by every search."""
    compiled: list[int] = []
    real = _search._compile_spec

    def counting(lines: list[str]) -> Any:
        compiled.append(len(lines))
        return real(lines)

    monkeypatch.setattr(_search, "_compile_spec", counting)
    comments = "".join(f"# {i}: generated, kept for the record {'.' * 40}\n" for i in range(1200))
    data = comments + rules(_search.MAX_GITIGNORE_RULES - 2) + "*.txt\n!b.txt\n"
    assert 64 << 10 < len(data) <= _search.MAX_GITIGNORE_BYTES
    (ws / ".gitignore").write_text(data)
    for _ in range(3):
        assert [m["path"] for m in fs.grep(ctx, "hit")] == ["b.txt"]
    assert len(compiled) == 1, compiled
    # A change is seen by the next search (the cache is keyed by the content).
    (ws / ".gitignore").write_text(data.replace("!b.txt", "!sub/a.txt"))
    assert [m["path"] for m in fs.grep(ctx, "hit")] == ["sub/a.txt"]
    assert len(compiled) == 2, compiled
