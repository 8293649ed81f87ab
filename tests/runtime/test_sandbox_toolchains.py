"""Issue 14 item 1: a project's toolchain in the sandbox (exec.mounts, workspace
virtualenvs whose interpreter lives outside the workspace, and errors that say what
to mount). Runs cold and prepared (start_mode), with real bubblewrap and pytest."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.config import Config, parse_config
from harness.runtime import sandbox
from harness.runtime.builtins.proc import run
from harness.runtime.context import CallContext

_bwrap, _flags, _why = sandbox.status()
pytestmark = [
    pytest.mark.skipif(_flags is None, reason=f"bubblewrap unusable here: {_why}"),
    pytest.mark.usefixtures("start_mode"),
]
BASE_PYTHON = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
# pytest and what it imports (py, pygments: only where this pytest version has them).
PYTEST_PARTS = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py", "pygments")


def make_ctx(ws: Path, **exec_kw: Any) -> CallContext:
    config = Config(root=ws, workspace=ws)
    config = dataclasses.replace(
        config, exec=dataclasses.replace(config.exec, **{"sandbox": "required", **exec_kw})
    )
    return CallContext(config=config, log=lambda *a: None)


def make_venv(ws: Path, toolchain: Path) -> Path:
    """A workspace .venv whose interpreter is a symlink out of the workspace: to
    ``toolchain/bin/python3``, itself a link to this machine's real Python (a pyenv
    install here, /usr in CI), with pytest installed into the venv (copied from the
    running interpreter: no network, a fraction of a second)."""
    (toolchain / "bin").mkdir(parents=True)
    (toolchain / "bin" / "python3").symlink_to(BASE_PYTHON)
    subprocess.run(
        [str(toolchain / "bin" / "python3"), "-m", "venv", "--without-pip", str(ws / ".venv")],
        check=True,
        capture_output=True,
    )
    site = next((ws / ".venv" / "lib").glob("python3*")) / "site-packages"
    for name in PYTEST_PARTS:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            assert name in ("py", "pygments"), f"{name} is not installed"
            continue
        origin = Path(spec.origin)
        if origin.name == "__init__.py":
            shutil.copytree(
                origin.parent, site / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(origin, site / origin.name)
    return ws / ".venv" / "bin" / "python"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "harness.md").write_text("---\n---\n")
    return ws


def test_pytest_runs_from_a_workspace_venv_whose_interpreter_is_outside(
    ws: Path, tmp_path: Path
) -> None:
    python = make_venv(ws, tmp_path / "toolchain")
    assert not os.path.realpath(python).startswith(str(ws))
    (ws / "test_project.py").write_text(
        "import os, sys\n\n"
        "def test_in_the_sandbox():\n"
        "    status = open('/proc/self/status').read()\n"
        "    assert 'Seccomp:\\t2' in status and os.environ['HOME'] == '/tmp'\n"
        "    assert sys.prefix.endswith('.venv')\n"
    )
    r = run(make_ctx(ws), ".venv/bin/python", ["-m", "pytest", "-q", "-p", "no:cacheprovider"])
    assert r["ok"], r["stdout"] + r["stderr"]
    assert "1 passed" in r["stdout"]
    # The interpreter's install is read-only in the sandbox.
    r = run(make_ctx(ws), "sh", ["-c", f"touch {tmp_path}/toolchain/bin/x"])
    assert not r["ok"] and "Read-only file system" in r["stderr"]


def test_a_program_outside_the_sandbox_names_the_mount_to_add(ws: Path, tmp_path: Path) -> None:
    tools = tmp_path / "opt" / "toolchains" / "bin"
    tools.mkdir(parents=True)
    (tools / "mytool").write_text("#!/bin/sh\necho tool ran\n")
    (tools / "mytool").chmod(0o755)
    r = run(make_ctx(ws), str(tools / "mytool"))
    assert not r["ok"] and r["exit_code"] == 127
    assert "not visible in the sandbox" in r["stderr"]
    assert f'add "{tmp_path / "opt" / "toolchains"}" to exec.mounts' in r["stderr"]
    # By PATH, too.
    r = run(make_ctx(ws), "mytool", env={"PATH": f"{tools}:/usr/bin"})
    assert "not visible in the sandbox" in r["stderr"] and "exec.mounts" in r["stderr"]
    # With the mount: it runs, read-only.
    ctx = make_ctx(ws, mounts=(str(tmp_path / "opt" / "toolchains"),))
    r = run(ctx, str(tools / "mytool"))
    assert r["ok"] and r["stdout"] == "tool ran\n", r
    r = run(ctx, "sh", ["-c", f"echo x > {tools}/mytool"])
    assert not r["ok"] and (tools / "mytool").read_text().endswith("echo tool ran\n")


def test_a_workspace_script_whose_interpreter_is_invisible(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere" / "bin").mkdir(parents=True)
    interp = tmp_path / "elsewhere" / "bin" / "sh"
    interp.symlink_to("/bin/sh")
    (ws / "build.sh").write_text(f"#!{interp}\necho built\n")
    (ws / "build.sh").chmod(0o755)
    r = run(make_ctx(ws), "./build.sh")
    assert r["exit_code"] == 127
    assert "script whose interpreter is" in r["stderr"] and "exec.mounts" in r["stderr"]
    assert str(tmp_path / "elsewhere") in r["stderr"]
    r = run(make_ctx(ws, mounts=(str(tmp_path / "elsewhere"),)), "./build.sh")
    assert r["ok"] and r["stdout"] == "built\n", r


def test_a_refused_mount_given_in_python_is_refused_at_run_time(ws: Path) -> None:
    from harness.errors import BuiltinError

    with pytest.raises(BuiltinError, match="home directory"):
        run(make_ctx(ws, mounts=("~",)), "true")


# ---------------------------------------------------------------- harness.md


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("~", "home directory"),
        ("/", "never shows"),
        ("/home", "never shows"),
        ("/proc/sys", "never shows"),
        ("/sys", "never shows"),
        ("/dev", "never shows"),
        ("/etc", "never shows"),
        ("relative/dir", "absolute path"),
        ("~/.ssh", "secret store"),
    ],
)
def test_config_refuses_sensitive_mounts(
    tmp_path: Path, entry: str, why: str, start_mode: str
) -> None:
    config, problems = parse_config({"exec": {"mounts": [entry, "/opt/toolchains"]}}, tmp_path)
    assert config.exec.mounts == ("/opt/toolchains",)
    assert len(problems) == 1 and why in problems[0].message, problems
    assert f'exec.mounts entry "{entry}"' in problems[0].message


def test_config_refuses_a_mount_overlapping_the_workspace(tmp_path: Path, start_mode: str) -> None:
    (tmp_path / "sub").mkdir()
    for entry in (str(tmp_path / "sub"), str(tmp_path.parent)):
        config, problems = parse_config({"exec": {"mounts": [entry]}}, tmp_path)
        assert config.exec.mounts == () and "overlaps the workspace" in problems[0].message


def test_config_refuses_a_directory_holding_secrets(tmp_path: Path, start_mode: str) -> None:
    (tmp_path / "cfg" / ".aws").mkdir(parents=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    config, problems = parse_config({"exec": {"mounts": [str(tmp_path / "cfg")]}}, ws)
    assert config.exec.mounts == () and '".aws"' in problems[0].message


# ---------------------------------------------------------------- as getting-started.md says

RUN_TESTS_TOOL = """---
annotations: {title: Run the tests, read_only: true}
script: |
  def run(args):
      r = exec.run(".venv/bin/python", ["-m", "pytest", "-q", "-p", "no:cacheprovider"],
                   timeout_ms=300000)
      return r["stdout"][-4000:] + r["stderr"][-2000:]
---
Run the project's test suite and return pytest's summary.
"""


def test_a_project_built_as_getting_started_says_runs_its_tests(
    tmp_path: Path, start_mode: str
) -> None:
    import harness

    ws = tmp_path / "project"
    ws.mkdir()
    init = subprocess.run(
        [sys.executable, "-c", "from harness.cli.main import main; main()", "init"],
        cwd=ws,
        capture_output=True,
        text=True,
    )
    assert init.returncode == 0, init.stderr
    make_venv(ws, tmp_path / "toolchain")
    (ws / "tests").mkdir()
    (ws / "tests" / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    (ws / ".harness" / "tools" / "run_tests.md").write_text(RUN_TESTS_TOOL)
    h = harness.load(ws)
    try:
        r = h.call("run_tests", {})
    finally:
        h.close()
    assert not r.is_error, r.error
    assert "1 passed" in r.text, r.text


def test_an_env_shebang_whose_program_is_invisible(ws: Path, tmp_path: Path) -> None:
    # node_modules/.bin/x: "#!/usr/bin/env node" with node in ~/.nvm or /opt.
    nodedir = tmp_path / "nvm" / "versions" / "v20" / "bin"
    nodedir.mkdir(parents=True)
    (nodedir / "mynode").write_text('#!/bin/sh\necho node ran "$@"\n')
    (nodedir / "mynode").chmod(0o755)
    (ws / "node_modules" / ".bin").mkdir(parents=True)
    (ws / "node_modules" / "pkg").mkdir()
    (ws / "node_modules" / "pkg" / "cli.js").write_text("#!/usr/bin/env mynode\n")
    (ws / "node_modules" / "pkg" / "cli.js").chmod(0o755)
    (ws / "node_modules" / ".bin" / "cli").symlink_to("../pkg/cli.js")
    env = {"PATH": f"{nodedir}:/usr/bin:/bin"}
    r = run(make_ctx(ws), "node_modules/.bin/cli", env=env)
    assert r["exit_code"] == 127 and "script whose interpreter is" in r["stderr"], r
    assert f'add "{tmp_path / "nvm" / "versions" / "v20"}" to exec.mounts' in r["stderr"]
    r = run(
        make_ctx(ws, mounts=(str(tmp_path / "nvm" / "versions" / "v20"),)),
        "node_modules/.bin/cli",
        env=env,
    )
    assert r["ok"] and r["stdout"].startswith("node ran "), r


def test_validate_reports_a_refused_mount_at_its_line(tmp_path: Path, start_mode: str) -> None:
    import harness
    import harness.errors

    (tmp_path / "harness.md").write_text(
        '---\nexec:\n  sandbox: required\n  mounts:\n    - "~"\n    - /opt/toolchains\n---\nhi\n'
    )
    problems = harness.check(tmp_path)
    assert [(p.path, p.line, p.severity) for p in problems] == [("harness.md", 4, "error")]
    assert 'exec.mounts entry "~" is the home directory' in problems[0].message
    with pytest.raises(harness.errors.LoadError, match='exec.mounts entry "~"'):
        harness.load(tmp_path)  # a harness with a refused mount does not start


def test_a_venv_whose_toolchain_directory_is_a_symbolic_link(ws: Path, tmp_path: Path) -> None:
    # /opt/py -> /data/py style: the venv names the link, the files live at the target.
    real = tmp_path / "data" / "tc"
    make_venv(ws, real)
    (tmp_path / "opt").mkdir()
    (tmp_path / "opt" / "tc").symlink_to(real)
    (ws / ".venv" / "bin" / "python").unlink()
    (ws / ".venv" / "bin" / "python").symlink_to(tmp_path / "opt" / "tc" / "bin" / "python3")
    cfg = ws / ".venv" / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace(str(real), str(tmp_path / "opt" / "tc")))
    (ws / "test_a.py").write_text("def test_a():\n    pass\n")
    r = run(make_ctx(ws), ".venv/bin/python", ["-m", "pytest", "-q", "-p", "no:cacheprovider"])
    assert r["ok"] and "1 passed" in r["stdout"], r["stdout"] + r["stderr"]


def test_the_message_reveals_no_host_file_that_is_not_a_program(ws: Path, tmp_path: Path) -> None:
    secret = tmp_path / "private" / "notes.txt"  # exists on the host, not executable
    secret.parent.mkdir()
    secret.write_text("x\n")
    (ws / "probe.sh").write_text(f"#!{secret}\n")
    (ws / "probe.sh").chmod(0o755)
    r = run(make_ctx(ws), "./probe.sh")
    assert not r["ok"] and "not visible" not in r["stderr"] and "exec.mounts" not in r["stderr"]
    r = run(make_ctx(ws), str(secret))
    assert "not found in the sandbox" in r["stderr"] and "not visible" not in r["stderr"]
