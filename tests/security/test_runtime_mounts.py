"""Issue 22 item 2: a planted ``pyvenv.cfg`` never chooses a host mount.

``.venv/pyvenv.cfg`` in the workspace is written by sandboxed commands and servers.
The exec.run path stopped trusting its ``home`` line in the second review; the
upstream-server path (``upstream/launch.runtime_paths``) still mounted whatever
``home``/``executable`` named: a server appending ``executable = /etc/shadow`` got
the host's ``/etc`` on its next start. One function now decides runtime mounts for
both (``runtime/mounts.py``); tests/test_architecture.py keeps every other module
from reading ``pyvenv.cfg``. Real venvs, real bubblewrap, real processes.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import harness
from harness.config import Config
from harness.runtime import sandbox
from harness.runtime.builtins.proc import run
from harness.runtime.context import CallContext

_bwrap, _flags, _why = sandbox.status()
pytestmark = pytest.mark.skipif(_flags is None, reason=f"bubblewrap unusable here: {_why}")
BASE_PYTHON = os.path.realpath(sys.executable)


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """(workspace with a real .venv whose pyvenv.cfg names a host secret, the secret)."""
    secret_dir = tmp_path / "hostsecret"
    secret_dir.mkdir()
    secret = secret_dir / "id_ed25519"
    secret.write_text("HOST-PRIVATE-KEY\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "harness.md").write_text("---\n---\n")
    subprocess.run(
        [BASE_PYTHON, "-m", "venv", "--without-pip", str(ws / ".venv")], check=True, timeout=120
    )
    with open(ws / ".venv" / "pyvenv.cfg", "a") as f:  # what a sandboxed server appends
        f.write(f"executable = {secret}\nhome = {secret_dir}\n")
    return ws, secret


PROBE = """
import sys
try:
    print(open(sys.argv[1]).read(), end="")
except OSError as exc:
    print("DENIED", exc.__class__.__name__)
"""


def test_exec_run_does_not_mount_what_pyvenv_cfg_names(planted: tuple[Path, Path]) -> None:
    ws, secret = planted
    (ws / "probe.py").write_text(PROBE)
    config = Config(root=ws, workspace=ws)
    config = dataclasses.replace(config, exec=dataclasses.replace(config.exec, sandbox="required"))
    r = run(
        CallContext(config=config, log=lambda *a: None),
        ".venv/bin/python",
        ["probe.py", str(secret)],
    )
    assert "HOST-PRIVATE-KEY" not in r["stdout"], r
    assert r["ok"] and r["stdout"].startswith("DENIED"), r  # the venv itself still runs


def test_upstream_server_does_not_mount_what_pyvenv_cfg_names(planted: tuple[Path, Path]) -> None:
    ws, secret = planted
    # The secret's path is in the script, not the declared arguments (a file named
    # there is mounted on purpose: the operator declared it).
    (ws / "probe.py").write_text(
        f"try:\n    data = open({str(secret)!r}).read()\n    open('leak', 'w').write(data)\n"
        "except OSError:\n    pass\nopen('done', 'w').close()\n"
    )
    servers = ws / ".harness" / "servers"
    servers.mkdir(parents=True)
    (servers / "x.md").write_text(
        f"---\ncommand: [{ws}/.venv/bin/python, probe.py]\nloading: eager\n---\nProbe.\n"
    )
    h = harness.load(ws)  # starts the eager server: the probe runs, then exits
    try:
        deadline = time.monotonic() + 60
        while not (ws / "done").exists():
            assert time.monotonic() < deadline, "the server never ran"
            time.sleep(0.05)
    finally:
        h.close()
    assert not (ws / "leak").exists(), "the host secret was mounted for the server"


def test_executable_etc_shadow_mounts_nothing(tmp_path: Path) -> None:
    # The review's line: "executable = /etc/shadow" (the sandbox's /etc is a copy of
    # an allow-list, never the host's; as root, uid 0 in the sandbox could read it).
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "harness.md").write_text("---\n---\n")
    subprocess.run(
        [BASE_PYTHON, "-m", "venv", "--without-pip", str(ws / ".venv")], check=True, timeout=120
    )
    with open(ws / ".venv" / "pyvenv.cfg", "a") as f:
        f.write("executable = /etc/shadow\n")
    (ws / "probe.py").write_text(
        "try:\n    data = open('/etc/shadow').read()\n    open('leak', 'w').write(data)\n"
        "except OSError:\n    pass\nopen('done', 'w').close()\n"
    )
    servers = ws / ".harness" / "servers"
    servers.mkdir(parents=True)
    (servers / "x.md").write_text(
        f"---\ncommand: [{ws}/.venv/bin/python, probe.py]\nloading: eager\n---\nProbe.\n"
    )
    h = harness.load(ws)
    try:
        deadline = time.monotonic() + 60
        while not (ws / "done").exists():
            assert time.monotonic() < deadline, "the server never ran"
            time.sleep(0.05)
    finally:
        h.close()
    assert not (ws / "leak").exists(), "the host /etc was mounted for the server"
    from harness.upstream.launch import runtime_paths

    mounts = runtime_paths(str(ws / ".venv" / "bin" / "python"), [], str(ws), "/root")
    assert not [m for m in mounts if m == "/etc" or m.startswith("/etc/")], mounts


# ---------------------------------------------------------------- every path


PKG = Path(harness.__file__).resolve().parent
BIND_FLAGS = {"--bind", "--ro-bind", "--dev-bind", "--bind-try", "--ro-bind-try", "--dev-bind-try"}
# Where bubblewrap bind arguments may be written, and why. A new place must be added
# here on purpose, saying where its host paths come from.
BINDS_ALLOWED = {
    ("runtime/sandbox.py", "proc_guards"): "host /proc entries, fixed names",
    ("runtime/sandbox.py", "_system_binds"): "the system directories and the /etc copy",
    ("runtime/sandbox.py", "build_argv"): "workspace, protected paths, masks, toolchains()",
    ("upstream/launch.py", "_sandboxed"): "runtime_paths() only",
    ("upstream/egress.py", "bwrap_args"): "the egress proxy's own socket folder",
    ("runtime/prewarm.py", "<module>"): "parsing a prefix (verify), binds nothing",
    ("runtime/prewarm.py", "verify"): "parsing a prefix, binds nothing",
}


def _functions(tree: ast.AST) -> dict[ast.AST, str]:
    """Every node -> the name of the innermost function holding it (<module>)."""
    owner: dict[ast.AST, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else name
            )
            owner[child] = inner
            visit(child, inner)

    visit(tree, "<module>")
    return owner


def _calls(tree: ast.AST, function: str) -> set[str]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            return {
                c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", "")
                for c in ast.walk(node)
                if isinstance(c, ast.Call)
            }
    raise AssertionError(f"no function {function}")


def test_only_runtime_mounts_reads_pyvenv_cfg_and_binds_come_from_known_places() -> None:
    readers, binds = [], []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        tree = ast.parse(path.read_text(), rel)
        owner = _functions(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if "pyvenv" in node.value and rel != "runtime/mounts.py":
                    readers.append(f"{rel}:{node.lineno}")
                if node.value in BIND_FLAGS and (rel, owner.get(node, "<module>")) not in (
                    BINDS_ALLOWED
                ):
                    binds.append(f"{rel}:{node.lineno} in {owner.get(node)}")
            elif isinstance(node, (ast.Name, ast.Attribute)):
                name = node.id if isinstance(node, ast.Name) else node.attr
                if name == "VENV_CFG" and rel != "runtime/mounts.py":
                    readers.append(f"{rel}:{node.lineno}")
    assert readers == [], f"pyvenv.cfg read outside runtime/mounts.py: {readers}"
    assert binds == [], f"bind arguments built outside the known places: {binds}"
    # Both sandboxed paths take their runtime mounts from the one function.
    sandbox_tree = ast.parse((PKG / "runtime" / "sandbox.py").read_text())
    launch_tree = ast.parse((PKG / "upstream" / "launch.py").read_text())
    assert "runtime_mounts" in _calls(sandbox_tree, "toolchains")
    assert "toolchains" in _calls(sandbox_tree, "plan")
    assert "runtime_mounts" in _calls(launch_tree, "runtime_paths")
    assert "runtime_paths" in _calls(launch_tree, "_sandboxed")


# ---------------------------------------------------------------- as a normal user

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from test_sandbox_host_state import (  # noqa: E402
    _accessible,
    _copy_importable,
    _interpreter,
    normal_user,  # noqa: F401 - the fixture
)

USER_DRIVER = """
import json, os, subprocess, sys
from harness.runtime import sandbox
from harness.upstream.launch import runtime_paths
base, python = sys.argv[1], sys.argv[2]
home = os.path.join(base, "home")
os.makedirs(os.path.join(home, ".ssh"))
open(os.path.join(home, ".ssh", "id_ed25519"), "w").write("KEY")
os.makedirs(os.path.join(home, "secrets"))
open(os.path.join(home, "secrets", "token"), "w").write("TOKEN")
ws = os.path.join(base, "ws")
subprocess.run([python, "-m", "venv", "--without-pip", os.path.join(ws, ".venv")], check=True)
with open(os.path.join(ws, ".venv", "pyvenv.cfg"), "a") as f:
    f.write("executable = %s\\nhome = %s\\n" % (os.path.join(home, ".ssh", "id_ed25519"),
                                            os.path.join(home, "secrets")))
print(json.dumps({
    "server": runtime_paths(os.path.join(ws, ".venv", "bin", "python"), [], ws, home),
    "exec": list(sandbox.toolchains(ws, ())),
}))
"""


def test_as_a_normal_user_pyvenv_cfg_names_no_mount(normal_user: Any) -> None:  # noqa: F811
    import shutil
    import tempfile

    uid, gid = normal_user.pw_uid, normal_user.pw_gid
    paths = [str(Path(harness.__file__).resolve().parents[1])]
    paths += [p for p in sys.path if p.endswith("site-packages")]
    base = tempfile.mkdtemp(prefix="hx-venv-")
    try:
        os.chmod(base, 0o755)
        if not all(_accessible(p, uid) for p in paths):
            paths = [_copy_importable(paths, Path(base) / "lib")]
        work = Path(base) / "work"
        (work / "ws").mkdir(parents=True)
        subprocess.run(["chown", "-R", f"{uid}:{gid}", str(work)], check=True)
        python = _interpreter(uid)
        driver = f"import sys\nsys.path[:0] = {paths!r}\n" + USER_DRIVER
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work / "home"), "TMPDIR": base}
        cmd = [python, "-c", driver, str(work), python]
        if os.geteuid() == 0:
            cmd = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout)
        for path in out["server"] + out["exec"]:
            assert ".ssh" not in path and "secrets" not in path, out
    finally:
        shutil.rmtree(base, ignore_errors=True)
