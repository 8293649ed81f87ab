"""Issue 22 item 5: one client of ``harness serve --transport http`` cannot starve the
others.

- Connections that have not authenticated yet have their own small budget: a flood of
  half-open connections without a token does not keep clients with a token out.
- Each identity runs at most ``serve.max_calls_per_identity`` tool calls at once: one
  identity's slow calls do not hold every worker while another's ``echo`` waits.
- A call whose client went away (its connection closed mid-call) is cancelled: the
  command it started stops.
- ``serve.rate_limit`` bounds the tool calls of each identity, with an error naming it.
"""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import anyio
import httpx
import pytest
from serve_helpers import (
    ERAS,
    MODERN,
    add_sleeper,
    era_client,
    http_server,
    processes_with,
    stderr_log,
    tool_text,
    wait_for_log,
)
from test_http_session_binding import auth, call, open_session, rpc_body, text_of

TOKEN_A = "fair-A-0123456789abcdefghij"
TOKEN_B = "fair-B-0123456789abcdefghij"
ENV = {"FAIR_TOKENS": f"{TOKEN_A},{TOKEN_B}"}
AUTH = ("--auth-token-env", "FAIR_TOKENS")
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


def _set(project: Path, old: str, new: str) -> None:
    md = project / "harness.md"
    text = md.read_text()
    assert old in text
    md.write_text(text.replace(old, new))


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def test_half_open_flood_does_not_starve_authenticated_clients(project: Path) -> None:
    """Hundreds of silent or half-sent connections without a token, held open, and
    more opened between the legitimate requests: every legitimate request is served."""

    async def go() -> None:
        async with http_server(project, *AUTH, "--max-connections", "64", env=ENV) as url:
            port = _port(url)
            flood: list[socket.socket] = []
            try:
                for i in range(300):
                    s = socket.create_connection(("127.0.0.1", port))
                    if i % 2:
                        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port)
                    flood.append(s)
                served = 0
                for _ in range(10):
                    for _ in range(20):  # the flood goes on between the requests
                        flood.append(socket.create_connection(("127.0.0.1", port)))
                    async with httpx.AsyncClient(timeout=30) as raw:
                        try:
                            res = await raw.post(url, json=INIT, headers=auth(TOKEN_A))
                        except httpx.TransportError:
                            continue
                        served += res.status_code == 200
                assert served == 10, f"{served} of 10 authenticated requests were served"
            finally:
                for s in flood:
                    s.close()

    anyio.run(go)


def test_one_identity_slow_calls_do_not_block_another(project: Path) -> None:
    """A sends twice as many slow calls as there are workers; B's echo is answered
    while they run (before: it waited for one of A's calls to end)."""
    add_sleeper(project)
    _set(
        project,
        "runtime: {isolation: inprocess}",
        "runtime: {isolation: process}\nlimits: {max_concurrency: 4, max_output_bytes: 2048}",
    )
    _set(project, "limits: {max_output_bytes: 2048}\nexec", "exec")
    marker = f"{uuid.uuid4().int % 10**5 + 3000}.{7}3"
    a_headers = {"Authorization": f"Bearer {TOKEN_A}"}
    b_headers = {"Authorization": f"Bearer {TOKEN_B}"}

    async def go() -> None:
        async with http_server(project, *AUTH, env=ENV) as url:
            async with era_client(url, MODERN, headers=a_headers) as a:
                async with anyio.create_task_group() as tg:
                    for _ in range(8):  # twice the worker pool
                        tg.start_soon(a.call_tool, "sleeper", {"marker": marker})
                    with anyio.fail_after(60):  # A's calls have taken their workers
                        while len(processes_with(f"sleep {marker}")) < 2:
                            await anyio.sleep(0.05)
                        await anyio.sleep(1.0)
                    # Without the limit B waits until one of A's calls ends at its 60 s
                    # timeout, and A's commands are gone by the check below.
                    with anyio.fail_after(120):
                        async with era_client(url, MODERN, headers=b_headers) as b:
                            ok = await b.call_tool("echo", {"text": "not starved"})
                    assert ok.structured_content == {"echo": "not starved"}, tool_text(ok)
                    # B was answered while A's calls were still running.
                    assert processes_with(f"sleep {marker}")
                    tg.cancel_scope.cancel()
            with anyio.fail_after(30):
                while processes_with(f"sleep {marker}"):
                    await anyio.sleep(0.05)

    anyio.run(go)


def test_a_call_whose_client_went_away_is_cancelled(project: Path) -> None:
    """A 2025-era client closes its connection mid-call without notifications/cancelled:
    the command the call started is stopped, long before its own 60 s."""
    add_sleeper(project)
    marker = f"{uuid.uuid4().int % 10**5 + 3000}.{9}1"

    async def go() -> None:
        async with http_server(project, *AUTH, env=ENV) as url:
            async with httpx.AsyncClient(timeout=120) as raw:
                sid = await open_session(raw, url, TOKEN_A)

                async def abandoned() -> None:
                    await raw.post(
                        url, headers=auth(TOKEN_A, sid), json=call("sleeper", {"marker": marker})
                    )

                async with anyio.create_task_group() as tg:
                    tg.start_soon(abandoned)
                    with anyio.fail_after(30):
                        while not processes_with(f"sleep {marker}"):
                            await anyio.sleep(0.05)
                    tg.cancel_scope.cancel()  # the connection is dropped mid-response
            with anyio.fail_after(20):
                while processes_with(f"sleep {marker}"):
                    await anyio.sleep(0.05)
            # The session itself goes on.
            async with httpx.AsyncClient(timeout=30) as raw:
                res = await raw.post(
                    url, headers=auth(TOKEN_A, sid), json=call("echo", {"text": "on"}, id=8)
                )
                assert "on" in text_of(rpc_body(res))

    anyio.run(go)


@pytest.mark.parametrize("mode", ERAS)
def test_rate_limit_per_identity(project: Path, mode: str) -> None:
    _set(
        project,
        "runtime: {isolation: inprocess}",
        "runtime: {isolation: inprocess}\nserve:\n  rate_limit: {calls: 3, per_seconds: 3600}",
    )
    a_headers = {"Authorization": f"Bearer {TOKEN_A}"}
    b_headers = {"Authorization": f"Bearer {TOKEN_B}"}

    async def go() -> None:
        async with http_server(project, *AUTH, env=ENV) as url:
            async with era_client(url, mode, headers=a_headers) as a:
                for i in range(3):
                    ok = await a.call_tool("echo", {"text": str(i)})
                    assert ok.is_error is False, tool_text(ok)
                over = await a.call_tool("echo", {"text": "too many"})
                assert over.is_error is True
                assert "serve.rate_limit" in tool_text(over) and "3" in tool_text(over)
            # Another identity has its own allowance.
            async with era_client(url, mode, headers=b_headers) as b:
                ok = await b.call_tool("echo", {"text": "b"})
                assert ok.structured_content == {"echo": "b"}

    anyio.run(go)


def test_queue_bound_per_identity(project: Path) -> None:
    """One call runs, one waits; the next one is refused, naming the settings."""
    add_sleeper(project)
    _set(
        project,
        "runtime: {isolation: inprocess}",
        "runtime: {isolation: inprocess}\nserve: {max_calls_per_identity: 1, max_queued_calls: 1}",
    )
    marker = f"{uuid.uuid4().int % 10**5 + 3000}.{5}9"
    a_headers = {"Authorization": f"Bearer {TOKEN_A}"}

    async def go() -> None:
        async with http_server(project, *AUTH, env=ENV) as url:
            async with era_client(url, MODERN, headers=a_headers) as a:
                refused: list[str] = []
                async with anyio.create_task_group() as tg:
                    tg.start_soon(a.call_tool, "sleeper", {"marker": marker})
                    with anyio.fail_after(30):
                        while not processes_with(f"sleep {marker}"):
                            await anyio.sleep(0.05)

                    async def another() -> None:
                        res = await a.call_tool("echo", {"text": "queued"})
                        if res.is_error:
                            refused.append(tool_text(res))

                    # Of two more calls, one waits and the other is refused.
                    tg.start_soon(another)
                    tg.start_soon(another)
                    with anyio.fail_after(30):
                        while not refused:
                            await anyio.sleep(0.05)
                    tg.cancel_scope.cancel()
                assert len(refused) == 1
                assert "serve.max_calls_per_identity: 1" in refused[0], refused[0]
                assert "serve.max_queued_calls: 1" in refused[0]
            with anyio.fail_after(30):
                while processes_with(f"sleep {marker}"):
                    await anyio.sleep(0.05)

    anyio.run(go)


def test_serve_settings_are_checked_by_validate(project: Path) -> None:
    import os
    import subprocess
    import sys

    _set(
        project,
        "runtime: {isolation: inprocess}",
        "runtime: {isolation: inprocess}\nserve:\n  max_calls_per_identity: 0\n"
        "  rate_limt: 3\n  rate_limit: {calls: many, per_seconds: -1}\n"
        "  max_sessions_per_identity: 0\n  max_sessions: many",
    )
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "validate", "--root", str(project)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout + done.stderr
    lines = {
        line.split(": error: ")[0].rsplit("/", 1)[-1]: line
        for line in out.splitlines()
        if ": error: " in line
    }
    assert "serve.max_calls_per_identity must be >= 1" in lines["harness.md:4:3"]
    assert 'serve.rate_limt (did you mean "rate_limit"?)' in lines["harness.md:5:3"]
    assert "serve.rate_limit" in lines["harness.md:6:3"]
    assert "serve.rate_limit.calls must be an integer" in out
    assert "serve.rate_limit.per_seconds must be a number of seconds > 0" in out
    assert "serve.max_sessions_per_identity must be >= 1" in lines["harness.md:7:3"]
    assert "serve.max_sessions must be an integer" in lines["harness.md:8:3"]


def test_a_queued_call_whose_client_went_away_never_starts(project: Path) -> None:
    """With one slot per identity, call 2 waits behind call 1; its connection closes
    while it waits. Once call 1 ends, call 3 runs: call 2 never did."""
    add_sleeper(project)
    _set(
        project,
        "runtime: {isolation: inprocess}",
        "runtime: {isolation: inprocess}\nserve: {max_calls_per_identity: 1}",
    )
    first = f"{uuid.uuid4().int % 10**5 + 3000}.{3}7"
    audit = project / ".harness" / "state" / "audit.jsonl"

    def started(tool: str) -> int:
        if not audit.exists():
            return 0
        return sum(
            1
            for line in audit.read_text().splitlines()
            if '"tool.validate"' in line and f'"tool": "{tool}"' in line.replace('":"', '": "')
        )

    async def go() -> None:
        log = stderr_log(project)
        async with http_server(project, *AUTH, "--log-level", "debug", env=ENV) as url:
            async with httpx.AsyncClient(timeout=120) as raw:
                sid = await open_session(raw, url, TOKEN_A)

                async def post(body: dict[str, object]) -> None:
                    await raw.post(url, headers=auth(TOKEN_A, sid), json=body)

                async with anyio.create_task_group() as one:
                    one.start_soon(post, call("sleeper", {"marker": first}, id=21))
                    with anyio.fail_after(30):
                        while not processes_with(f"sleep {first}"):
                            await anyio.sleep(0.05)
                    start = len(log.read_text())
                    async with anyio.create_task_group() as two:
                        two.start_soon(post, call("add", {"a": 1, "b": 2}, id=22))
                        await wait_for_log(log, "waits for a slot", start)
                        two.cancel_scope.cancel()  # call 2 waits; its connection closes
                    one.cancel_scope.cancel()  # call 1's too: it is stopped
                with anyio.fail_after(30):
                    while processes_with(f"sleep {first}"):
                        await anyio.sleep(0.05)
                res = await raw.post(
                    url, headers=auth(TOKEN_A, sid), json=call("echo", {"text": "3"}, id=23)
                )
                assert "3" in text_of(rpc_body(res))
            assert started("echo") == 1 and started("sleeper") == 1
            assert started("add") == 0, "the abandoned queued call ran"

    anyio.run(go)


_FLOOD = """
import socket, sys, threading
port, stop = int(sys.argv[1]), threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
held = []
for _ in range(200_000):  # bounded; stops as soon as the test closes stdin
    if stop.is_set():
        break
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.send(b"POST /mcp HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n")  # half-sent, no token
        held.append(s)
    except OSError:
        continue
    if len(held) > 200:
        for old in held[:100]:
            old.close()
        del held[:100]
"""


@pytest.mark.parametrize("cap", ["64", "512"])
def test_continuous_connect_flood_does_not_starve_authenticated_clients(
    project: Path, cap: str
) -> None:
    """Two processes open half-sent connections without a token as fast as they can,
    all the time, from the same loopback address; every legitimate request is served
    (before: 2 of 20 at --max-connections 64, 9 of 20 at 512: a legitimate connection
    is pending until its headers are read, and the flood evicted it first)."""
    import subprocess
    import sys

    async def go() -> None:
        async with http_server(project, *AUTH, "--max-connections", cap, env=ENV) as url:
            port = _port(url)
            floods = [
                subprocess.Popen(
                    [sys.executable, "-c", _FLOOD, str(port)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for _ in range(2)
            ]
            try:
                await anyio.sleep(1.0)  # the flood is under way
                served = 0
                for _ in range(20):
                    async with httpx.AsyncClient(timeout=30) as raw:
                        try:
                            res = await raw.post(url, json=INIT, headers=auth(TOKEN_A))
                        except httpx.TransportError:
                            continue
                        served += res.status_code == 200
                assert all(f.poll() is None for f in floods), "the flood stopped early"
                assert served == 20, f"{served} of 20 authenticated requests were served"
            finally:
                for f in floods:
                    f.communicate(timeout=30)

    anyio.run(go)


async def _alive(raw: httpx.AsyncClient, url: str, token: str, sids: list[str]) -> list[bool]:
    """Which sessions the server still knows: a ping answers 200, a closed one 404."""
    out = []
    for sid in sids:
        res = await raw.post(
            url, headers=auth(token, sid), json={"jsonrpc": "2.0", "id": 9, "method": "ping"}
        )
        assert res.status_code in (200, 404), res.text
        out.append(res.status_code == 200)
    return out


def test_sessions_per_identity_are_bounded(project: Path) -> None:
    """200 initializes from one identity keep at most serve.max_sessions_per_identity
    (default 32) sessions open: the most recent ones; older ids answer 404 (before:
    all 200 stayed open, ~39 KB each, until 30 minutes idle). Another identity's
    session is untouched."""

    async def go() -> None:
        async with http_server(project, *AUTH, env=ENV) as url:
            async with httpx.AsyncClient(timeout=30) as raw:
                b_sid = await open_session(raw, url, TOKEN_B)
                sids = [await open_session(raw, url, TOKEN_A) for _ in range(200)]
                alive = await _alive(raw, url, TOKEN_A, sids)
                assert sum(alive) == 32, f"{sum(alive)} of A's 200 sessions are open"
                assert all(alive[-32:]), "the 32 most recent sessions stay open"
                assert await _alive(raw, url, TOKEN_B, [b_sid]) == [True]
        assert "serve.max_sessions_per_identity" in stderr_log(project).read_text()

    anyio.run(go)


def test_sessions_server_wide_are_bounded(project: Path) -> None:
    """serve.max_sessions bounds the sessions of all identities together: one more
    closes the least recently used session of the identity holding the most."""
    _set(project, "limits:", "serve: {max_sessions_per_identity: 3, max_sessions: 4}\nlimits:")

    async def go() -> None:
        async with http_server(project, *AUTH, env=ENV) as url:
            async with httpx.AsyncClient(timeout=30) as raw:
                a = [await open_session(raw, url, TOKEN_A) for _ in range(3)]
                await _alive(raw, url, TOKEN_A, [a[0]])  # a[0] used: a[1] is A's LRU
                b = [await open_session(raw, url, TOKEN_B) for _ in range(2)]
                assert await _alive(raw, url, TOKEN_A, a) == [True, False, True]
                assert await _alive(raw, url, TOKEN_B, b) == [True, True]

    anyio.run(go)
