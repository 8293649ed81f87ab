"""``exec.run``: signature, return shape, timeouts, output caps, argument checks.

Real processes; the sandboxed cases use real bubblewrap, the rest run both ways.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.config import Config
from harness.errors import BuiltinError, JailError
from harness.runtime import sandbox
from harness.runtime.builtins.proc import FUNCTIONS, run, utf8_cut
from harness.runtime.context import CallContext

_bwrap, _flags, _why = sandbox.status()
MODES = [
    pytest.param("required", marks=pytest.mark.skipif(_flags is None, reason=str(_why))),
    "off",
]
PY = "/usr/bin/python3"
pytestmark = pytest.mark.usefixtures("start_mode")
KEYS = {"ok", "exit_code", "stdout", "stderr", "duration_ms", "timed_out", "truncated"}


def make_ctx(
    ws: Path,
    mode: str = "required",
    max_output: int | None = None,
    deadline: float | None = None,
    capture: int | None = None,
) -> CallContext:
    config = Config(root=ws, workspace=ws)
    config = dataclasses.replace(config, exec=dataclasses.replace(config.exec, sandbox=mode))
    if capture is not None:
        config = dataclasses.replace(
            config, exec=dataclasses.replace(config.exec, max_capture_bytes=capture)
        )
    if max_output is not None:
        config = dataclasses.replace(
            config, limits=dataclasses.replace(config.limits, max_output_bytes=max_output)
        )
    return CallContext(config=config, deadline=deadline)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / ".harness").mkdir()
    (ws / ".git").mkdir()
    (ws / "harness.md").write_text("---\n---\n")
    return ws


@pytest.fixture(params=MODES)
def ctx(request: pytest.FixtureRequest, ws: Path) -> CallContext:
    return make_ctx(ws, request.param)


def test_registered_under_dotted_name() -> None:
    from harness.runtime.builtins import proc

    assert FUNCTIONS == {"exec.run": proc.run}


def test_success_shape(ctx: CallContext) -> None:
    r = run(ctx, "echo", ["hello", "world"])
    assert set(r) == KEYS
    assert r["ok"] is True and r["exit_code"] == 0 and r["stdout"] == "hello world\n"
    assert r["stderr"] == "" and r["timed_out"] is False and r["truncated"] is False
    assert isinstance(r["duration_ms"], int) and r["duration_ms"] >= 0


def test_nonzero_exit_is_a_result(ctx: CallContext) -> None:
    r = run(ctx, "sh", ["-c", "echo out; echo err >&2; exit 3"])
    assert r["ok"] is False and r["exit_code"] == 3
    assert r["stdout"] == "out\n" and r["stderr"] == "err\n"


def test_argv_is_not_shell_interpreted(ctx: CallContext, ws: Path) -> None:
    r = run(ctx, "echo", ["$HOME", "; touch pwned", "`id`", "*"])
    assert r["stdout"] == "$HOME ; touch pwned `id` *\n"
    assert not (ws / "pwned").exists()


def test_shell_when_cmd_is_one(ctx: CallContext) -> None:
    assert run(ctx, "sh", ["-c", "echo $((6*7))"])["stdout"] == "42\n"


def test_unknown_program_is_a_127_result(ctx: CallContext) -> None:
    r = run(ctx, "no-such-program-xyz")
    assert r["ok"] is False and r["exit_code"] == 127 and r["timed_out"] is False
    assert 'program "no-such-program-xyz" not found' in r["stderr"]


def test_non_executable_file_is_not_found(ctx: CallContext, ws: Path) -> None:
    (ws / "data.txt").write_text("x")
    r = run(ctx, "./data.txt")
    assert r["exit_code"] == 127


def test_stdin(ctx: CallContext) -> None:
    assert run(ctx, "cat", stdin="hello\n")["stdout"] == "hello\n"
    big = "x" * (1 << 20)
    r = run(ctx, "wc", ["-c"], stdin=big)
    assert r["ok"] and r["stdout"].strip() == str(1 << 20)


def test_stdin_closed_early_by_program(ctx: CallContext) -> None:
    r = run(ctx, "head", ["-c", "3"], stdin="y" * (1 << 21))
    assert r["ok"] and r["stdout"] == "yyy"


def test_no_stdin_is_empty(ctx: CallContext) -> None:
    assert run(ctx, "cat")["stdout"] == ""


def test_env_overrides(ctx: CallContext) -> None:
    r = run(ctx, "sh", ["-c", 'echo "$FOO-$LANG"'], env={"FOO": "bar", "LANG": "C"})
    assert r["stdout"] == "bar-C\n"


def test_dir_inside_workspace(ctx: CallContext, ws: Path) -> None:
    assert run(ctx, "pwd", dir="sub")["stdout"] == f"{ws / 'sub'}\n"
    assert run(ctx, "pwd", dir=str(ws / "sub"))["stdout"] == f"{ws / 'sub'}\n"
    assert run(ctx, "pwd")["stdout"] == f"{ws}\n"


@pytest.mark.parametrize("bad", ["..", "../..", "/", "/etc", "sub/../..", "/tmp"])
def test_dir_outside_workspace_is_refused(ctx: CallContext, bad: str) -> None:
    with pytest.raises(JailError, match=f'path "{bad}" is outside the workspace'):
        run(ctx, "pwd", dir=bad)


def test_dir_next_to_workspace_is_refused(ctx: CallContext, ws: Path) -> None:
    evil = ws.parent / (ws.name + "-evil")
    evil.mkdir()
    with pytest.raises(JailError, match="outside the workspace"):
        run(ctx, "pwd", dir=str(evil))


def test_dir_symlink_leaving_workspace_is_refused(
    ctx: CallContext, ws: Path, tmp_path: Path
) -> None:
    (ws / "out").symlink_to(tmp_path)
    (ws / "in").symlink_to(ws / "sub")
    with pytest.raises(JailError, match='path "out" is outside the workspace'):
        run(ctx, "pwd", dir="out")
    assert run(ctx, "pwd", dir="in")["stdout"] == f"{ws / 'sub'}\n"


def test_dir_in_hidden_protected_path_is_refused(ctx: CallContext) -> None:
    with pytest.raises(JailError, match='path ".harness" is protected'):
        run(ctx, "ls", dir=".harness")


def test_dir_must_exist(ctx: CallContext) -> None:
    with pytest.raises(BuiltinError, match='dir "nope" is not a directory'):
        run(ctx, "pwd", dir="nope")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"cmd": 5}, "cmd must be a string, got int"),
        ({"cmd": ""}, "cmd is empty"),
        ({"cmd": "echo\x00x"}, "cmd contains a NUL byte"),
        ({"cmd": "echo", "args": "hi"}, "args must be a list of strings, got str"),
        ({"cmd": "echo", "args": ["a", 1]}, r"args\[1\] must be a string, got int"),
        ({"cmd": "echo", "timeout_ms": "10"}, "timeout_ms must be a positive number"),
        ({"cmd": "echo", "timeout_ms": True}, "timeout_ms must be a positive number"),
        ({"cmd": "echo", "timeout_ms": 0}, "timeout_ms must be a positive number"),
        ({"cmd": "echo", "dir": None}, "dir must be a string, got NoneType"),
        ({"cmd": "cat", "stdin": 5}, "stdin must be a string or None, got int"),
        ({"cmd": "echo", "env": ["A=1"]}, "env must be a dict of strings, got list"),
        ({"cmd": "echo", "env": {"A": 1}}, r'env\["A"\] must be a string, got int'),
        ({"cmd": "echo", "env": {"A=B": "1"}}, 'env name "A=B" is not a valid variable name'),
    ],
)
def test_bad_arguments(ws: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(BuiltinError, match=message):
        run(make_ctx(ws, "off"), **kwargs)


# ---------------------------------------------------------------- timeouts


def _alive(marker: str) -> list[int]:
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            continue
    return pids


def _wait_gone(marker: str) -> list[int]:
    end = time.monotonic() + 5
    while _alive(marker) and time.monotonic() < end:
        time.sleep(0.05)
    return _alive(marker)


def test_timeout_kills_the_process_group(ctx: CallContext) -> None:
    marker = f"7{uuid.uuid4().int % 10**6}.5"  # a unique sleep duration to find them by
    script = f"(sleep {marker} &); sleep {marker}; echo never"
    r = run(ctx, "sh", ["-c", script], timeout_ms=300)
    assert r["timed_out"] is True and r["ok"] is False and "never" not in r["stdout"]
    assert r["exit_code"] != 0
    assert _wait_gone(marker) == []  # child and grandchild both gone


def test_output_before_timeout_is_kept(ctx: CallContext) -> None:
    r = run(ctx, "sh", ["-c", "echo started; sleep 30"], timeout_ms=300)
    assert r["timed_out"] and r["stdout"] == "started\n"


def test_background_process_does_not_outlive_the_call(ctx: CallContext) -> None:
    marker = f"8{uuid.uuid4().int % 10**6}.5"
    r = run(ctx, "sh", ["-c", f"sleep {marker} > /dev/null 2>&1 & echo done"])
    assert r["ok"] and r["stdout"] == "done\n" and r["timed_out"] is False
    assert _wait_gone(marker) == []


def test_background_holding_stdout_does_not_hang(ctx: CallContext) -> None:
    marker = f"9{uuid.uuid4().int % 10**6}.5"
    r = run(ctx, "sh", ["-c", f"sleep {marker} & echo done"], timeout_ms=20000)
    assert r["ok"] and r["timed_out"] is False and r["stdout"] == "done\n"
    assert _wait_gone(marker) == []


def test_closed_output_still_waits_for_exit(ctx: CallContext, ws: Path) -> None:
    r = run(ctx, "sh", ["-c", "exec >&- 2>&-; sleep 0.2; echo x > after.txt"])
    assert r["ok"] and (ws / "after.txt").read_text() == "x\n"


def test_timeout_clamped_to_call_deadline(ws: Path) -> None:
    for mode in ("off", *(["required"] if _flags else [])):
        ctx = make_ctx(ws, mode, deadline=time.monotonic() + 0.3)
        r = run(ctx, "sleep", ["30"], timeout_ms=30000)
        assert r["timed_out"] is True


# ---------------------------------------------------------------- output caps
# exec.run keeps up to exec.max_capture_bytes of each stream (limits.max_output_bytes
# is the model-facing cap the pipeline applies; tests/runtime/test_exec_capture.py).


def test_output_cap_utf8_safe(ws: Path) -> None:
    for mode in ("off", *(["required"] if _flags else [])):
        ctx = make_ctx(ws, mode, capture=1001)
        code = "import sys; sys.stdout.write('é' * 100000); sys.stderr.write('ü' * 100000)"
        r = run(ctx, PY, ["-c", code])
        assert r["ok"] and r["truncated"] is True
        assert r["stdout"] == "é" * 500 and r["stderr"] == "ü" * 500


def test_output_at_exact_cap_is_not_truncated(ws: Path) -> None:
    r = run(make_ctx(ws, "off", capture=6), "printf", ["abcdef"])
    assert r["stdout"] == "abcdef" and r["truncated"] is False
    r = run(make_ctx(ws, "off", capture=6), "printf", ["abcdefg"])
    assert r["stdout"] == "abcdef" and r["truncated"] is True


def test_huge_output_does_not_eat_memory(ctx: CallContext) -> None:
    ctx.config = dataclasses.replace(
        ctx.config, exec=dataclasses.replace(ctx.config.exec, max_capture_bytes=1000)
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    r = run(ctx, "head", ["-c", str(300 << 20), "/dev/zero"])  # 300 MiB
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert r["ok"] and r["truncated"] and len(r["stdout"]) == 1000
    assert after - before < 100 * 1024


def test_invalid_utf8_is_replaced(ctx: CallContext) -> None:
    r = run(ctx, "printf", ["a\\377b"])
    assert r["stdout"] == "a\ufffdb"


def test_utf8_cut() -> None:
    s = "aé€😀".encode()  # 1 + 2 + 3 + 4 bytes
    assert [utf8_cut(s, n).decode() for n in range(11)] == [
        "",
        "a",
        "a",
        "aé",
        "aé",
        "aé",
        "aé€",
        "aé€",
        "aé€",
        "aé€",
        "aé€😀",
    ]


def test_dir_sensitive_is_refused(ctx: CallContext, ws: Path) -> None:
    (ws / ".ssh").mkdir()
    with pytest.raises(JailError, match='path ".ssh" is a protected sensitive file'):
        run(ctx, "ls", dir=".ssh")


def test_dir_nul_byte_refused(ctx: CallContext) -> None:
    with pytest.raises(BuiltinError, match="NUL"):
        run(ctx, "ls", dir="sub\x00")


# ---------------------------------------------------------------- clean-up (security review)


def test_cleanup_never_follows_a_planted_parent_link(
    ctx: CallContext, ws: Path, tmp_path: Path
) -> None:
    # The clean-up runs outside the sandbox (as root here): a link planted in the parent
    # chain of an absent protected path must not make harness delete its target.
    victim = tmp_path / "victim"
    (victim / "data").mkdir(parents=True)
    (victim / "data" / "important.txt").write_text("KEEP\n")
    ctx.config = dataclasses.replace(
        ctx.config,
        fs=dataclasses.replace(
            ctx.config.fs, protected=(*ctx.config.fs.protected, "gen/data", "x/.harness")
        ),
    )
    r = run(ctx, "ln", ["-s", str(victim), "gen"])
    assert (victim / "data" / "important.txt").read_text() == "KEEP\n"
    assert not r["ok"] and not os.path.lexists(ws / "gen")
    r = run(ctx, "sh", ["-c", "mkdir x && ln -s ../.harness x/.harness"])
    assert not r["ok"] and not os.path.lexists(ws / "x" / ".harness")
    assert (ws / ".harness").is_dir()  # the link was unlinked, its target kept
