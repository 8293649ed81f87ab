"""What ``harness serve --transport http`` puts in front of the MCP app.

- Bearer tokens (``--auth-token-env NAME``): every request must carry
  ``Authorization: Bearer <token>``; tokens are compared in constant time. The
  variable may hold several tokens separated by commas: each is its own identity, and
  spilled outputs, the cache and every ``Mcp-Session-Id`` are bound to it (another
  identity presenting a session id gets the answer of an unknown one).
- Host and Origin checks (DNS rebinding) on for every bind address: the Host must be
  the address served (or an ``--allowed-host``); a browser Origin must be this very
  server (scheme, host and port) or an ``--allowed-origin``. Requests without an
  Origin (every non-browser client) pass.
- Connection limits: :mod:`harness.serve.connections`.
- The listening socket is bound here, so a busy port is one clear error and
  ``--port 0`` resolves to the port actually chosen.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import socket
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessError

log = logging.getLogger("harness.serve")

IDENTITY_KEY = "harness.identity"
GONE_KEY = "harness.gone"
DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_MAX_CONNECTIONS = 512

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ServeError(HarnessError):
    """The server cannot start as asked (exit status 1)."""

    exit_code = 1


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_identity(token: str) -> str:
    """The identity of a bearer token: a digest, never the token itself."""
    return "token:" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:16]


def parse_tokens(raw: str, name: str) -> list[str]:
    tokens = [t.strip() for t in raw.split(",") if t.strip()]
    if not tokens:
        raise ServeError(
            f'--auth-token-env: the environment variable "{name}" is empty; put '
            "the bearer token (or several, separated by commas) in it"
        )
    short = [t for t in tokens if len(t) < 16]
    if short:
        raise ServeError(
            f'--auth-token-env: a token in "{name}" has {len(short[0])} '
            "characters; use at least 16 (e.g. python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')"
        )
    return tokens


def tokens_for(host: str, env_name: str | None, no_auth: bool) -> tuple[list[str], bool]:
    """The bearer tokens an HTTP server on ``host`` requires, and whether they were
    generated here (no ``--auth-token-env``): a token on every bind address unless
    ``--no-auth``, which a non-loopback address refuses (issue 22 item 9)."""
    import os
    import secrets

    if no_auth:
        if env_name:
            raise ServeError(
                "--no-auth and --auth-token-env contradict each other; keep one of them"
            )
        if not is_loopback(host):
            raise ServeError(
                f"--no-auth is allowed on a loopback --host only (127.0.0.1, ::1, "
                f"localhost), not {host}: anyone who can reach it could call every tool. "
                "Drop --no-auth (a token is generated) or use --auth-token-env NAME"
            )
        log.warning("--no-auth: no bearer token; every local user can call every tool")
        return [], False
    if env_name:
        raw = os.environ.get(env_name)
        if raw is None:
            raise ServeError(
                f'--auth-token-env: the environment variable "{env_name}" '
                "is not set; export it with the bearer token clients must send"
            )
        return parse_tokens(raw, env_name), False
    return [secrets.token_urlsafe(32)], True


def show_generated_token(token: str, host: str, port: int) -> None:
    """Say, once, on stderr, the generated token and how clients send it."""
    import sys

    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host  # any address: this machine
    url_host = f"[{shown}]" if ":" in shown else shown
    sys.stderr.write(
        "harness serve: no --auth-token-env given: clients must send this bearer token "
        "(generated for this run, shown only here):\n"
        f"    URL:    http://{url_host}:{port}/mcp\n"
        f"    Header: Authorization: Bearer {token}\n"
        "  e.g. an MCP client's headers setting, or curl -H 'Authorization: Bearer ...'. "
        "Use --auth-token-env NAME for a token of your own, or --no-auth (loopback only) "
        "for none.\n"
    )
    sys.stderr.flush()


class BearerAuth:
    """ASGI middleware: refuse HTTP requests without a valid bearer token (401)."""

    def __init__(self, app: ASGIApp, tokens: Sequence[str]) -> None:
        self.app = app
        self._tokens = [(t.encode("utf-8"), token_identity(t)) for t in tokens]
        self._users = {identity: _principal(identity) for _, identity in self._tokens}

    def identify(self, header: bytes | None) -> str | None:
        if header is None or not header[:7].lower() == b"bearer ":
            return None
        given = header[7:].strip()
        found = None
        for token, identity in self._tokens:  # no early exit: same time for every token
            if hmac.compare_digest(given, token):
                found = identity
        return found

    def admits(self, headers: Sequence[tuple[bytes, bytes]]) -> bool:
        """Whether request headers carry a valid token (serve/connections.py)."""
        header = next((v for k, v in headers if k == b"authorization"), None)
        return self.identify(header) is not None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = None
        for key, value in scope.get("headers") or ():
            if key == b"authorization":
                header = value
                break
        identity = self.identify(header)
        if identity is None:
            body = json.dumps(
                {"error": "missing or invalid bearer token: send Authorization: Bearer <token>"}
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="harness"'),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        scope[IDENTITY_KEY] = identity
        # The SDK's session manager binds each Mcp-Session-Id to the principal of the
        # request that opened it, and answers "Session not found" (404) for another
        # one: the same answer as for an id that never existed (issue 22 item 4).
        scope["user"] = self._users[identity]
        await self.app(scope, receive, send)


def _principal(identity: str) -> Any:
    """The SDK's authenticated user for ``identity`` (a token digest, never a token)."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    return AuthenticatedUser(AccessToken(token=identity, client_id=identity, scopes=[]))


class DisconnectWatch:
    """ASGI middleware: put an :class:`anyio.Event` on each HTTP request's scope, set
    once the server learns that the client closed the connection (``http.disconnect``
    before the response ended). A tools/call of a 2025-era session is served apart
    from the POST that carries it; this is how it learns that no one will read its
    result, and is cancelled (serve/mcp.py)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        import anyio

        gone = anyio.Event()
        scope[GONE_KEY] = gone
        ended = False

        async def watched_send(message: MutableMapping[str, Any]) -> None:
            nonlocal ended
            if message["type"] == "http.response.body" and not message.get("more_body"):
                ended = True
            await send(message)

        async def watched_receive() -> MutableMapping[str, Any]:
            message = await receive()
            if message["type"] == "http.disconnect" and not ended:
                gone.set()
            return message

        await self.app(scope, watched_receive, watched_send)


def gone_event(ctx: Any) -> Any:
    """The :class:`DisconnectWatch` event of the request a handler serves, or None."""
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    return scope.get(GONE_KEY) if isinstance(scope, dict) else None


def identity_of(request: Any) -> str | None:
    """The auth identity the middleware put on a request's ASGI scope, if any."""
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        value = scope.get(IDENTITY_KEY)
        return value if isinstance(value, str) else None
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class HostPolicy:
    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]


def host_policy(
    host: str, port: int, extra_hosts: Sequence[str] = (), extra_origins: Sequence[str] = ()
) -> HostPolicy:
    """The Host and Origin values accepted for a server bound to ``host:port``."""
    names: list[str] = []
    if is_loopback(host) or host in ("0.0.0.0", "::", ""):
        names += ["127.0.0.1", "localhost", "[::1]"]
    if host not in ("0.0.0.0", "::", ""):
        names.append(f"[{host}]" if ":" in host and not host.startswith("[") else host)
    hosts = [f"{n}:{port}" for n in dict.fromkeys(names)]
    hosts += list(extra_hosts)
    origins = [f"http://{h}" for h in hosts if not h.endswith(":*")]
    origins += list(extra_origins)
    return HostPolicy(
        allowed_hosts=tuple(dict.fromkeys(hosts)), allowed_origins=tuple(dict.fromkeys(origins))
    )


def bind(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """Bind and listen; a busy port or a bad address is one clear ServeError."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeError(
            f'cannot listen on "{host}": {exc.strerror}; use an IP address or a name that resolves'
        ) from None
    family, _, proto, _, addr = infos[0]
    # The protocol number too (IPPROTO_TCP): asyncio turns Nagle's algorithm off only on
    # sockets that say they are TCP, and accepted sockets inherit it from this one.
    sock = socket.socket(family, socket.SOCK_STREAM, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        why = exc.strerror or str(exc)
        hint = (
            (
                "another process is listening there; stop it, choose another --port, or use "
                "--port 0 for any free port"
            )
            if exc.errno == 98
            else "check --host and --port"
        )
        raise ServeError(f"cannot listen on {host}:{port}: {why}; {hint}") from None
    sock.set_inheritable(True)
    return sock
