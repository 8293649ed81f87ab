"""Prepared sandboxes (runtime/prewarm.py), from the attacker's side and the user's.

The whole sandbox suite already runs through prepared sandboxes (start_mode in
conftest.py). Here: what happens *between* the preparing and the use: the workspace
changes under a prepared sandbox, the environment changes, the sandbox dies; and
the one line that carries the command must carry every byte exactly.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prewarm_support import prepared_sandboxes_work

import harness
from harness.config import Config
from harness.runtime import prewarm, sandbox
from harness.runtime.builtins.proc import run
from harness.runtime.context import CallContext

_bwrap, _flags, _why = sandbox.status()
_unusable = prepared_sandboxes_work()
pytestmark = [
    pytest.mark.skipif(_flags is None, reason=f"bubblewrap unusable here: {_why}"),
    pytest.mark.skipif(_unusable is not None, reason=str(_unusable)),
]


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    ws = tmp_path / "ws"
    (ws / ".harness").mkdir(parents=True)
    (ws / ".git").mkdir()
    (ws / "sub").mkdir()
    (ws / "harness.md").write_text("---\n---\n")
    prewarm.discard_all()
    yield ws
    prewarm.discard_all()


def make_ctx(ws: Path, **exec_kw: Any) -> CallContext:
    config = Config(root=ws, workspace=ws)
    config = dataclasses.replace(
        config, exec=dataclasses.replace(config.exec, **{"sandbox": "required", **exec_kw})
    )
    return CallContext(config=config)


class Starts:
    """Counts prepared sandboxes handed a command, and those refused at the check."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.warm = self.refused = 0
        real = prewarm.start

        def start(p: prewarm.Prepared, prefix: Any, line: bytes, *rest: Any) -> bool:
            ok = real(p, prefix, line, *rest)
            if ok:
                self.warm += 1
            else:
                self.refused += 1
            return ok

        monkeypatch.setattr(prewarm, "start", start)


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> Starts:
    return Starts(monkeypatch)


def prime(ctx: CallContext) -> None:
    """Run one command so that a sandbox is prepared for this plan, and wait until it
    is set up (what a test changes afterwards happens *after* its mounts)."""
    from harness.runtime.wire import readable

    assert run(ctx, "true")["ok"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with prewarm._lock:
            waiting = [p for q in prewarm._ready.values() for p in q]
            if (
                waiting
                and not prewarm._pending
                and all(
                    readable(p.proc.stdout.fileno(), 0)
                    for p in waiting
                    if p.proc.stdout is not None
                )
            ):
                return  # set up: the stub has printed its byte
        time.sleep(0.005)
    raise AssertionError("no sandbox was prepared")


def test_a_prepared_sandbox_runs_the_next_command(ws: Path, starts: Starts) -> None:
    ctx = make_ctx(ws)
    prime(ctx)
    out = run(
        ctx, "sh", ["-c", 'pwd; echo "$X"; cat'], dir="sub", env={"X": "x y"}, stdin="from stdin\n"
    )
    assert out["ok"], out
    assert out["stdout"] == f"{ws / 'sub'}\nx y\nfrom stdin\n"
    assert starts.warm == 1


def test_the_environment_is_exactly_the_plan(
    ws: Path, starts: Starts, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VISIBLE", "v1")
    monkeypatch.setenv("SECRET_TOKEN", "s3cr3t")
    ctx = make_ctx(ws, env=("PATH", "VISIBLE"))
    prime(ctx)
    out = run(ctx, "env", ["-0"], env={"EXTRA": "e\nf", "PATH": "/usr/bin"})
    got = dict(item.split("=", 1) for item in out["stdout"].split("\0") if item)
    # PWD as bubblewrap's --chdir sets it for a cold start
    assert got == {
        "HOME": sandbox.SANDBOX_HOME,
        "VISIBLE": "v1",
        "EXTRA": "e\nf",
        "PATH": "/usr/bin",
        "PWD": str(ws),
    }
    assert starts.warm == 1
    # The parent's value changes: the plan changes, and the command sees the new one.
    monkeypatch.setenv("VISIBLE", "v2")
    out = run(ctx, "printenv", ["VISIBLE"])
    assert out["stdout"] == "v2\n"


WORD = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=40)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(args=st.lists(WORD, max_size=6), value=WORD)
def test_every_byte_of_the_command_line_arrives(ws: Path, args: list[str], value: str) -> None:
    ctx = make_ctx(ws)
    prime(ctx)
    out = run(ctx, "printf", ["%s\\0", *args, value])
    assert out["ok"], out
    assert out["stdout"].split("\0")[:-1] == [*args, value]
    out = run(ctx, "printenv", ["V"], env={"V": value})
    assert out["stdout"] == value + "\n"


# ---------------------------------------------------------------- changes in between


def test_a_protected_directory_replaced_after_preparing_stays_read_only(
    ws: Path, starts: Starts
) -> None:
    ctx = make_ctx(ws)
    prime(ctx)
    # Same path, new inode: the prepared sandbox pinned the old one read-only.
    (ws / ".harness").rename(ws / "old-harness")
    (ws / ".harness").mkdir()
    out = run(ctx, "sh", ["-c", "echo x > .harness/planted"])
    assert not out["ok"]
    assert not (ws / ".harness" / "planted").exists()
    assert starts.refused + starts.warm >= 1 and starts.warm == 0


def test_a_sensitive_file_created_after_preparing_is_masked(ws: Path) -> None:
    ctx = make_ctx(ws)
    prime(ctx)
    (ws / ".env").write_text("API_KEY=leak\n")
    out = run(ctx, "cat", [".env"])
    assert "leak" not in out["stdout"]


def test_a_sensitive_file_replaced_after_preparing_is_masked(ws: Path, starts: Starts) -> None:
    (ws / ".env").write_text("OLD=1\n")
    ctx = make_ctx(ws)
    prime(ctx)
    (ws / ".env").unlink()
    (ws / ".env").write_text("API_KEY=leak\n")
    out = run(ctx, "cat", [".env"])
    assert "leak" not in out["stdout"]
    assert starts.warm == 0  # the mask over the old file is gone: it must start cold


def test_a_dead_prepared_sandbox_means_a_cold_start(ws: Path, starts: Starts) -> None:
    ctx = make_ctx(ws)
    prime(ctx)
    with prewarm._lock:
        prepared = [p for q in prewarm._ready.values() for p in q]
    assert prepared
    for p in prepared:
        os.killpg(p.proc.pid, 9)
        p.proc.wait()
    out = run(ctx, "echo", ["still works"])
    assert out["stdout"] == "still works\n" and starts.warm == 0


def test_a_timeout_in_a_prepared_sandbox_kills_the_command(ws: Path, starts: Starts) -> None:
    ctx = make_ctx(ws)
    prime(ctx)
    t0 = time.monotonic()
    out = run(ctx, "sleep", ["20"], timeout_ms=300)
    assert out["timed_out"] and time.monotonic() - t0 < 15  # killed, not waited for
    assert starts.warm == 1


# ---------------------------------------------------------------- nothing left behind


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].split()[0] != "Z":
                    alive.append(pid)
        except OSError:
            pass
    return alive


def test_discard_all_leaves_no_process(ws: Path) -> None:
    prime(make_ctx(ws))
    with prewarm._lock:
        pids = [p.proc.pid for q in prewarm._ready.values() for p in q]
    assert _alive(pids)
    prewarm.discard_all()
    assert not _alive(pids)


def test_harness_close_leaves_no_prepared_sandbox(ws: Path) -> None:
    tools = ws / ".harness" / "tools"
    tools.mkdir()
    (tools / "nap.md").write_text(
        "---\nscript: |\n  def run(args):\n"
        '      return exec.run("sleep", ["0.05"])["ok"]\n'
        "---\nnap\n"
    )
    (ws / "harness.md").write_text(
        "---\nruntime: {isolation: inprocess}\n"
        "limits: {max_concurrency: 4}\nexec: {sandbox: required}\n---\n"
    )
    h = harness.load(ws)
    assert h.call("nap", {}).value is True
    assert h.call("nap", {}).value is True
    # Scoped to this workspace: other test runs on the machine have stubs of their own.
    assert _stub_sandboxes(ws), "nothing was prepared"
    # close() while calls run and more are queued: they finish, and nothing they
    # prepared outlives close()
    import threading

    calls = [harness.ToolCall(name="nap", arguments={}, id=str(i)) for i in range(40)]
    t = threading.Thread(target=lambda: h.call_many(calls))
    t.start()
    time.sleep(0.15)
    h.close()
    t.join()
    # A stub dies with its bubblewrap (--die-with-parent), a moment after it, and a
    # start in flight when close() ran kills what it made as it finishes: allow a little
    # time. Scoped to this workspace: other runs on the machine have stubs of their own.
    deadline = time.monotonic() + 5
    while _stub_sandboxes(ws) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _stub_sandboxes(ws)


def _stub_sandboxes(ws: Path | None = None) -> list[int]:
    """Live processes of prepared sandboxes (bwrap and the dash stub alike); with
    ``ws``, only the bwrap processes of that workspace."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"harness-stub" in argv and (ws is None or os.fsencode(str(ws)) in argv):
            found.append(int(entry))
    return _alive(found)


def test_worker_sandboxes_are_prepared_and_die_with_the_pool(ws: Path) -> None:
    from harness.config import ExecConfig, Limits
    from harness.runtime.workers import ProcessRuntime

    cfg = Config(
        root=ws, workspace=ws, limits=Limits(max_concurrency=1), exec=ExecConfig(sandbox="required")
    )
    rt = ProcessRuntime(cfg)
    try:
        script = 'def run(args):\n    return exec.run("echo", [args["w"]])["stdout"]\n'
        for word in ("one", "two", "three"):
            out = rt.run_tool(script, "t", 1, {"w": word}, CallContext(config=cfg), 10000)
            assert (out.status, out.value) == ("ok", word + "\n"), out
        deadline = time.monotonic() + 5
        while not _stub_sandboxes(ws) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _stub_sandboxes(ws), "the worker prepared no sandbox"
        # The pool's sandboxes: the bubblewrap processes of this workspace and every
        # process under them (the stubs). Other test processes on the machine (pytest -n,
        # other runs) have prepared sandboxes of their own: only these must die.
        made = _with_descendants(_stub_sandboxes(ws))
    finally:
        rt.close()
    deadline = time.monotonic() + 5
    while (_stub_sandboxes(ws) or _alive(made)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _stub_sandboxes(ws) and not _alive(made)


def _with_descendants(pids: list[int]) -> list[int]:
    """``pids`` and every live process below them."""
    parent_of = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent_of[int(entry)] = int(f.read().rsplit(") ", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, grew = set(pids), True
    while grew:
        below = {pid for pid, ppid in parent_of.items() if ppid in found} - found
        found |= below
        grew = bool(below)
    return sorted(found)


# ---------------------------------------------------------------- review findings


def warm_and_cold(
    ctx: CallContext, monkeypatch: pytest.MonkeyPatch, *a: Any, **kw: Any
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """(result in a prepared sandbox, result started cold, prepared sandboxes used)."""
    counter = Starts(monkeypatch)
    prime(ctx)
    warm = run(ctx, *a, **kw)
    prewarm.discard_all()
    monkeypatch.setattr(prewarm, "ENABLED", False)
    cold = run(ctx, *a, **kw)
    monkeypatch.setattr(prewarm, "ENABLED", True)
    return warm, cold, counter.warm


def test_hidden_state_replaced_after_preparing_stays_hidden(ws: Path, starts: Starts) -> None:
    (ws / ".harness" / "state").mkdir()
    ctx = make_ctx(ws)
    prime(ctx)
    shutil.rmtree(ws / ".harness" / "state")  # (with harness's own lock folders)
    (ws / ".harness" / "state").mkdir()
    (ws / ".harness" / "state" / "audit.jsonl").write_text("AUDIT-SECRET\n")
    out = run(ctx, "cat", [".harness/state/audit.jsonl"])
    assert "AUDIT-SECRET" not in out["stdout"] and starts.warm == 0


def test_a_mask_inside_a_read_only_dir_replaced_after_preparing_holds(
    ws: Path, starts: Starts
) -> None:
    (ws / ".git" / "deploy.pem").write_text("OLD\n")
    ctx = make_ctx(ws)
    prime(ctx)
    (ws / ".git" / "deploy.pem").unlink()
    (ws / ".git" / "deploy.pem").write_text("PRIVATE-KEY\n")
    out = run(ctx, "cat", [".git/deploy.pem"])
    assert "PRIVATE-KEY" not in out["stdout"] and starts.warm == 0


def test_the_workspace_replaced_after_preparing(ws: Path, starts: Starts) -> None:
    import shutil

    ctx = make_ctx(ws)
    prime(ctx)
    os.rename(ws, ws.with_name("old"))
    shutil.copytree(ws.with_name("old"), ws, symlinks=True)
    out = run(ctx, "sh", ["-c", "echo x > marker"])
    assert out["ok"], out
    assert (ws / "marker").exists() and not (ws.with_name("old") / "marker").exists()
    assert starts.warm == 0


def test_a_slow_prepared_sandbox_never_outlasts_the_call_budget(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prewarm, "STUB", "sleep 5\n" + prewarm.STUB)  # set-up "hangs"
    ctx = make_ctx(ws)
    run(ctx, "true")
    time.sleep(0.05)
    out = run(ctx, "true", timeout_ms=300)
    # not ready within half the budget: killed, and the command started cold in time
    # (waiting for it would have used up the budget: timed_out, not ok)
    assert out["ok"], out


def test_close_during_a_call_prepares_nothing_after(ws: Path) -> None:
    import threading

    tools = ws / ".harness" / "tools"
    tools.mkdir()
    (tools / "slow.md").write_text(
        "---\nscript: |\n  def run(args):\n"
        '      return exec.run("sleep", ["0.5"])["ok"]\n---\nslow\n'
    )
    (ws / "harness.md").write_text(
        "---\nruntime: {isolation: inprocess}\nexec: {sandbox: required}\n---\n"
    )
    h = harness.load(ws)
    t = threading.Thread(target=lambda: h.call("slow", {}))
    t.start()
    time.sleep(0.2)
    h.close()
    t.join()
    time.sleep(0.3)
    assert not _stub_sandboxes(ws), "a sandbox was prepared after Harness.close()"


def test_a_short_write_of_the_line_is_completed(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A line cut short would be finished by the script's stdin: never let it be.
    ctx = make_ctx(ws, allowed_commands=("cat",))
    prime(make_ctx(ws))  # the same plan: allowed_commands is not part of it
    real = os.write

    def short(fd: int, data: Any) -> int:
        b = bytes(data)
        if b.startswith(b"cd -- ") and len(b) > 8:
            return real(fd, b[:8])
        return real(fd, data)

    monkeypatch.setattr(os, "write", short)
    out = run(ctx, "cat", [], stdin="echo INJECTED > pwned; id\n")
    assert out["stdout"] == "echo INJECTED > pwned; id\n"
    assert not (ws / "pwned").exists()


def test_a_failed_preparation_never_fails_the_command(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    monkeypatch.setattr(prewarm, "SYNC", True)  # as in a worker process
    real = subprocess.Popen

    class Failing(real):  # type: ignore[misc, valid-type]
        def __init__(self, argv: Any, *a: Any, **kw: Any) -> None:
            if "harness-stub" in argv:
                raise BlockingIOError(11, "Resource temporarily unavailable")
            super().__init__(argv, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", Failing)
    assert run(make_ctx(ws), "echo", ["hello"])["stdout"] == "hello\n"


def test_the_command_runs_at_the_callers_priority(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warm, cold, used = warm_and_cold(make_ctx(ws), monkeypatch, "nice")
    assert used == 1 and warm["stdout"] == cold["stdout"] == f"{os.nice(0)}\n"


def test_only_fds_0_to_2_reach_the_command(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTNAME", "x")
    prime(make_ctx(ws, env=("PATH", "HOSTNAME")))  # another plan, prepared too
    warm, cold, used = warm_and_cold(make_ctx(ws), monkeypatch, "ls", ["/proc/self/fd"])
    # ls itself opens one fd for the directory it lists
    assert used == 1 and warm["stdout"] == cold["stdout"] == "0\n1\n2\n3\n"


def _env(out: dict[str, Any]) -> tuple[bool, dict[str, str]]:
    items = [i for i in out["stdout"].split("\0") if i]
    return out["ok"], dict(i.split("=", 1) for i in items)


@pytest.mark.parametrize(
    "name",
    [
        "PWD",
        "OLDPWD",
        "nl",
        "line",
        "IFS",
        "PPID",
        "OPTIND",
        "PS1",
        "ENV",
        "HOME",
        "PATH",
        "SHLVL",
        "_",
        "A-B",
        "1X",
    ],
)
def test_the_environment_matches_a_cold_start(
    ws: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    ctx = make_ctx(ws)
    warm, cold, _ = warm_and_cold(ctx, monkeypatch, "env", ["-0"], env={name: "v a'l\n"}, dir="sub")
    assert _env(warm) == _env(cold)
    if name == "PATH":
        return  # the harness's own PATH finds the programs: leave it alone
    # and the base environment (exec.env), for names dash owns or drops
    monkeypatch.setenv(name, "b a'se")
    ctx = make_ctx(ws, env=("PATH", name))
    warm, cold, _ = warm_and_cold(ctx, monkeypatch, "env", ["-0"])
    assert _env(warm) == _env(cold)


BYTES = st.binary(max_size=40).map(lambda b: os.fsdecode(b.replace(b"\0", b"")))
TRICKY = st.lists(
    st.sampled_from(
        [
            "'",
            '"',
            "\\",
            "\n",
            "$nl",
            "$(id)",
            "`id`",
            "$",
            "\r",
            "\x81",
            "\udc81",
            "\udc88",
            " ",
            "\t",
            "*",
            "~",
            ";",
            "#",
            "é",
            "\u2028",
        ]
    ),
    max_size=10,
).map("".join)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(args=st.lists(st.one_of(BYTES, TRICKY), max_size=5), value=st.one_of(BYTES, TRICKY))
def test_arbitrary_bytes_arrive_exactly(ws: Path, args: list[str], value: str) -> None:
    ctx = make_ctx(ws)
    prime(ctx)
    show = (
        "import os, sys; sys.stdout.write(repr([os.fsencode(a) for a in sys.argv[1:]])"
        " + '|' + repr(os.environb.get(b'V')))"
    )
    out = run(ctx, "/usr/bin/python3", ["-c", show, *args], env={"V": value})
    assert out["ok"], out
    assert out["stdout"] == repr([os.fsencode(a) for a in args]) + "|" + repr(os.fsencode(value))


def test_commands_running_at_once_each_get_a_prepared_sandbox(ws: Path, starts: Starts) -> None:
    from concurrent.futures import ThreadPoolExecutor

    ctx = make_ctx(ws)
    with ThreadPoolExecutor(4) as pool:
        # 10 ms into these, one sandbox is prepared per command running
        outs = list(pool.map(lambda _: run(ctx, "sleep", ["0.3"]), range(4)))
        assert all(o["ok"] for o in outs)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with prewarm._lock:
                n = sum(len(q) for q in prewarm._ready.values())
            if n >= 4 and not prewarm._pending:
                break
            time.sleep(0.02)
        assert n == 4
        time.sleep(0.1)
        before = starts.warm
        outs = list(pool.map(lambda i: run(ctx, "echo", [str(i)]), range(4)))
    assert [o["stdout"] for o in outs] == ["0\n", "1\n", "2\n", "3\n"]
    assert starts.warm - before == 4
    assert prewarm._inflight == 0
    deadline = time.monotonic() + 10
    while prewarm._pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert prewarm._pending == {}
    # one command at a time again: once idle past IDLE_S, the surplus is trimmed when
    # the next one is taken
    prime(ctx)
    prewarm.IDLE_S = 0.0
    try:
        run(ctx, "true")
    finally:
        prewarm.IDLE_S = 30.0
    with prewarm._lock:
        assert sum(len(q) for q in prewarm._ready.values()) <= 2


def test_descriptors_numbered_past_1024_work(ws: Path) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("cannot open 1100 files here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        ctx = make_ctx(ws)
        for word in ("a", "b", "c"):
            assert run(ctx, "echo", [word])["stdout"] == word + "\n"
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_spawner_that_cannot_start_leaves_no_count_behind(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(prewarm, "_spawner", None)
    monkeypatch.setattr(threading.Thread, "start", refuse)
    ctx = make_ctx(ws)
    assert run(ctx, "echo", ["x"])["stdout"] == "x\n"
    assert prewarm._pending == {}


def test_a_prepared_sandbox_without_the_seccomp_filter_is_refused(ws: Path, starts: Starts) -> None:
    # Issue 10 item 1: the prepared path must hold the same filter as a cold start.
    # A sandbox prepared without it (a regression in _start) fails the check.
    from harness.runtime import seccomp

    real = seccomp.open_fd
    seccomp.open_fd = lambda: None  # type: ignore[assignment]
    try:
        prime(make_ctx(ws))
    finally:
        seccomp.open_fd = real  # type: ignore[assignment]
    out = run(make_ctx(ws), "sh", ["-c", "grep ^Seccomp: /proc/self/status"])
    assert out["ok"] and out["stdout"].split() == ["Seccomp:", "2"]
    assert starts.refused == 1 and starts.warm == 0
