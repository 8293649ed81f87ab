"""Attack review of issue 22, F5: a sandboxed command plants ``harness.yaml``.

A root ``harness.yaml``/``harness.yml`` without ``harness.md`` is a load error (issue
23), so a command that could create one while it runs would stop the project from
loading for everything that loads meanwhile (a ``serve --watch`` reload, a concurrent
call, ``harness list``). They are protected exactly like ``harness.md``: one list owns
the names (harness/protected.py), the sandbox gives them placeholders, the fs jail
refuses writes to them.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.artifacts.loader import load_project
from harness.config import ALWAYS_PROTECTED, Config
from harness.errors import JailError
from harness.protected import CONFIG_FILES
from harness.runtime import jail, prewarm, sandbox
from harness.runtime.builtins.proc import run
from harness.runtime.context import CallContext

_bwrap, _flags, _why = sandbox.status()
pytestmark = pytest.mark.skipif(_flags is None, reason=f"bubblewrap unusable here: {_why}")

WAIT_FOR_GO = (
    "touch planted; i=0; while [ ! -e go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done"
)


@pytest.fixture(autouse=True)
def _fresh_prepared() -> Any:
    prewarm.discard_all()
    yield
    prewarm.discard_all()


def _ctx(ws: Path) -> CallContext:
    config = Config(root=ws, workspace=ws)
    config = dataclasses.replace(config, exec=dataclasses.replace(config.exec, sandbox="required"))
    return CallContext(config=config, log=lambda *a: None)


@pytest.mark.parametrize("name", ["harness.yaml", "harness.yml"])
def test_a_command_cannot_plant_an_origin_config_file(tmp_path: Path, name: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    out: dict[str, Any] = {}
    plant = f"printf 'tools: []\\n' > {name} && echo PLANTED"

    def go() -> None:
        out["r"] = run(_ctx(ws), "sh", ["-c", f"{plant}; {WAIT_FOR_GO}"], timeout_ms=60000)

    t = threading.Thread(target=go)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while not (ws / "planted").exists():
            assert time.monotonic() < deadline, "the command never ran"
            time.sleep(0.02)
        problems = [p for p in load_project(ws).problems if p.severity == "error"]
    finally:
        (ws / "go").touch()
        t.join(60)
    assert problems == [], f"a load while the command ran failed: {problems}"
    assert "PLANTED" not in out["r"]["stdout"], out["r"]
    assert not (ws / name).is_file()


def test_the_fs_jail_refuses_writing_origin_config_files(tmp_path: Path) -> None:
    j = jail.Jail(tmp_path)
    for name in ("harness.md", "harness.yaml", "harness.yml"):
        with pytest.raises(JailError):
            j.check(name, [name], write=True)


def test_one_list_owns_the_protected_names() -> None:
    assert set(CONFIG_FILES) <= set(ALWAYS_PROTECTED)
    assert set(ALWAYS_PROTECTED) == set(jail.ALWAYS_HIDDEN) | set(jail.ALWAYS_READONLY)
    assert sandbox.ARTIFACT_ENTRIES == ALWAYS_PROTECTED
