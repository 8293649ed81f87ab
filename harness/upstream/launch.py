"""How an upstream server is reached: the stdio command line (sandboxed) or the HTTP client.

A stdio server runs in the same bubblewrap sandbox as ``exec.run`` (built with
:func:`harness.runtime.sandbox.plan`): workspace read-write, system read-only, no home,
no network, and an environment holding only ``exec.env`` names plus the server's own
``env:``. What the program needs to run (its interpreter install, its virtualenv, its
node prefix, a script named in its arguments) is mounted read-only on top, and nothing
else of the host. The SDK's stdio client adds a few variables of its own (HOME, USER,
SHELL, ...); ``env -u`` in front of the program drops them. Values are passed in the
environment, never on the command line.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.artifacts.servers import ServerSpec, env_refs, expand
from harness.config import Config
from harness.runtime import sandbox
from harness.runtime.mounts import runtime_mounts

ENV_PROGRAM = "/usr/bin/env" if os.path.exists("/usr/bin/env") else "/bin/env"


class LaunchError(Exception):
    """The server cannot be started as declared (message names the server and the fix)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    sandboxed: bool
    mounts: tuple[str, ...] = ()
    plan: sandbox.Plan | None = None  # the sandbox plan (protected paths to check at stop)


def resolve_values(
    spec: ServerSpec, key: str, values: Mapping[str, str], environ: Mapping[str, str]
) -> dict[str, str]:
    out = {}
    for name, value in values.items():
        try:
            out[name] = expand(value, environ)
        except KeyError:
            missing = [r for r in env_refs(value) if r not in environ]
            raise LaunchError(
                f'upstream server "{spec.name}" {key} "{name}" needs ${{env:{missing[0]}}}, but '
                f'"{missing[0]}" is not set in the environment harness runs in; set it, or give '
                f"an explicit value in {spec.source.path}"
            ) from None
    return out


def find_program(spec: ServerSpec, root: Path) -> str:
    program = spec.command[0]
    if "/" in program:
        path = (root / program) if not os.path.isabs(program) else Path(program)
        if not os.access(path, os.X_OK) or path.is_dir():
            raise LaunchError(
                f'upstream server "{spec.name}": program "{program}" is not an '
                f"executable file (declared in {spec.source.path})"
            )
        return str(path)
    found = shutil.which(program)
    if found is None:
        raise LaunchError(
            f'upstream server "{spec.name}": program "{program}" is not on PATH; '
            f"install it or give its full path in {spec.source.path}"
        )
    return found


def stdio_launch(
    spec: ServerSpec, config: Config, environ: Mapping[str, str], egress: Any = None
) -> Launch:
    """The command line, environment and working directory of a stdio server. ``egress``
    (an :class:`harness.upstream.egress.EgressProxy`) opens the network of a sandboxed
    server to its ``allowed_domains``."""
    workspace = str(config.workspace)
    program = find_program(spec, config.root)
    args = list(spec.command[1:])
    cwd = os.path.realpath(os.path.join(workspace, spec.cwd or "."))
    if not (cwd == workspace or cwd.startswith(workspace.rstrip("/") + "/")):
        raise LaunchError(
            f'upstream server "{spec.name}": cwd "{spec.cwd}" is outside the '
            "workspace; name a directory inside it"
        )
    overrides = resolve_values(spec, "env", spec.env, environ)
    mode = spec.sandbox or config.exec.sandbox
    # A sandboxed plan holds placeholders for the missing protected paths for as long
    # as the server runs (runtime/placeholders.py); after_stop releases them.
    try:
        plan = sandbox.plan(
            mode=mode,
            workspace=workspace,
            cwd=cwd,
            program=ENV_PROGRAM,
            args=[],
            env_names=(),
            env_overrides={},
            protected=config.fs.protected,
        )
    except sandbox.SandboxUnavailable as exc:
        raise LaunchError(f'upstream server "{spec.name}" cannot start: {exc}') from None
    env = sandbox.child_env(config.exec.env, overrides, sandboxed=plan.sandboxed)
    # The values travel in the process environment (never on a command line, where any
    # local user could read them); ``env -u`` drops what the SDK adds from the operator's
    # environment (HOME, USER, SHELL, ...) unless exec.env or env: asked for it.
    drop = [a for name in _sdk_inherited() if name not in env for a in ("-u", name)]
    tail = [ENV_PROGRAM, *drop, program, *args]
    if not plan.sandboxed:
        return Launch(argv=tail, env=env, cwd=cwd, sandboxed=False)
    try:
        return _sandboxed(plan, program, args, tail, env, cwd, workspace, environ, egress)
    except BaseException:
        if plan.lease is not None:
            plan.lease.release()
        raise


def _sandboxed(
    plan: sandbox.Plan,
    program: str,
    args: list[str],
    tail: list[str],
    env: dict[str, str],
    cwd: str,
    workspace: str,
    environ: Mapping[str, str],
    egress: Any,
) -> Launch:
    mounts = runtime_paths(program, args, workspace, environ.get("HOME", ""))
    argv = list(plan.argv[: plan.program_index])  # ... --chdir CWD --
    at = len(argv) - 1 - argv[::-1].index("--chdir")
    extra: list[str] = []
    for path in mounts:
        extra += ["--ro-bind", path, path]
    if egress is not None:
        # The relay needs a Python in the sandbox: the system one, else harness's own
        # interpreter with its install mounted read-only like a server's.
        python = shutil.which("python3", path="/usr/bin:/bin")
        if python is None:
            python = sys.executable
            for path in runtime_paths(python, [], workspace, environ.get("HOME", "")):
                if path not in mounts:
                    extra += ["--ro-bind", path, path]
        extra += egress.bwrap_args()
        env.update(egress.env())
        tail = egress.wrap(tail, python)
    argv[at:at] = extra
    return Launch(
        argv=[*argv, *tail], env=env, cwd=cwd, sandboxed=True, mounts=tuple(mounts), plan=plan
    )


def _sdk_inherited() -> list[str]:
    from mcp.client.stdio import get_default_environment

    # PWD: bubblewrap sets it for --chdir.
    return sorted({*get_default_environment(), "PWD"})


def after_stop(config: Config, launch: Launch) -> list[str]:
    """What exec.run checks after a command, for a stopped sandboxed server: protected
    paths it created are removed, protected paths it replaced are reported."""
    if launch.plan is None:
        return []
    from harness.runtime.builtins.proc import _after_run

    try:
        notes = _after_run(config, str(config.workspace), launch.plan)
    finally:
        if launch.plan.lease is not None:
            launch.plan.lease.release()
    return [n.strip() for n in notes.split("\n") if n.strip()]


def _shebang(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    parts = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not parts:
        return None
    if os.path.basename(parts[0]) == "env" and len(parts) > 1:
        return shutil.which(parts[-1])
    return parts[0]


def runtime_paths(program: str, args: list[str], workspace: str, home: str) -> list[str]:
    """Host paths the program needs to run, to mount read-only, as
    :func:`harness.runtime.mounts.runtime_mounts` decides for every sandbox: the
    program's own file, its interpreter install, its virtualenv and that one's base
    interpreter, the interpreter its ``#!`` line names (only what an installation
    holds: a script in the workspace can rewrite that line), and files named by
    absolute path in the arguments. Never ``/``, the home directory or one of its
    ancestors, never what the sandbox already has."""
    interpreter = _shebang(os.path.realpath(program))
    return list(
        runtime_mounts(
            workspace,
            system=sandbox.system_roots(),
            programs=[program],
            interpreters=[interpreter] if interpreter else [],
            files=[a for a in args if os.path.isabs(a)],
            home=home,
        )
    )


@contextlib.asynccontextmanager
async def http_transport(
    spec: ServerSpec, environ: Mapping[str, str], statuses: list[int]
) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport with the declared headers. The status of every
    non-2xx response is appended to ``statuses`` (the SDK reports a 5xx only as "Server
    returned an error response"; the retry policy needs the status)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = resolve_values(spec, "header", spec.headers, environ)
    assert spec.url is not None

    async def record(response: Any) -> None:
        if response.status_code >= 400:
            statuses.append(response.status_code)

    async with create_mcp_http_client(headers=headers) as client:
        client.event_hooks["response"].append(record)
        async with streamable_http_client(spec.url, http_client=client) as streams:
            yield streams
