"""Issue 22 item 9: HTTP serving needs a bearer token by default, on loopback too.

Without ``--auth-token-env`` the server makes a token, shows it once on stderr (with
the URL and the header to send), and refuses requests without it. ``--no-auth``
turns authentication off, on a loopback address only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
from serve_helpers import MODERN, era_client, serve_argv, stderr_log, tool_text, wait_for_log

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def _start(project: Path, *extra: str) -> subprocess.Popen[bytes]:
    with open(stderr_log(project), "a") as err:
        return subprocess.Popen(
            serve_argv(project, "--transport", "http", "--port", "0", *extra),
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=ENV,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_loopback_without_a_token_is_refused_by_default(project: Path) -> None:
    log = stderr_log(project)
    proc = _start(project)

    async def go() -> None:
        text = await wait_for_log(log, "/mcp")
        url = re.search(r"http://127\.0\.0\.1:\d+/mcp", text)
        assert url is not None, text
        async with httpx.AsyncClient() as raw:
            anonymous = await raw.post(url.group(0), json=INIT, headers=HEADERS)
            assert anonymous.status_code == 401
        token = re.search(r"Authorization: Bearer (\S+)", text)
        assert token is not None, f"the generated token is shown with its header: {text}"
        headers = {"Authorization": f"Bearer {token.group(1)}"}
        async with era_client(url.group(0), MODERN, headers=headers) as c:
            ok = await c.call_tool("echo", {"text": "with the token"})
            assert ok.structured_content == {"echo": "with the token"}, tool_text(ok)
        # Shown once: not repeated in later log lines.
        assert log.read_text().count(token.group(1)) == 1

    try:
        anyio.run(go)
    finally:
        _stop(proc)


def test_no_auth_serves_loopback_without_a_token(project: Path) -> None:
    log = stderr_log(project)
    proc = _start(project, "--no-auth")

    async def go() -> None:
        text = await wait_for_log(log, "/mcp")
        url = re.search(r"http://127\.0\.0\.1:\d+/mcp", text)
        assert url is not None, text
        assert "Bearer" not in text
        async with httpx.AsyncClient() as raw:
            res = await raw.post(url.group(0), json=INIT, headers=HEADERS)
            assert res.status_code == 200

    try:
        anyio.run(go)
    finally:
        _stop(proc)


def test_no_auth_is_refused_on_a_non_loopback_bind(project: Path) -> None:
    done = subprocess.run(
        serve_argv(project, "--transport", "http", "--host", "0.0.0.0", "--port", "0", "--no-auth"),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=ENV,
    )
    assert done.returncode != 0
    assert "--no-auth" in done.stderr and "loopback" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
