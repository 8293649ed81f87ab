"""Second attack review: a sandboxed command must not choose which host directories
the next command sees. The automatic workspace-virtualenv mount reads ``pyvenv.cfg``
and the ``.venv/bin/python`` links, which any command can write: it binds only a real
Python installation, never an arbitrary host directory named there."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest

from harness.config import Config
from harness.runtime import sandbox
from harness.runtime.builtins.proc import run
from harness.runtime.context import CallContext

_bwrap, _flags, _why = sandbox.status()
# bubblewrap is a dependency: tests/conftest.py fails the run when it is unusable.
pytestmark = [pytest.mark.usefixtures("start_mode")]


def make_ctx(ws: Path) -> CallContext:
    config = Config(root=ws, workspace=ws)
    config = dataclasses.replace(config, exec=dataclasses.replace(config.exec, sandbox="required"))
    return CallContext(config=config, log=lambda *a: None)


@pytest.fixture
def host(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "harness.md").write_text("---\n---\n")
    data = tmp_path / "hostdata"  # a host directory that is not a toolchain
    (data / "bin").mkdir(parents=True)
    (data / "secret.txt").write_text("host secret\n")
    return ws, data


def test_a_command_cannot_expose_a_host_directory_through_pyvenv_cfg(
    host: tuple[Path, Path],
) -> None:
    ws, data = host
    assert not run(make_ctx(ws), "cat", [str(data / "secret.txt")])["ok"]
    planted = run(
        make_ctx(ws),
        "sh",
        ["-c", f"mkdir -p .venv && printf 'home = %s\\n' '{data}/bin' > .venv/pyvenv.cfg"],
    )
    assert planted["ok"], planted["stderr"]
    r = run(make_ctx(ws), "cat", [str(data / "secret.txt")])
    assert not r["ok"] and "host secret" not in r["stdout"]


def test_a_command_cannot_expose_a_host_directory_through_a_venv_link(
    host: tuple[Path, Path],
) -> None:
    ws, data = host
    planted = run(
        make_ctx(ws),
        "sh",
        [
            "-c",
            "mkdir -p .venv/bin && touch .venv/pyvenv.cfg"
            f" && ln -s '{data}/bin/python3' .venv/bin/python3",
        ],
    )
    assert planted["ok"], planted["stderr"]
    r = run(make_ctx(ws), "cat", [str(data / "secret.txt")])
    assert not r["ok"] and "host secret" not in r["stdout"]


def test_a_real_python_install_named_by_the_venv_is_still_bound(
    host: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, _data = host
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    prefix = os.path.dirname(os.path.dirname(base))
    (ws / ".venv").mkdir()
    (ws / ".venv" / "pyvenv.cfg").write_text(f"home = {os.path.dirname(base)}\n")
    got = sandbox.toolchains(str(ws), ())
    assert any(prefix == g or prefix.startswith(g + "/") for g in got) or any(
        prefix.startswith(r + "/") or prefix == r for r in sandbox.system_roots()
    )


def test_a_directory_with_an_interpreter_but_no_python_install_is_not_bound(tmp_path: Path) -> None:
    """``~/.local`` gets ``bin/python3.12`` from uv or pipx, and its ``share`` may hold
    keyrings: a command that links ``.venv/bin/python3`` there must not have the next
    command see it. Only a real install (``lib/python3.N/os.py``) is bound."""
    ws = tmp_path / "ws"
    (ws / ".venv" / "bin").mkdir(parents=True)
    local = tmp_path / "home" / ".local"
    (local / "bin").mkdir(parents=True)
    (local / "share" / "keyrings").mkdir(parents=True)
    (local / "share" / "keyrings" / "login.keyring").write_text("secret\n")
    (local / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    exe = local / "bin" / "python3.12"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (ws / ".venv" / "bin" / "python3").symlink_to(exe)
    (ws / ".venv" / "pyvenv.cfg").write_text(f"home = {local / 'bin'}\n")
    got = sandbox.toolchains(str(ws), ())
    assert not any(str(local) == g or str(local).startswith(g + "/") for g in got), got
    assert str(local / "bin") in got  # the link farm alone, so the chain resolves
    # The same layout with a standard library is a Python install, and is bound.
    (local / "lib" / "python3.12" / "os.py").write_text("")
    (ws / ".venv" / "pyvenv.cfg").write_text(f"home = {local / 'bin'}\n\n")
    assert str(local) in sandbox.toolchains(str(ws), ())
