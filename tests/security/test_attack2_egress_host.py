"""Second attack review: the egress proxy of sandboxed upstream servers checks the host
of a plain ``http://`` request, so the request it forwards must go to that host only: a
``Host`` header naming another host (a virtual host behind the allowed address) is
refused, and a second request on the same connection (never checked) is not passed:
the forwarded request says ``Connection: close``."""

from __future__ import annotations

import asyncio

from harness.upstream.egress import EgressProxy


async def _backend(seen: list[bytes]) -> tuple[asyncio.AbstractServer, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = b""
        try:
            while chunk := await asyncio.wait_for(reader.read(65536), 1.0):
                data += chunk
                if data.count(b"\r\n\r\n") and not seen:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    await writer.drain()
        except TimeoutError:
            pass
        seen.append(data)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _send(proxy: EgressProxy, request: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(proxy.socket)
    writer.write(request)
    await writer.drain()
    got = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), 2.0):
            got += chunk
    except TimeoutError:
        pass
    writer.close()
    return got


def _run(request_of: object) -> tuple[bytes, list[bytes]]:
    async def main() -> tuple[bytes, list[bytes]]:
        seen: list[bytes] = []
        server, port = await _backend(seen)
        proxy = EgressProxy("s", (f"127.0.0.1:{port}",))
        await proxy.start()
        try:
            answer = await _send(proxy, request_of(port))  # type: ignore[operator]
            await asyncio.sleep(1.2)
        finally:
            await proxy.stop()
            server.close()
        return answer, seen

    return asyncio.run(main())


def test_a_host_header_naming_another_host_is_refused() -> None:
    answer, seen = _run(
        lambda port: (
            f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: internal-admin.example\r\n\r\n"
        ).encode()
    )
    assert answer.startswith(b"HTTP/1.1 403"), answer
    assert b"internal-admin.example" in answer
    assert not any(b"internal-admin" in s for s in seen)


def test_a_second_request_on_the_connection_is_never_checked_so_never_sent() -> None:
    answer, seen = _run(
        lambda port: (
            f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Connection: keep-alive\r\n\r\n"
            "GET http://internal-admin.example/ HTTP/1.1\r\nHost: internal-admin.example\r\n"
            "\r\n"
        ).encode()
    )
    assert b"200 OK" in answer
    assert seen and all(b"internal-admin" not in s for s in seen), seen
    assert b"connection: close" in seen[0].lower() and b"keep-alive" not in seen[0].lower()


def test_the_right_host_still_passes() -> None:
    answer, seen = _run(
        lambda port: (
            f"GET http://127.0.0.1:{port}/x HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
        ).encode()
    )
    assert b"200 OK" in answer and seen[0].startswith(b"GET http://127.0.0.1:")
