"""`harness serve --transport http` for deployments: bearer tokens, Host/Origin checks on
every bind address, session ids kept out of the logs, clean startup errors, and limits
on half-open connections (issue 10 item 10)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from serve_helpers import (
    ERAS,
    MODERN,
    TEST_AUTH,
    era_client,
    http_server,
    serve_argv,
    spilled_ref,
    stderr_log,
    tool_text,
)

TOKEN_A = "tok-A-0123456789abcdefghij"
TOKEN_B = "tok-B-0123456789abcdefghij"
AUTH_ENV = {"HARNESS_TEST_TOKENS": f"{TOKEN_A},{TOKEN_B}"}

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


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


@pytest.mark.parametrize("mode", ERAS)
def test_bearer_token_refused_and_accepted(project: Path, mode: str) -> None:
    async def go() -> None:
        async with http_server(
            project, "--auth-token-env", "HARNESS_TEST_TOKENS", env=AUTH_ENV
        ) as url:
            async with httpx.AsyncClient() as raw:
                none = await raw.post(url, json=INIT, headers=HEADERS)
                assert none.status_code == 401
                assert none.headers["www-authenticate"].startswith("Bearer")
                wrong = await raw.post(
                    url,
                    json=INIT,
                    headers={**HEADERS, "Authorization": "Bearer " + TOKEN_A[:-1] + "X"},
                )
                assert wrong.status_code == 401
            with pytest.raises(Exception):  # noqa: B017 - the client fails to connect
                async with era_client(url, mode):
                    pass
            async with era_client(url, mode, headers={"Authorization": f"Bearer {TOKEN_A}"}) as a:
                ok = await a.call_tool("echo", {"text": "hi"})
                assert ok.structured_content == {"echo": "hi"}
                big = await a.call_tool("big", {})
                ref, offset = spilled_ref(tool_text(big))
            # Refs belong to the identity that made them: another token cannot read it,
            # a new connection with the same token can.
            async with era_client(url, mode, headers={"Authorization": f"Bearer {TOKEN_B}"}) as b:
                other = await b.call_tool("read_output", {"ref": ref, "offset": offset})
                assert other.is_error is True and "unknown output ref" in tool_text(other)
            async with era_client(url, mode, headers={"Authorization": f"Bearer {TOKEN_A}"}) as a2:
                same = await a2.call_tool("read_output", {"ref": ref, "offset": offset})
                assert same.is_error is False, tool_text(same)

    anyio.run(go)


def _run_cli(
    project: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        serve_argv(project, *args),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})},
    )


def test_unset_token_variable_is_one_clean_error(project: Path) -> None:
    # (Serving without any token: tests/serve/test_http_default_token.py.)
    unset = _run_cli(project, "--transport", "http", "--auth-token-env", "NOPE_NOT_SET")
    assert unset.returncode == 1 and '"NOPE_NOT_SET" is not set' in unset.stderr
    assert len(unset.stderr.strip().splitlines()) == 1 and "Traceback" not in unset.stderr


def test_foreign_host_and_origin_refused_on_an_any_address_bind(project: Path) -> None:
    async def go() -> None:
        async with http_server(
            project,
            "--auth-token-env",
            "HARNESS_TEST_TOKENS",
            "--allowed-origin",
            "https://app.example.com",
            host="0.0.0.0",
            env=AUTH_ENV,
        ) as url:
            port = port_of(url)
            auth = {**HEADERS, "Authorization": f"Bearer {TOKEN_A}"}
            async with httpx.AsyncClient() as raw:
                host = await raw.post(url, json=INIT, headers={**auth, "Host": "evil.example"})
                assert host.status_code == 421
                rebound = await raw.post(
                    url, json=INIT, headers={**auth, "Host": f"evil.example:{port}"}
                )
                assert rebound.status_code == 421
                origin = await raw.post(
                    url, json=INIT, headers={**auth, "Origin": "http://evil.example"}
                )
                assert origin.status_code == 403
                # Another local port is another origin (a dev server, a web page).
                other = await raw.post(
                    url, json=INIT, headers={**auth, "Origin": f"http://localhost:{port + 1}"}
                )
                assert other.status_code == 403
                same = await raw.post(
                    url, json=INIT, headers={**auth, "Origin": f"http://127.0.0.1:{port}"}
                )
                assert same.status_code == 200
                allowed = await raw.post(
                    url, json=INIT, headers={**auth, "Origin": "https://app.example.com"}
                )
                assert allowed.status_code == 200
                plain = await raw.post(url, json=INIT, headers=auth)
                assert plain.status_code == 200

    anyio.run(go)


def test_session_ids_never_logged(project: Path) -> None:
    async def go() -> None:
        async with http_server(project, "--log-level", "debug") as url:
            async with httpx.AsyncClient(headers=TEST_AUTH) as raw:
                res = await raw.post(url, json=INIT, headers=HEADERS)
                assert res.status_code == 200
                sid = res.headers["mcp-session-id"]
                await raw.post(
                    url,
                    headers={**HEADERS, "mcp-session-id": sid},
                    json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                )
                await raw.post(
                    url,
                    headers={**HEADERS, "mcp-session-id": sid},
                    json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                )
                await raw.delete(url, headers={**HEADERS, "mcp-session-id": sid})
            await anyio.sleep(0.5)
            assert sid not in stderr_log(project).read_text()

    anyio.run(go)


def test_busy_port_is_one_clean_line(project: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = _run_cli(project, "--transport", "http", "--port", str(port))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in lines[0]
    assert "already in use" in lines[0] and "--port" in lines[0]
    assert "serving" not in done.stderr and "Traceback" not in done.stderr


def test_port_zero_prints_the_chosen_port(project: Path) -> None:
    log = stderr_log(project)
    with open(log, "a") as err:
        proc = subprocess.Popen(
            serve_argv(project, "--transport", "http", "--port", "0", "--log-level", "warning"),
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    try:
        deadline = time.monotonic() + 30
        match = None
        while match is None and time.monotonic() < deadline:
            match = re.search(r"on http://127\.0\.0\.1:(\d+)/mcp", log.read_text())
            time.sleep(0.05)
        assert match is not None, log.read_text()
        port = int(match.group(1))
        assert port != 0
        # The generated token (no --auth-token-env) is shown with the chosen port.
        assert f"URL:    http://127.0.0.1:{port}/mcp" in log.read_text()
        token = re.search(r"Authorization: Bearer (\S+)", log.read_text())
        assert token is not None, log.read_text()
        auth = {**HEADERS, "Authorization": f"Bearer {token.group(1)}"}
        res = httpx.post(f"http://127.0.0.1:{port}/mcp", json=INIT, headers=auth)
        assert res.status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_half_open_connections_time_out(project: Path) -> None:
    async def go() -> None:
        async with http_server(project, "--header-timeout", "0.5") as url:
            port = port_of(url)
            silent = socket.create_connection(("127.0.0.1", port))
            partial = socket.create_connection(("127.0.0.1", port))
            partial.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port)
            try:
                assert await anyio.to_thread.run_sync(_closed_by_server, silent, 5.0)
                assert await anyio.to_thread.run_sync(_closed_by_server, partial, 5.0)
            finally:
                silent.close()
                partial.close()
            # Complete requests are not affected.
            async with era_client(url, MODERN) as c:
                await anyio.sleep(1.0)
                ok = await c.call_tool("echo", {"text": "still"})
                assert ok.structured_content == {"echo": "still"}

    anyio.run(go)


def test_connections_beyond_the_cap_close_the_oldest_unauthenticated(project: Path) -> None:
    """At the cap, a new connection closes the oldest one that has not authenticated
    (issue 22 item 5: silent connections cannot keep clients out)."""

    async def go() -> None:
        async with http_server(project, "--max-connections", "4") as url:
            port = port_of(url)
            await anyio.sleep(0.5)  # the helper's readiness probe has been closed
            held = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
            try:
                await anyio.sleep(0.3)
                extra = socket.create_connection(("127.0.0.1", port))
                try:
                    assert await anyio.to_thread.run_sync(_closed_by_server, held[0], 5.0)
                finally:
                    extra.close()
                # An authenticated client is served while the others are still held.
                async with httpx.AsyncClient(headers=TEST_AUTH) as raw:
                    res = await raw.post(url, json=INIT, headers=HEADERS)
                    assert res.status_code == 200
            finally:
                for s in held:
                    s.close()

    anyio.run(go)
