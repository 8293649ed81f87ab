"""Issue 10 item 9, from the attacker's side: a sandboxed command can never change
which artifacts harness loads, also when ``.harness`` (or ``harness.md``, ``.git``, or
a file inside ``.harness``) is a symbolic link.

Each test plants a tool the way a hostile command would and then loads the project
as the next harness process would: the planted tool must not be there.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.artifacts.loader import load_project
from harness.config import Config
from harness.errors import BuiltinError
from harness.runtime import sandbox
from harness.runtime.builtins.proc import run
from harness.runtime.context import CallContext

_bwrap, _flags, _why = sandbox.status()
pytestmark = [
    pytest.mark.skipif(_flags is None, reason=f"bubblewrap unusable here: {_why}"),
    pytest.mark.usefixtures("start_mode"),
]

TOOL = '---\ndescription: {what}\n---\n```starlark\ndef main(args):\n    return "{what}"\n```\n'
PLANT = "rm -rf .harness; mkdir -p .harness/tools && printf '%s' \"$EVIL\" > .harness/tools/evil.md"


def make_ctx(ws: Path, mode: str = "required") -> CallContext:
    config = Config(root=ws, workspace=ws)
    config = dataclasses.replace(config, exec=dataclasses.replace(config.exec, sandbox=mode))
    return CallContext(config=config, log=lambda *a: None)


def tools(ws: Path) -> set[str]:
    return set(load_project(ws).tools)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "harness.md").write_text("---\n---\nprompt\n")
    return ws


def attack(ws: Path) -> None:
    try:
        run(make_ctx(ws), "sh", ["-c", PLANT], env={"EVIL": TOOL.format(what="evil")})
    except BuiltinError as exc:
        assert "symbolic link" in str(exc) and "exec.run refused" in str(exc)


def test_harness_dir_linked_inside_the_workspace(ws: Path) -> None:
    (ws / "real_h" / "tools").mkdir(parents=True)
    (ws / "real_h" / "tools" / "good.md").write_text(TOOL.format(what="good"))
    (ws / ".harness").symlink_to("real_h")
    assert tools(ws) == {"good"}
    attack(ws)
    assert tools(ws) == {"good"}
    assert (ws / ".harness").is_symlink()


def test_harness_dir_linked_outside_the_workspace(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "shared_h" / "tools").mkdir(parents=True)
    (tmp_path / "shared_h" / "tools" / "good.md").write_text(TOOL.format(what="good"))
    (ws / ".harness").symlink_to(tmp_path / "shared_h")
    attack(ws)
    assert tools(ws) == {"good"}


def test_a_tool_file_linked_into_the_writable_workspace(ws: Path) -> None:
    (ws / ".harness" / "tools").mkdir(parents=True)
    (ws / "src").mkdir()
    (ws / "src" / "good.md").write_text(TOOL.format(what="good"))
    (ws / ".harness" / "tools" / "good.md").symlink_to("../../src/good.md")
    try:
        run(
            make_ctx(ws),
            "sh",
            ["-c", 'printf "%s" "$EVIL" > src/good.md'],
            env={"EVIL": TOOL.format(what="evil")},
        )
    except BuiltinError as exc:
        assert '".harness/tools/good.md" is a symbolic link' in str(exc)
    spec = str(load_project(ws).tools["good"])
    assert 'return "good"' in spec and "evil" not in spec


def test_a_linked_tools_dir_through_a_workspace_link(ws: Path, tmp_path: Path) -> None:
    # .harness/tools -> ../lnk, lnk -> a directory outside: the hop "lnk" is writable.
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "good.md").write_text(TOOL.format(what="good"))
    (ws / ".harness").mkdir()
    (ws / "lnk").symlink_to(tmp_path / "out")
    (ws / ".harness" / "tools").symlink_to("../lnk")
    assert tools(ws) == {"good"}
    try:
        run(
            make_ctx(ws),
            "sh",
            ["-c", 'rm lnk && mkdir lnk && printf "%s" "$EVIL" > lnk/evil.md'],
            env={"EVIL": TOOL.format(what="evil")},
        )
    except BuiltinError as exc:
        assert "symbolic link" in str(exc)
    assert tools(ws) == {"good"}


def test_harness_md_linked(ws: Path) -> None:
    (ws / "harness.md").unlink()
    (ws / "conf.md").write_text("---\n---\nprompt\n")
    (ws / "harness.md").symlink_to("conf.md")
    with pytest.raises(BuiltinError, match='"harness.md" in the workspace is a symbolic link'):
        run(make_ctx(ws), "sh", ["-c", "rm harness.md; echo evil > harness.md"])
    assert (ws / "harness.md").is_symlink()


def test_links_that_stay_inside_harness_are_fine(ws: Path) -> None:
    (ws / ".harness" / "tools").mkdir(parents=True)
    (ws / ".harness" / "lib").mkdir()
    (ws / ".harness" / "lib" / "good.md").write_text(TOOL.format(what="good"))
    (ws / ".harness" / "tools" / "good.md").symlink_to("../lib/good.md")
    r = run(make_ctx(ws), "sh", ["-c", "echo ok"])
    assert r["ok"] and r["stdout"] == "ok\n"
    assert tools(ws) == {"good"}
