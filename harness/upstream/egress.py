"""Network for a sandboxed server, through the same rules as ``http.*``.

The sandbox has no network of its own. When a server declares
``network: {allowed_domains: [...]}``, harness runs an HTTP proxy on a Unix socket that
is bound into the sandbox; a small relay inside the sandbox (``relay.py``, run with the
system ``python3``) listens on ``127.0.0.1:PORT`` there and passes each connection to
the socket; the server gets ``HTTP(S)_PROXY`` pointing at the relay. The proxy checks
every ``CONNECT host:port`` (and plain ``http://`` request) with the checks of
``http.*`` (``runtime/builtins/net.py``): the host must be in ``allowed_domains``, and a
name resolving to a loopback, private or link-local address is refused unless listed
exactly. A program that ignores the proxy variables gets no network at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger("harness.upstream")
RELAY = str(Path(__file__).with_name("relay.py"))
INSIDE = "/run/harness-egress"  # where the socket folder and the relay are in the sandbox
PORT = 3128
_MAX_HEAD = 16384


class EgressProxy:
    """One proxy per sandboxed server with ``allowed_domains``, on the upstream loop."""

    def __init__(self, server: str, allowed: tuple[str, ...]) -> None:
        self.server = server
        self.allowed = allowed
        self.folder = tempfile.mkdtemp(prefix="harness-egress-")
        os.chmod(self.folder, 0o700)
        self.socket = os.path.join(self.folder, "proxy.sock")
        shutil.copyfile(RELAY, os.path.join(self.folder, "relay.py"))
        self._server: asyncio.AbstractServer | None = None
        self.refused: list[str] = []

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._handle, path=self.socket)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        shutil.rmtree(self.folder, ignore_errors=True)

    def env(self) -> dict[str, str]:
        url = f"http://127.0.0.1:{PORT}"
        return {
            "HTTPS_PROXY": url,
            "HTTP_PROXY": url,
            "https_proxy": url,
            "http_proxy": url,
            "ALL_PROXY": url,
            "NO_PROXY": "",
            "no_proxy": "",
        }

    def bwrap_args(self) -> list[str]:
        return ["--bind", self.folder, INSIDE]

    def wrap(self, argv: list[str], python: str = "python3") -> list[str]:
        """``argv`` started after the relay listens inside the sandbox."""
        script = (
            f"{python} {INSIDE}/relay.py {INSIDE}/proxy.sock {PORT} /tmp/.egress-ready & "
            "i=0; while [ ! -e /tmp/.egress-ready ] && [ $i -lt 500 ]; do sleep 0.01; "
            'i=$((i+1)); done; exec "$@"'
        )
        return ["/bin/sh", "-c", script, "sh", *argv]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            writer.close()
            return
        if len(head) > _MAX_HEAD:
            await self._refuse(writer, 431, "request head too large")
            return
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split()
        if len(parts) != 3:
            await self._refuse(writer, 400, "bad request line")
            return
        method, target, _version = parts
        if method.upper() == "CONNECT":
            host, _, port_text = target.rpartition(":")
            url, rest = f"https://{host}:{port_text}/", b""
        elif target.startswith("http://"):
            url = target
            try:
                rest, body_size = _one_request(head, url)
            except ValueError as exc:
                self.refused.append(str(exc))
                await self._refuse(writer, 403, str(exc))
                return
        else:
            await self._refuse(writer, 400, "only CONNECT and http:// requests are proxied")
            return
        try:
            ip, port = self._check(url)
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(str(ip), port), 30
            )
        except Exception as exc:  # noqa: BLE001 - refused or unreachable: tell the client
            self.refused.append(str(exc))
            log.info('upstream server "%s": network request refused: %s', self.server, exc)
            await self._refuse(writer, 403, str(exc))
            return
        if method.upper() == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            upload = _pipe(reader, up_writer)
        else:
            # One checked request only: its head, then exactly its body; what the
            # client sends after that was never checked and is not passed on.
            up_writer.write(rest)
            upload = _copy(reader, up_writer, body_size)
        await asyncio.gather(upload, _pipe(up_reader, writer), return_exceptions=True)

    def _check(self, url: str) -> tuple[object, int]:
        import httpx

        from harness.runtime.builtins.net import _check

        parsed = httpx.URL(url)
        ip = _check(f'upstream server "{self.server}"', parsed, self.allowed)
        return ip, parsed.port or (443 if parsed.scheme == "https" else 80)

    async def _refuse(self, writer: asyncio.StreamWriter, status: int, why: str) -> None:
        body = why.encode("utf-8", "replace")
        writer.write(
            f"HTTP/1.1 {status} Refused\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        with contextlib.suppress(Exception):
            await writer.drain()
        writer.close()


# Dropped from a forwarded plain-http request (hop-by-hop, or steering a proxy); the
# request is sent with "Connection: close" instead.
_HOP_HEADERS = frozenset(
    (
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"upgrade",
        b"trailer",
        b"proxy-authorization",
        b"proxy-authenticate",
    )
)


def _one_request(head: bytes, url: str) -> tuple[bytes, int]:
    """The head of a plain-http request to forward (hop-by-hop headers dropped,
    ``Connection: close`` added) and the size of its body. Refuses (ValueError) a
    ``Host`` header naming another host than the checked URL, and a body framed by
    anything but ``Content-Length``: the proxy must know where the checked request ends."""
    import httpx

    parsed = httpx.URL(url)
    port = parsed.port or 80
    authority = parsed.raw_host.decode("ascii").lower().rstrip(".")
    lines = head.split(b"\r\n")
    out, size = [lines[0]], 0
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(b":")
        key = name.strip().lower()
        if not sep or name != name.strip():
            raise ValueError("malformed request header line")
        text = value.strip().decode("latin-1")
        if key == b"host":
            host, _c, port_text = (
                text.lower().rpartition(":") if not text.endswith("]") else (text.lower(), "", "")
            )
            if not _c or not port_text.isdigit():
                host, port_text = text.lower(), str(80)
            if host.strip("[]").rstrip(".") != authority.strip("[]") or int(port_text) != port:
                raise ValueError(
                    f'the Host header "{text}" is not the host of the checked URL "{url}"'
                )
        elif key == b"transfer-encoding":
            raise ValueError(
                "a request body with Transfer-Encoding is not proxied; send Content-Length"
            )
        elif key == b"content-length":
            if not text.isdigit() or (size and int(text) != size):
                raise ValueError(f'invalid Content-Length "{text}"')
            size = int(text)
        if key in _HOP_HEADERS:
            continue
        out.append(line)
    out += [b"Connection: close", b"", b""]
    return b"\r\n".join(out), size


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, size: int) -> None:
    """Exactly ``size`` bytes from ``reader`` to ``writer`` (the write side stays open)."""
    while size > 0:
        data = await reader.read(min(size, 65536))
        if not data:
            return
        writer.write(data)
        await writer.drain()
        size -= len(data)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(Exception):
            writer.close()
