"""Third attack review, item 10: the egress proxy of sandboxed upstream servers.

A bare LF inside a header line passed the ``Host`` check (the origin read a second
header or a second request the proxy never checked); ``CONNECT`` opened a raw tunnel
to any port of an allowed host (mail, databases); every refusal was kept in a list
that grew without bound. Requests are now parsed by h11 (strict HTTP/1.1), one
function (:func:`harness.upstream.egress.allowed_target`) decides every target, tunnels
and plain requests go to the default port (443 / 80) or a port listed as
``host:port``, and the refusal log is a ring buffer with a count of what it dropped.
Only loopback addresses: local servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

import harness
from harness.upstream.egress import REFUSALS_KEPT, EgressProxy


async def _backend(seen: list[bytes]) -> tuple[asyncio.AbstractServer, int]:
    """A lenient origin (accepts bare LF like many servers do) recording all it got."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = b""
        try:
            while chunk := await asyncio.wait_for(reader.read(65536), 1.0):
                data += chunk
                if b"\n\n" in data.replace(b"\r\n", b"\n") and b"200 OK" not in data:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        seen.append(data)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _send(proxy: EgressProxy, request: bytes, then: bytes = b"") -> bytes:
    reader, writer = await asyncio.open_unix_connection(proxy.socket)
    writer.write(request)
    await writer.drain()
    got = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), 1.5):
            got += chunk
            if then and b"200 Connection established" in got:
                writer.write(then)
                await writer.drain()
                then = b""
    except (TimeoutError, ConnectionError):
        pass
    writer.close()
    return got


def _run(
    request_of: Callable[[int], bytes],
    allowed_of: Callable[[int], tuple[str, ...]] = lambda port: (f"127.0.0.1:{port}",),
    then: bytes = b"",
) -> tuple[bytes, list[bytes]]:
    async def main() -> tuple[bytes, list[bytes]]:
        seen: list[bytes] = []
        server, port = await _backend(seen)
        proxy = EgressProxy("s", allowed_of(port))
        await proxy.start()
        try:
            answer = await _send(proxy, request_of(port), then)
            await asyncio.sleep(1.2)
        finally:
            await proxy.stop()
            server.close()
        return answer, seen

    return asyncio.run(main())


def _nothing_foreign(seen: list[bytes]) -> bool:
    return all(b"internal-admin" not in s for s in seen)


def test_a_bare_lf_cannot_hide_a_second_host_header() -> None:
    answer, seen = _run(
        lambda port: (
            f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "X-Note: a\nHost: internal-admin.example\r\n\r\n"
        ).encode()
    )
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert _nothing_foreign(seen), seen


def test_a_bare_lf_cannot_smuggle_a_second_request() -> None:
    answer, seen = _run(
        lambda port: (
            f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "X-Note: a\n\nGET http://internal-admin.example/ HTTP/1.1\n"
            "Host: internal-admin.example\r\n\r\n"
        ).encode()
    )
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert _nothing_foreign(seen), seen


def test_a_bare_lf_ending_the_head_is_refused() -> None:
    answer, seen = _run(
        lambda port: (
            f"GET http://127.0.0.1:{port}/ HTTP/1.1\nHost: internal-admin.example\n\n"
            f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
        ).encode()
    )
    assert not answer.startswith(b"HTTP/1.1 200"), answer
    assert _nothing_foreign(seen), seen


def test_a_request_pipelined_after_a_body_is_never_sent() -> None:
    answer, seen = _run(
        lambda port: (
            f"POST http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Length: 5\r\n\r\nhello"
            "GET http://internal-admin.example/ HTTP/1.1\r\nHost: internal-admin.example\r\n"
            "\r\n"
        ).encode()
    )
    assert b"200 OK" in answer, answer
    assert len(seen) == 1 and seen[0].endswith(b"\r\n\r\nhello"), seen
    assert _nothing_foreign(seen), seen


def test_the_forwarded_head_is_rebuilt_not_copied() -> None:
    answer, seen = _run(
        lambda port: (
            f"GET http://127.0.0.1:{port}/x HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
            "X-Folded: a\r\n b\r\n\r\n"
        ).encode()
    )
    # Obsolete line folding is one way to hide a header from a lenient checker: refused.
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert seen == [] or seen == [b""], seen


def test_connect_to_a_mail_or_database_port_of_an_allowed_host_is_refused() -> None:
    for port in (25, 5432):
        answer, seen = _run(
            lambda _p, port=port: (
                f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
            ),
            allowed_of=lambda _p: ("127.0.0.1",),
        )
        assert answer.startswith(b"HTTP/1.1 403"), answer
        assert f"port {port}".encode() in answer and b"127.0.0.1:" in answer, answer


def test_connect_to_an_undeclared_port_never_opens_a_tunnel() -> None:
    answer, seen = _run(
        lambda port: (
            f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        ),
        allowed_of=lambda _p: ("127.0.0.1",),
        then=b"EHLO attacker\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 403"), answer
    assert b"EHLO" not in b"".join(seen)


def test_connect_to_a_declared_port_opens_the_tunnel() -> None:
    answer, seen = _run(
        lambda port: (
            f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        ),
        then=b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 200 Connection established"), answer
    assert b"200 OK" in answer and seen and seen[0].startswith(b"GET / HTTP/1.1")


def test_plain_http_to_an_undeclared_port_is_refused() -> None:
    answer, seen = _run(
        lambda port: (
            f"POST http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Length: 16\r\n\r\nEHLO attacker\r\n\r\n"
        ).encode(),
        allowed_of=lambda _p: ("127.0.0.1",),
    )
    assert answer.startswith(b"HTTP/1.1 403"), answer
    assert seen == [], seen


class _Writer:
    """The client end of one connection, in memory (20,000 sockets would only add time)."""

    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None


def test_twenty_thousand_refusals_keep_a_bounded_log() -> None:
    async def main() -> EgressProxy:
        proxy = EgressProxy("s", ("127.0.0.1",))
        try:
            for i in range(20000):
                host = f"evil-{i}.invalid:443"
                reader = asyncio.StreamReader()
                reader.feed_data(f"CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
                reader.feed_eof()
                writer = _Writer()
                await proxy._handle(reader, writer)  # type: ignore[arg-type]
                assert writer.data.startswith(b"HTTP/1.1 403"), writer.data
        finally:
            await proxy.stop()
        return proxy

    proxy = asyncio.run(main())
    assert len(proxy.refused) == REFUSALS_KEPT
    assert proxy.refused_dropped == 20000 - REFUSALS_KEPT
    assert "evil-19999.invalid" in proxy.refused[-1]  # the newest are kept


def test_validate_names_an_allowed_domains_entry_with_a_bad_port(tmp_path: Path) -> None:
    (tmp_path / ".harness" / "servers").mkdir(parents=True)
    (tmp_path / "harness.md").write_text(
        '---\nnetwork: {allowed_domains: ["api.example.com:99999", "db.example.com:5432"]}\n'
        "---\nA test project.\n"
    )
    (tmp_path / ".harness" / "servers" / "s.md").write_text(
        '---\ncommand: [python3, s.py]\nnetwork: {allowed_domains: ["example.com:http"]}\n'
        "---\nA server.\n"
    )
    problems = [p for p in harness.check(tmp_path) if p.severity == "error"]
    where = {(p.path, p.message.split(" has ")[0]) for p in problems}
    assert ("harness.md", 'config network.allowed_domains entry "api.example.com:99999"') in where
    assert (
        ".harness/servers/s.md",
        'server "s" network.allowed_domains entry "example.com:http"',
    ) in where
    assert not any("db.example.com" in p.message for p in problems)


def test_http_builtins_honour_a_port_entry() -> None:
    import httpx

    from harness.errors import BuiltinError
    from harness.runtime.builtins.net import _check

    allowed = ("127.0.0.1:8080", "localhost")
    assert str(_check("http.get", httpx.URL("http://127.0.0.1:8080/"), allowed)) == "127.0.0.1"
    with pytest.raises(BuiltinError, match='port 8081 of IP address "127.0.0.1" is not allowed'):
        _check("http.get", httpx.URL("http://127.0.0.1:8081/"), allowed)
    # An entry without a port keeps opening any port for http.* (the proxy: 80 and 443).
    assert str(_check("http.get", httpx.URL("http://localhost:8081/"), allowed)).startswith(
        ("127.", "::1")
    )


def test_a_request_split_across_many_reads_still_passes() -> None:
    async def main() -> tuple[bytes, list[bytes]]:
        seen: list[bytes] = []
        server, port = await _backend(seen)
        proxy = EgressProxy("s", (f"127.0.0.1:{port}",))
        await proxy.start()
        try:
            reader, writer = await asyncio.open_unix_connection(proxy.socket)
            request = (
                f"GET http://127.0.0.1:{port}/x HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Accept: */*\r\n\r\n"
            ).encode()
            for i in range(0, len(request), 3):  # CR and LF land in different reads
                writer.write(request[i : i + 3])
                await writer.drain()
                await asyncio.sleep(0.01)
            answer = b""
            try:
                while chunk := await asyncio.wait_for(reader.read(65536), 1.5):
                    answer += chunk
            except TimeoutError:
                pass
            writer.close()
            await asyncio.sleep(1.2)
        finally:
            await proxy.stop()
            server.close()
        return answer, seen

    answer, seen = asyncio.run(main())
    assert b"200 OK" in answer, answer
    assert seen and seen[0].startswith(b"GET http://127.0.0.1:")
