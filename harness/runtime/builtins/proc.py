"""``exec.run``: run a program in the command sandbox (docs/spec.md §7, §8.4).

Decisions (see docs/security-exec-net.md):
- A program that cannot be found is a *result* (``ok: False``, ``exit_code: 127``, the
  reason in ``stderr``) so a script can fall back to another tool; Starlark has no
  ``try``. Policy refusals (``exec.allowed_commands``, ``exec.sandbox: required``
  without bubblewrap) and bad arguments raise ``BuiltinError``.
- ``exit_code`` is negative (``-N``) when the child was killed by signal N.
- Nothing started by the command outlives the call: the process group is killed when
  the program exits or times out (in the sandbox the pid namespace dies with it).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.config import Config
from harness.errors import BuiltinError, JailError
from harness.runtime import cancel, doubles, prewarm, projectenv, sandbox, seccomp
from harness.runtime.context import CallContext
from harness.runtime.jail import DIR_FLAGS, PROBE_FLAGS, Jail, get_jail

_CHUNK = 65536
_DRAIN_GRACE_S = 0.5  # reading after exit/kill when something escaped the group
PREPARE_AFTER_S = 0.01  # see runtime/prewarm.py


# ---------------------------------------------------------------- arguments


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise BuiltinError(f"exec.run: {name} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise BuiltinError(f"exec.run: {name} contains a NUL byte")
    return value


def _check_args(
    cmd: Any, args: Any, timeout_ms: Any, dir: Any, stdin: Any, env: Any
) -> tuple[str, list[str], float, str, bytes | None, dict[str, str]]:
    cmd = _text("cmd", cmd)
    if not cmd:
        raise BuiltinError('exec.run: cmd is empty; pass a program name such as "ls"')
    if not isinstance(args, (list, tuple)):
        raise BuiltinError(f"exec.run: args must be a list of strings, got {type(args).__name__}")
    argv = [_text(f"args[{i}]", a) for i, a in enumerate(args)]
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float)) or timeout_ms <= 0:
        raise BuiltinError(f"exec.run: timeout_ms must be a positive number, got {timeout_ms!r}")
    dir = _text("dir", dir)
    data: bytes | None = None
    if stdin is not None:
        if isinstance(stdin, bytes):
            data = stdin
        elif isinstance(stdin, str):
            data = stdin.encode("utf-8")
        else:
            raise BuiltinError(
                f"exec.run: stdin must be a string or None, got {type(stdin).__name__}"
            )
    if not isinstance(env, Mapping):
        raise BuiltinError(f"exec.run: env must be a dict of strings, got {type(env).__name__}")
    overrides: dict[str, str] = {}
    for k, v in env.items():
        k = _text("env key", k)
        if not k or "=" in k:
            raise BuiltinError(f'exec.run: env name "{k}" is not a valid variable name')
        overrides[k] = _text(f'env["{k}"]', v)
    return cmd, argv, float(timeout_ms), dir, data, overrides


def _resolve_dir(config: Config, workspace: str, dir: str) -> str:
    """The real path of ``dir``, jailed like every path argument (docs/spec.md §8.1-8.3)."""
    jail = get_jail(config)
    try:
        fd, real = jail.open(dir, DIR_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        raise BuiltinError(f'exec.run: dir "{dir}" is not a directory in the workspace') from None
    except OSError as exc:
        if isinstance(exc, JailError):
            raise
        raise BuiltinError(f'exec.run: dir "{dir}": {exc.strerror or exc}') from None
    os.close(fd)
    # The handle is not kept: a working directory is only a starting point, and in the
    # sandbox nothing outside the workspace exists whatever the directory turns into.
    return os.path.join(workspace, real) if real not in ("", ".") else workspace


# (cmd, PATH, sandboxed) -> resolved system program; re-validated with one access().
_found: dict[tuple[str, str, bool], str] = {}


def _which(
    cmd: str,
    cwd: str,
    path_env: str | None,
    workspace: str,
    accept: Callable[[str], bool],
    sandboxed: bool,
) -> str | None:
    def ok(p: str) -> bool:
        return os.path.isfile(p) and os.access(p, os.X_OK) and accept(p)

    if "/" in cmd:
        p = os.path.normpath(os.path.join(cwd, cmd))
        return p if ok(p) else None
    path = path_env if path_env is not None else os.defpath
    key = (cmd, path, sandboxed)
    hit = _found.get(key)
    if hit is not None and os.access(hit, os.X_OK):
        return hit
    for d in path.split(os.pathsep):
        if d and os.path.isabs(d) and ok(os.path.join(d, cmd)):
            found = os.path.join(d, cmd)
            real = os.path.realpath(found)
            if (
                not sandbox._inside(real, workspace)
                and len(_found) < 256
                and (not sandboxed or any(sandbox._inside(real, r) for r in sandbox.system_roots()))
            ):
                _found[key] = found  # only system programs: the workspace (and mounts) change
            return found
    return None


# ---------------------------------------------------------------- output


def trim_partial(data: bytes) -> bytes:
    """``data`` without an incomplete UTF-8 sequence at its very end (left by a cut)."""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b & 0xC0 == 0x80:  # continuation byte: keep looking for the lead
            continue
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
        return data[:-back] if need > back else data
    return data


def utf8_cut(data: bytes, limit: int) -> bytes:
    """At most ``limit`` bytes of ``data`` without splitting a UTF-8 sequence at the end."""
    return data if len(data) <= limit else trim_partial(data[:limit])


def _decode(data: bytes, limit: int, cut: bool) -> str:
    if cut:
        data = trim_partial(data)
    text = data.decode("utf-8", "replace")
    raw = text.encode("utf-8")
    if len(raw) > limit:  # replacement characters grew it
        text = utf8_cut(raw, limit).decode("utf-8")
    return text


class _Sink:
    __slots__ = ("buf", "limit", "over")

    def __init__(self, limit: int) -> None:
        self.buf = bytearray()
        self.limit = limit
        self.over = False

    def feed(self, chunk: bytes) -> None:
        room = self.limit - len(self.buf)
        if len(chunk) > room:
            self.over = True
            chunk = chunk[: max(room, 0)]
        self.buf += chunk


# ---------------------------------------------------------------- running


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it (its pid stays reserved)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _communicate(  # noqa: C901
    proc: subprocess.Popen[bytes],
    data: bytes | None,
    deadline: float,
    out: _Sink,
    err: _Sink,
    nudge: tuple[float, Callable[[], None]] | None = None,
) -> bool:
    """Pump stdin/stdout/stderr until the program ends or the deadline. True if timed out.

    ``nudge``: (time, fn): call ``fn`` once if the program still runs at that time."""
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sinks = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    for fd in sinks:
        sel.register(fd, selectors.EVENT_READ)
    pidfd = -1
    try:
        pidfd = os.pidfd_open(proc.pid)
        sel.register(pidfd, selectors.EVENT_READ)
    except (AttributeError, OSError):
        pidfd = -1
    stdin_fd = -1
    view = memoryview(data or b"")
    if proc.stdin is not None:
        stdin_fd = proc.stdin.fileno()
        if view:
            os.set_blocking(stdin_fd, False)
            sel.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
    timed_out = False
    ended = False  # the program exited (or was killed): now only drain what is left
    try:
        while sinks or not ended:
            now = time.monotonic()
            if not ended and now >= deadline:
                timed_out = ended = True
                _kill_group(proc.pid)
                deadline = now + _DRAIN_GRACE_S
            elif ended and now >= deadline:
                break
            wait = deadline - now
            if nudge is not None and not ended:
                if now >= nudge[0]:
                    nudge[1]()
                    nudge = None
                else:
                    wait = min(wait, nudge[0] - now)
            if pidfd < 0 and not ended:
                wait = min(wait, 0.02)
                if _exited(proc.pid):
                    ended = True
                    _kill_group(proc.pid)  # stragglers: the zombie keeps the pgid reserved
                    deadline = min(deadline, time.monotonic() + _DRAIN_GRACE_S)
            for key, _ in sel.select(max(wait, 0)):
                fd = int(key.fd)
                if fd == pidfd:
                    sel.unregister(fd)
                    os.close(pidfd)
                    pidfd = -1  # confirm: should a kernel wake early, fall back to polling
                    if _exited(proc.pid):
                        ended = True
                        _kill_group(proc.pid)
                        deadline = min(deadline, time.monotonic() + _DRAIN_GRACE_S)
                elif fd == stdin_fd:
                    try:
                        n = os.write(fd, view[:_CHUNK])
                        view = view[n:]
                    except BlockingIOError:
                        continue
                    except OSError:  # the program closed stdin (EPIPE): fine
                        view = view[:0]
                    if not view:
                        sel.unregister(fd)
                        assert proc.stdin is not None
                        proc.stdin.close()
                        stdin_fd = -1
                else:
                    chunk = os.read(fd, _CHUNK if not sinks[fd].over else 1 << 20)
                    if chunk:
                        sinks[fd].feed(chunk)
                    else:
                        sel.unregister(fd)
                        del sinks[fd]
    finally:
        sel.close()
        if pidfd >= 0:
            os.close(pidfd)
    if sinks:  # something outside the group still holds a pipe
        _kill_group(proc.pid)
    return timed_out


def _listed_path(allowed: Sequence[str], workspace: str, cwd: str, cmd: str) -> str | None:
    """The ``allowed_commands`` entry written as a path that names ``cmd``, if any.

    Such entries are relative to the workspace root (or absolute); ``cmd`` is relative
    to ``dir``. Compared as written (normalized), symlinks not resolved."""
    if "/" not in cmd or not allowed:
        return None
    target = os.path.normpath(os.path.join(cwd, cmd))
    for entry in allowed:
        if "/" in entry and os.path.normpath(os.path.join(workspace, entry)) == target:
            return entry
    return None


def _check_allowed(
    allowed: Sequence[str],
    cmd: str,
    name: str,
    program: str,
    workspace: str,
    lookup: str | None,
    accept: Callable[[str], bool],
    sandboxed: bool,
) -> None:
    """Refuse a program that only looks like an allowed one (docs/spec.md §8.4)."""
    real = os.path.realpath(program)
    if sandbox._inside(program, workspace) or sandbox._inside(real, workspace):
        # A workspace file (or link) named like an allowed program is not that program;
        # only an entry written as a path ("./build.sh") allows one from the workspace.
        raise BuiltinError(
            f'exec.run refused: "{cmd}" resolves to {program} inside the workspace; only '
            "programs installed on the system match exec.allowed_commands (list a "
            'workspace program as a path, e.g. "./build.sh")'
        )
    target = os.path.basename(real)
    if target in allowed:
        return
    # A system alias (sh -> dash, python3 -> python3.11) is fine when it is the very
    # file the allowed name resolves to on the lookup PATH; a link elsewhere named
    # "ls" that leads to a shell is not.
    system = _which(name, workspace, lookup, workspace, accept, sandboxed)
    if system is None or os.path.realpath(system) != real:
        raise BuiltinError(
            f'exec.run refused: "{cmd}" resolves to "{real}", and "{target}" is not in '
            f"exec.allowed_commands ({', '.join(allowed)}); add it there in harness.md "
            "to allow it"
        )


def _interpreter(program: str) -> list[str] | None:
    """The ``#!`` line of a script outside /usr (interpreter and its argument), or None."""
    if any(sandbox._inside(os.path.realpath(program), r) for r in sandbox.system_roots()):
        return None
    try:
        with open(program, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].split()
    return [os.fsdecode(w) for w in words[:2]] if words and words[0].startswith(b"/") else None


def _invisible(cmd: str, host: str, shown: Sequence[str], script: bool = False) -> str:
    """The message for a program that exists on the host but not in the sandbox
    (``shown``: the workspace and the extra mounts)."""
    hops = sandbox.link_hops(host) or [host]
    roots = (*sandbox.system_roots(), *shown)
    gone = next(
        (
            h
            for h in [host, *hops]
            if not any(sandbox._inside(os.path.realpath(os.path.dirname(h)), r) for r in roots)
        ),
        hops[-1],
    )
    real = hops[-1]
    via = f" (a symbolic link to {real})" if real != host else ""
    what = f'program "{cmd}" is a script whose interpreter is' if script else f'program "{cmd}" is'
    return (
        f"exec.run: {what} {host}{via} on this machine, but {gone} is not "
        "visible in the sandbox (only the workspace, /usr and the exec.mounts "
        f'directories are); add "{sandbox.suggest_mount(gone)}" to exec.mounts in '
        "harness.md (read-only in the sandbox)"
    )


def run(
    ctx: CallContext,
    cmd: Any,
    args: Any = (),
    timeout_ms: Any = 30000,
    dir: Any = ".",
    stdin: Any = None,
    env: Any = None,
) -> dict[str, Any]:
    if ctx.config.doubles:  # harness test: fakes answer first (runtime/doubles.py)
        return _doubled(ctx, cmd, args, timeout_ms, dir, stdin, env)
    # ``leases``: the plan's hold on the placeholders (runtime/placeholders.py) is
    # released when the call is over, whichever way it ends, after _after_run.
    with prewarm.running(), contextlib.ExitStack() as leases:
        return _run(ctx, cmd, args, timeout_ms, dir, stdin, env, leases)


def _refuse_unlisted(allowed: Sequence[str], workspace: str, cwd: str, cmd: str) -> str | None:
    """Raise unless exec.allowed_commands (when set) lists ``cmd``; its listed path."""
    name = os.path.basename(cmd)
    listed_path = _listed_path(allowed, workspace, cwd, cmd)
    if allowed and name not in allowed and listed_path is None:
        raise BuiltinError(
            f'exec.run refused: program "{name}" is not in exec.allowed_commands '
            f"({', '.join(allowed)}); add it there in harness.md to allow it"
        )
    return listed_path


def _doubled(
    ctx: CallContext, cmd: Any, args: Any, timeout_ms: Any, dir: Any, stdin: Any, env: Any
) -> dict[str, Any]:
    """exec.run in a test case: arguments and policy checked as always, then a fake."""
    args = list(args) if isinstance(args, tuple) else args
    cmd, argv, timeout, dir, _data, _env = _check_args(
        cmd, args, timeout_ms, dir, stdin, {} if env is None else env
    )
    workspace = os.path.realpath(ctx.config.workspace)
    cwd = _resolve_dir(ctx.config, workspace, dir)
    _refuse_unlisted(ctx.config.exec.allowed_commands, workspace, cwd, cmd)

    def real() -> dict[str, Any]:
        with prewarm.running(), contextlib.ExitStack() as leases:
            return _run(ctx, cmd, argv, timeout_ms, dir, stdin, env, leases)

    return doubles.exec_run(ctx, cmd, argv, timeout, real)


def _run(  # noqa: C901
    ctx: CallContext,
    cmd: Any,
    args: Any,
    timeout_ms: Any,
    dir: Any,
    stdin: Any,
    env: Any,
    leases: contextlib.ExitStack,
) -> dict[str, Any]:
    cmd, argv, timeout, dir, data, overrides = _check_args(
        cmd,
        list(args) if isinstance(args, tuple) else args,
        timeout_ms,
        dir,
        stdin,
        {} if env is None else env,
    )
    config = ctx.config
    workspace = os.path.realpath(config.workspace)
    protected = config.fs.protected
    cwd = _resolve_dir(config, workspace, dir)

    allowed = config.exec.allowed_commands
    name = os.path.basename(cmd)
    listed_path = _refuse_unlisted(allowed, workspace, cwd, cmd)

    venv = projectenv.project_venv(config, workspace)
    mounts = config.exec.mounts
    if venv is not None and not sandbox._inside(os.path.realpath(venv), workspace):
        mounts = (*mounts, venv)  # exec.venv outside the workspace: read-only
    env_overrides = {**dict(config.env_values), **overrides}
    p = sandbox.plan(
        mode=config.exec.sandbox,
        workspace=workspace,
        cwd=cwd,
        program=cmd,
        args=argv,
        env_names=config.exec.env,
        env_overrides=env_overrides,
        protected=protected,
        log=ctx.log,
        mounts=mounts,
    )
    if p.lease is not None:
        leases.callback(p.lease.release)
    # The project's interpreter first (issue 25); not under exec.allowed_commands,
    # where the operator's PATH alone decides what a name runs (a workspace directory
    # is writable by commands).
    if "PATH" not in env_overrides and not allowed:
        p.env.update(projectenv.with_venv(p.env, venv))

    def accept(path: str) -> bool:
        return not p.sandboxed or sandbox.visible(path, workspace, protected, p.mounts)

    # With allowed_commands the lookup ignores the script's PATH override: the name is
    # looked up where the operator's environment says, never in a directory of the
    # script's choosing (the child still gets the override in its environment).
    lookup = (
        sandbox.child_env(config.exec.env, {}, sandboxed=p.sandboxed).get("PATH")
        if allowed
        else p.env.get("PATH")
    )
    program = _which(cmd, cwd, lookup, workspace, accept, p.sandboxed)
    limit = config.limits.max_output_bytes
    if program is None:
        where = "in the sandbox" if p.sandboxed else "on this machine"
        msg = f'exec.run: program "{cmd}" not found {where} (PATH={lookup or os.defpath})'
        host = _which(cmd, cwd, lookup, workspace, lambda _: True, False) if p.sandboxed else None
        if host is not None and projectenv.in_own_venv(host):
            msg = projectenv.own_venv_message(cmd, host, venv, workspace)
        elif host is not None:
            msg = _invisible(cmd, host, (workspace, *p.mounts))
        return {
            "ok": False,
            "exit_code": 127,
            "stdout": "",
            "duration_ms": 0,
            "stderr": msg[:limit],
            "timed_out": False,
            "truncated": False,
        }
    if p.sandboxed:
        shebang = _interpreter(program)
        interp = shebang[0] if shebang else None
        if (
            shebang
            and len(shebang) == 2
            and os.path.basename(shebang[0]) == "env"
            and "/" not in shebang[1]
            and not shebang[1].startswith("-")
        ):
            # "#!/usr/bin/env node": node on the child's PATH, as the sandbox sees it.
            name = shebang[1]
            if _which(name, cwd, p.env.get("PATH"), workspace, accept, True) is None:
                interp = _which(name, cwd, p.env.get("PATH"), workspace, lambda _: True, False)
        # Only an executable file is named (as the program lookup does): the message
        # must not tell a script whether any other host path exists.
        if (
            interp is not None
            and os.path.isfile(interp)
            and os.access(interp, os.X_OK)
            and not accept(interp)
        ):
            return {
                "ok": False,
                "exit_code": 127,
                "stdout": "",
                "duration_ms": 0,
                "stderr": (
                    projectenv.own_venv_message(cmd, interp, venv, workspace)
                    if projectenv.in_own_venv(interp)
                    else _invisible(cmd, interp, (workspace, *p.mounts), script=True)
                )[:limit],
                "timed_out": False,
                "truncated": False,
            }
    if allowed and listed_path is None:
        _check_allowed(allowed, cmd, name, program, workspace, lookup, accept, p.sandboxed)
    spawn = list(p.argv)
    spawn[p.program_index] = program

    budget = timeout
    remaining = ctx.remaining_ms()
    if remaining is not None:
        budget = min(budget, remaining)
    if config.limits.max_timeout_ms > 0:
        budget = min(budget, config.limits.max_timeout_ms)

    # Captured up to exec.max_capture_bytes: the pipeline cuts what the model sees at
    # limits.max_output_bytes and keeps the rest for read_output.
    capture = config.exec.max_capture_bytes
    out, err = _Sink(capture), _Sink(capture)
    start = time.monotonic()
    proc: subprocess.Popen[bytes] | None = None
    warm_key = None
    gen = prewarm.generation()
    if p.sandboxed and prewarm.ENABLED:
        # A sandbox prepared after an earlier command, for this very plan, skips the
        # setup (runtime/prewarm.py); this command's run prepares the next one.
        parts = prewarm.split(spawn)
        if parts is not None:
            base = sandbox.child_env(config.exec.env, {}, sandboxed=True)
            warm_key = prewarm.key_of(parts[0], base)
            line = prewarm.command_line(cwd, base, p.env, program, argv)
            ready = prewarm.take(warm_key) if line is not None else None
            # Never wait past the call's own budget; not ready by then: start cold.
            wait = min(prewarm.READY_WAIT_S, budget / 1000.0 / 2)
            if (
                ready is not None
                and line is not None
                and prewarm.start(ready, parts[0], line, wait)
            ):
                proc = ready.proc
    if proc is None:
        # The sandbox's seccomp filter (runtime/seccomp.py): a fresh fd per spawn.
        filter_fd = seccomp.open_fd() if p.sandboxed else None
        try:
            proc = subprocess.Popen(
                spawn if filter_fd is None else seccomp.insert(spawn, filter_fd),
                stdin=subprocess.PIPE if data else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=p.env,
                cwd=p.cwd,
                start_new_session=True,
                close_fds=True,
                pass_fds=() if filter_fd is None else (filter_fd,),
            )
        except OSError as exc:
            return {
                "ok": False,
                "exit_code": 126,
                "stdout": "",
                "duration_ms": 0,
                "stderr": f'exec.run: cannot start "{cmd}": {exc.strerror or exc}'[:limit],
                "timed_out": False,
                "truncated": False,
            }
        finally:
            if filter_fd is not None:
                os.close(filter_fd)
    # The next command's sandbox is prepared once this one is done, or from
    # PREPARE_AFTER_S on if it runs longer: a short command keeps the CPU to itself.
    # When the last one was taken before it was ready, right away instead.
    nudge = None
    try:
        if warm_key is not None:
            key = warm_key
            if prewarm.eager(key):  # calls come back to back: overlap the next set-up now
                prewarm.prepare(key, workspace, gen)
            else:
                nudge = (start + PREPARE_AFTER_S, lambda: prewarm.prepare(key, workspace, gen))
        # A cancelled call (runtime/cancel.py) kills the group right away.
        pid = proc.pid
        stop = cancel.on_cancel(ctx.call_id, lambda: _kill_group(pid))
        try:
            timed_out = _communicate(proc, data, start + budget / 1000.0, out, err, nudge)
        finally:
            stop()
    finally:
        if proc.poll() is None:
            _kill_group(proc.pid)
        proc.wait()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            if f is not None:
                f.close()
    duration = round((time.monotonic() - start) * 1000)
    if warm_key is not None:
        prewarm.prepare(warm_key, workspace, gen)  # a no-op when the nudge already did it

    notes = _after_run(config, workspace, p)
    if notes:
        err.feed(notes.encode())
    code = proc.returncode
    return {
        "ok": code == 0 and not timed_out and not notes,
        "exit_code": code,
        "stdout": _decode(bytes(out.buf), capture, out.over),
        "stderr": _decode(bytes(err.buf), capture, err.over),
        "duration_ms": duration,
        "timed_out": timed_out,
        "truncated": out.over or err.over,
    }


_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _after_run(config: Config, workspace: str, p: sandbox.Plan) -> str:
    """Notes for stderr about protected paths the command created or replaced, or ''."""
    notes = []
    if p.absent_protected:
        jail = get_jail(config)
        root, _ = jail.open(".", DIR_FLAGS, check=False)
        try:
            for absent in p.absent_protected:
                notes.append(_remove_created(jail, root, absent))
        finally:
            os.close(root)
    for rel, dev, ino in p.protected_ids if p.sandboxed else ():
        try:
            st = os.lstat(os.path.join(workspace, rel))
            same = (st.st_dev, st.st_ino) == (dev, ino)
        except OSError:
            same = False
        if not same:  # only reachable through a symlink in its path, which no mount pins
            notes.append(
                f'\nharness: protected path "{rel}" was replaced or removed during '
                "the command (a symbolic link in its path cannot be made read-only); "
                "check it"
            )
    return "".join(notes)


def _remove_created(jail: Jail, root: int, absent: sandbox.Absent) -> str:
    """Remove protected path ``absent.rel`` if the command created it; a note, or ''.

    Runs unsandboxed (as the harness user, maybe root), so nothing is followed: each
    parent is opened with O_NOFOLLOW relative to the previous handle and the entry is
    removed relative to its parent's handle (``shutil.rmtree(dir_fd=...)`` is the
    fd-based, symlink-safe one). A symlink in the parent chain is never followed: one
    the command made is unlinked itself; one that was there before is left alone."""
    rel = absent.rel
    parts = rel.split("/")
    held: list[int] = []
    cur = root
    try:
        for i, comp in enumerate(parts[:-1]):
            try:
                st = os.stat(comp, dir_fd=cur, follow_symlinks=False)
            except OSError:
                return ""  # missing (or a parent is a file): nothing was created
            sub = "/".join(parts[: i + 1])
            if stat.S_ISLNK(st.st_mode):
                if absent.link == (sub, st.st_dev, st.st_ino):
                    return _behind_link(jail, rel, sub)
                os.unlink(comp, dir_fd=cur)
                return (
                    f'\nharness: the command created the symbolic link "{sub}" in the path '
                    f'of protected path "{rel}"; the link was removed (not followed)'
                )
            if not stat.S_ISDIR(st.st_mode):
                return ""
            fd = os.open(comp, _NOFOLLOW_DIR, dir_fd=cur)
            held.append(fd)
            cur = fd
        try:
            st = os.stat(parts[-1], dir_fd=cur, follow_symlinks=False)
        except FileNotFoundError:
            return ""
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(parts[-1], dir_fd=cur)
        else:
            os.unlink(parts[-1], dir_fd=cur)  # a symlink is unlinked, never followed
    except OSError as exc:
        return (
            f'\nharness: the command created protected path "{rel}" and it could '
            f"not be removed: {exc}"
        )
    finally:
        for fd in held:
            os.close(fd)
    return f'\nharness: the command created protected path "{rel}"; it was removed'


def _behind_link(jail: Jail, rel: str, link: str) -> str:
    """A note if ``rel`` now exists behind a symlink that was already there, or ''."""
    try:
        fd, _ = jail.open(rel, PROBE_FLAGS, check=False)  # confined beneath the workspace
    except (OSError, BuiltinError):
        return ""  # missing, or leads out of the workspace: nothing there for harness
    os.close(fd)
    return (
        f'\nharness: protected path "{rel}" now exists behind the symbolic link "{link}" '
        "(which existed before); it was not removed (harness never follows links to "
        "delete), check it"
    )


FUNCTIONS: dict[str, Callable[..., Any]] = {"exec.run": run}
