"""Issue 26 item 3: every connection ``harness serve --transport http`` accepts has
Nagle's algorithm off (TCP_NODELAY). With it on, a response written in two sends (head,
then body) waits about 40 ms for the client's delayed ACK of the first.

The server runs in this process (a thread of its own), so the test reads the option off
the very socket the server accepted."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from pathlib import Path

from harness.serve.http import bind
from harness.serve.mcp import HarnessMCPServer

TOKEN = "nodelay-0123456789abcdefghij"


def _accepted(peer: tuple[str, int]) -> socket.socket | None:
    """The socket of this process whose peer is ``peer`` (the server's end)."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            s = socket.socket(fileno=os.dup(int(fd)))
        except OSError:
            continue
        try:
            if s.type == socket.SOCK_STREAM and s.getpeername() == peer:
                return s
        except OSError:
            pass
        s.close()
    return None


def test_accepted_sockets_have_nagle_off(tmp_path: Path) -> None:
    (tmp_path / "harness.md").write_text("---\nruntime: {isolation: inprocess}\n---\nx\n")
    server = HarnessMCPServer(tmp_path)
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    loop = asyncio.new_event_loop()
    task: list[asyncio.Task[None]] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        task.append(
            loop.create_task(server.run_http(sock, host="127.0.0.1", port=port, tokens=[TOKEN]))
        )
        try:
            loop.run_until_complete(task[0])
        except asyncio.CancelledError:
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        client.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 2\r\n"
            b"Authorization: Bearer " % port + TOKEN.encode() + b"\r\n\r\n{}"
        )
        assert client.recv(4096).startswith(b"HTTP/1.1 ")
        found = None
        deadline = time.monotonic() + 10
        while found is None and time.monotonic() < deadline:
            found = _accepted(client.getsockname())
        assert found is not None
        with found:
            assert found.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        client.close()
        loop.call_soon_threadsafe(task[0].cancel)
        thread.join(timeout=20)
        server.gen.harness.close()


def test_the_listening_socket_says_it_is_tcp() -> None:
    """asyncio turns Nagle off by itself only on sockets whose protocol is TCP; accepted
    sockets inherit the protocol number of the listening one."""
    sock = bind("127.0.0.1", 0)
    with sock:
        assert sock.proto == socket.IPPROTO_TCP


def test_http_serve_starts_its_script_workers_before_the_first_call(tmp_path: Path) -> None:
    """Process isolation: the pool is started in the background when the HTTP server
    starts, so the first callers under load do not wait for worker processes to start
    one after another (the p99 of bench_serve_load at 1 and 8 clients)."""
    import anyio
    from serve_helpers import http_server, processes_with

    root = tmp_path / "p"
    root.mkdir()
    (root / "harness.md").write_text(
        "---\nruntime: {isolation: process}\nlimits: {max_concurrency: 3}\n---\nx\n"
    )

    before = set(processes_with("harness.runtime.worker_main"))

    async def check() -> None:
        async with http_server(root):
            with anyio.fail_after(60):
                while len(set(processes_with("harness.runtime.worker_main")) - before) < 3:
                    await anyio.sleep(0.1)

    anyio.run(check)
