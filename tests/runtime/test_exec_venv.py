"""The project's interpreter (issue 25): a project virtualenv (``.venv``/``venv`` in
the workspace, or ``exec.venv`` in harness.md) is first on the PATH of commands, and a
program found only in harness's own virtualenv is reported as such, never with advice
to mount harness's own venv. Real processes, real bubblewrap.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
from pathlib import Path

import pytest

import harness
from harness.config import Config
from harness.runtime import sandbox
from harness.runtime.builtins.proc import run
from harness.runtime.context import CallContext

_bwrap, _flags, _why = sandbox.status()
MODES = [
    pytest.param("required", marks=pytest.mark.skipif(_flags is None, reason=str(_why))),
    "off",
]


def _ctx(ws: Path, mode: str, venv: str | None = None) -> CallContext:
    config = Config(root=ws, workspace=ws)
    config = dataclasses.replace(
        config, exec=dataclasses.replace(config.exec, sandbox=mode, venv=venv)
    )
    return CallContext(config=config)


def _venv(ws: Path, name: str) -> Path:
    """A minimal virtualenv: pyvenv.cfg and a bin/ with a program of its own."""
    bindir = ws / name / "bin"
    bindir.mkdir(parents=True)
    (ws / name / "pyvenv.cfg").write_text("home = /usr/bin\n")
    prog = bindir / "project-tool"
    prog.write_text("#!/bin/sh\necho from the project venv\n")
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bindir


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", [".venv", "venv"])
def test_workspace_venv_is_first_on_path(tmp_path: Path, mode: str, name: str) -> None:
    bindir = _venv(tmp_path, name)
    ctx = _ctx(tmp_path, mode)
    r = run(ctx, "sh", ["-c", 'echo "$PATH"'])
    assert r["ok"], r
    assert r["stdout"].split(":")[0] == str(bindir)
    r = run(ctx, "project-tool")
    assert r["ok"] and r["stdout"] == "from the project venv\n", r


@pytest.mark.parametrize("mode", MODES)
def test_venv_named_in_harness_md(tmp_path: Path, mode: str) -> None:
    bindir = _venv(tmp_path, "envs/tools")
    r = run(_ctx(tmp_path, mode, venv="envs/tools"), "project-tool")
    assert r["ok"] and r["stdout"] == "from the project venv\n", r
    r = run(_ctx(tmp_path, mode, venv="envs/tools"), "sh", ["-c", 'echo "$PATH"'])
    assert r["stdout"].split(":")[0] == str(bindir)


def test_exec_venv_is_checked_by_validate(tmp_path: Path) -> None:
    (tmp_path / "harness.md").write_text("---\nexec:\n  venv: nowhere\n---\n")
    problems = [p for p in harness.check(tmp_path) if p.severity == "error"]
    assert len(problems) == 1
    p = problems[0]
    assert p.path == "harness.md" and p.line == 3
    assert 'exec.venv "nowhere"' in p.message and "python3 -m venv nowhere" in p.message


@pytest.mark.skipif(_flags is None, reason=str(_why))
@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the suite runs in a virtualenv")
def test_a_program_only_in_harness_own_venv_names_the_project_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = os.path.join(sys.prefix, "bin")
    assert os.access(os.path.join(own, "pytest"), os.X_OK)
    monkeypatch.setenv("PATH", f"{own}:/usr/bin:/bin")
    r = run(_ctx(tmp_path, "required"), "pytest", ["-q"])
    assert r["exit_code"] == 127
    msg = r["stderr"]
    assert "harness's own virtualenv" in msg, msg
    assert "exec.mounts" not in msg and f'"{sys.prefix}' not in msg
    assert ".venv/bin/pip install pytest" in msg
    # With a project venv holding it, the project's copy runs.
    bindir = _venv(tmp_path, ".venv")
    (bindir / "pytest").write_text("#!/bin/sh\necho project pytest\n")
    (bindir / "pytest").chmod(0o755)
    r = run(_ctx(tmp_path, "required"), "pytest", ["-q"])
    assert r["ok"] and r["stdout"] == "project pytest\n", r


@pytest.mark.parametrize("mode", MODES)
def test_allowed_commands_keep_the_operators_path(tmp_path: Path, mode: str) -> None:
    # A workspace directory (writable by commands) never decides what an allowed
    # name runs, nor what the programs it starts find on PATH.
    _venv(tmp_path, ".venv")
    ctx = _ctx(tmp_path, mode)
    ctx.config = dataclasses.replace(
        ctx.config, exec=dataclasses.replace(ctx.config.exec, allowed_commands=("sh",))
    )
    r = run(ctx, "sh", ["-c", 'echo "$PATH"'])
    assert r["ok"] and str(tmp_path / ".venv") not in r["stdout"], r


@pytest.mark.skipif(_flags is None, reason=str(_why))
@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the suite runs in a virtualenv")
def test_a_script_run_by_harness_own_interpreter_names_the_project_venv(tmp_path: Path) -> None:
    script = tmp_path / "tool.py"
    script.write_text(f"#!{sys.executable}\nprint('hi')\n")
    script.chmod(0o755)
    r = run(_ctx(tmp_path, "required"), "./tool.py")
    assert r["exit_code"] == 127
    assert "harness's own virtualenv" in r["stderr"] and "exec.mounts" not in r["stderr"], r
