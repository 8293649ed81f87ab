"""Network for a sandboxed server, through the same rules as ``http.*``.

The sandbox has no network of its own. When a server declares
``network: {allowed_domains: [...]}``, harness runs an HTTP proxy on a Unix socket that
is bound into the sandbox; a small relay inside the sandbox (``relay.py``, run with the
system ``python3``) listens on ``127.0.0.1:PORT`` there and passes each connection to
the socket; the server gets ``HTTP(S)_PROXY`` pointing at the relay.

Each connection carries one request. Its head is parsed by h11 (strict HTTP/1.1) after
a byte check h11 does not make: every line ends with CRLF (a bare LF or CR is refused:
a lenient origin would read a second header or a second request in it) and no line
is folded. :func:`allowed_target` alone decides where a request may go, whatever its
form: ``CONNECT host:port`` opens a tunnel to port 443 or a port listed as
``host:port`` in ``allowed_domains``; an absolute ``http://`` request goes to port 80
or a listed port, its ``Host`` header naming the same host and port; anything else is
refused. The host is checked with the checks of ``http.*`` (``runtime/builtins/net.py``:
listed in ``allowed_domains``; a name resolving to a loopback, private or link-local
address refused unless listed exactly). :func:`_dial` connects only to what
:func:`allowed_target` returned. A plain request is forwarded as a head rebuilt from
the parsed one (hop-by-hop headers dropped, ``Connection: close``) and exactly its
``Content-Length`` body: nothing the client sends after it was checked, so nothing
after it is passed on. A program that ignores the proxy variables gets no network.

Refusals are logged (``harness.upstream``) and the last :data:`REFUSALS_KEPT` kept in
``EgressProxy.refused`` (``refused_dropped`` counts the older ones).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h11

log = logging.getLogger("harness.upstream")
RELAY = str(Path(__file__).with_name("relay.py"))
INSIDE = "/run/harness-egress"  # where the socket folder and the relay are in the sandbox
PORT = 3128
_MAX_HEAD = 16384
REFUSALS_KEPT = 256  # refusal messages kept per proxy (a ring: the newest)
_REFUSAL_CHARS = 500  # each cut to this length
TUNNEL_PORTS = (443,)  # CONNECT: an entry without a port opens these
HTTP_PORTS = (80,)  # plain http://: an entry without a port opens these
# A bare CR or LF, or a folded line (obsolete line folding), anywhere in the head.
_BAD_LINE_END = re.compile(rb"(?<!\r)\n|\r(?!\n)|\r\n[ \t]")


class Refused(Exception):
    """A request the proxy does not pass on: HTTP ``status`` and why."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


@dataclass(frozen=True, slots=True)
class Target:
    """Where a request may go: made only by :func:`allowed_target`."""

    host: str  # as checked: lower case, no trailing dot, IPv6 without brackets
    port: int
    ip: Any  # the checked address (ipaddress.IPv4Address | IPv6Address)
    tunnel: bool  # CONNECT

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def allowed_target(server: str, request: h11.Request, allowed: tuple[str, ...]) -> Target:
    """The one decision on where ``request`` may go (every method, every target form);
    raises :class:`Refused`. ``allowed`` is the server's ``allowed_domains``."""
    import httpx

    from harness.errors import BuiltinError
    from harness.runtime.builtins.net import _check

    method = request.method.decode("ascii").upper()
    target = request.target.decode("ascii")
    tunnel = method == "CONNECT"
    if tunnel:
        scheme, defaults = "https", TUNNEL_PORTS
        if "/" in target or "@" in target or not re.fullmatch(r".+:\d{1,5}", target):
            raise Refused(400, f'CONNECT needs a "host:port" target, got "{target}"')
        url_text = f"https://{target}/"
    elif target.lower().startswith("http://"):
        scheme, defaults, url_text = "http", HTTP_PORTS, target
    else:
        raise Refused(
            400,
            f'only CONNECT host:port and absolute http:// requests are proxied, got "{method} '
            f'{target[:200]}"',
        )
    try:
        url = httpx.URL(url_text)
    except (httpx.InvalidURL, ValueError) as exc:
        raise Refused(400, f'invalid request target "{target[:200]}": {exc}') from None
    if url.userinfo:
        raise Refused(400, "a request target with user information is not proxied")
    host = url.raw_host.decode("ascii").lower().rstrip(".")
    port = url.port or (443 if scheme == "https" else 80)
    _same_host(request, host, port, 443 if tunnel else 80)
    try:
        ip = _check(f'upstream server "{server}"', url, allowed, defaults)
    except BuiltinError as exc:
        raise Refused(403, str(exc)) from None
    return Target(host=host.strip("[]"), port=port, ip=ip, tunnel=tunnel)


def _same_host(request: h11.Request, host: str, port: int, default: int) -> None:
    """Refuse a ``Host`` header that names another host or port than the target."""
    for name, value in request.headers:
        if name != b"host":
            continue
        text = value.decode("latin-1").strip().lower()
        named, _c, port_text = text.rpartition(":") if not text.endswith("]") else ("", "", "")
        if not _c or not port_text.isdigit() or (named.count(":") and not named.endswith("]")):
            named, port_text = text, str(default)
        if named.strip("[]").rstrip(".") != host.strip("[]") or int(port_text) != port:
            raise Refused(
                403,
                f'the Host header "{text}" is not the target of the request '
                f'"{request.target.decode("ascii")[:200]}"',
            )


async def _dial(target: Target) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The only connection the proxy opens: to an address :func:`allowed_target` checked."""
    if not isinstance(target, Target):  # pragma: no cover - the type says it; make sure
        raise TypeError("_dial takes a Target from allowed_target()")
    return await asyncio.wait_for(asyncio.open_connection(str(target.ip), target.port), 30)


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
        self.refused: collections.deque[str] = collections.deque(maxlen=REFUSALS_KEPT)
        self.refused_dropped = 0  # refusals no longer in ``refused``

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
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        try:
            request = await asyncio.wait_for(_read_request(reader, conn), 30)
            target = allowed_target(self.server, request, self.allowed)
            head = b"" if target.tunnel else _forward_head(request, target)
            up_reader, up_writer = await _dial(target)
        except Refused as exc:
            await self._refuse(writer, exc.status, str(exc))
            return
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            writer.close()
            return
        except OSError as exc:  # unreachable: tell the client
            await self._refuse(writer, 502, f'upstream server "{self.server}": {exc}')
            return
        if target.tunnel:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            early, _closed = conn.trailing_data  # sent before the answer: inside the tunnel
            up_writer.write(early)
            upload = _pipe(reader, up_writer)
        else:
            # One checked request only: its head, rebuilt, then exactly its body; what
            # the client sends after that was never checked and is not passed on.
            up_writer.write(head)
            upload = _body(reader, conn, up_writer)
        await asyncio.gather(upload, _pipe(up_reader, writer), return_exceptions=True)

    async def _refuse(self, writer: asyncio.StreamWriter, status: int, why: str) -> None:
        if len(self.refused) == REFUSALS_KEPT:
            self.refused_dropped += 1
        self.refused.append(why[:_REFUSAL_CHARS])
        log.info('upstream server "%s": network request refused: %s', self.server, why)
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
        b"host",  # written from the checked target
    )
)


async def _read_request(reader: asyncio.StreamReader, conn: h11.Connection) -> h11.Request:
    """The request head, parsed by h11 after the line-ending check; raises Refused."""
    head = b""
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            too_big = "too long" in str(exc) or "exceeded" in str(exc)
            raise Refused(431 if too_big else 400, f"malformed request: {exc}") from None
        if isinstance(event, h11.Request):
            return event
        if event is not h11.NEED_DATA:
            raise Refused(400, "malformed request: no request head")
        data = await reader.read(65536)
        if not data:
            raise asyncio.IncompleteReadError(head, None)
        head += data
        end = head.find(b"\r\n\r\n")
        checked = head[: end + 4] if end >= 0 else head.removesuffix(b"\r")  # LF may follow
        if _BAD_LINE_END.search(checked):
            raise Refused(400, "malformed request: every header line must end with CRLF")
        if len(head) > _MAX_HEAD and end < 0:
            raise Refused(431, "request head too large")
        conn.receive_data(data)


def _forward_head(request: h11.Request, target: Target) -> bytes:
    """The head sent to the origin, rebuilt from the parsed request. Refuses (Refused)
    a body framed by anything but ``Content-Length``: the proxy must know where the
    checked request ends."""
    lines = [
        b"%s %s HTTP/%s" % (request.method, request.target, request.http_version),
        b"Host: " + target.authority.encode("ascii"),
    ]
    for name, value in request.headers.raw_items():
        key = name.lower()
        if key == b"transfer-encoding":
            raise Refused(
                400, "a request body with Transfer-Encoding is not proxied; send Content-Length"
            )
        if key not in _HOP_HEADERS:
            lines.append(name + b": " + value)
    lines += [b"Connection: close", b"", b""]
    return b"\r\n".join(lines)


async def _body(reader: asyncio.StreamReader, conn: h11.Connection, writer: Any) -> None:
    """The request body h11 frames (Content-Length), to ``writer`` (left open)."""
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            return
        if isinstance(event, h11.Data):
            writer.write(bytes(event.data))
            await writer.drain()
        elif event is h11.NEED_DATA:
            data = await reader.read(65536)
            if not data:
                return
            conn.receive_data(data)
        else:
            return  # EndOfMessage, or anything after it: never forwarded


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(Exception):
            writer.close()
