"""``http.get`` / ``http.post`` behind ``network.allowed_domains`` (docs/spec.md §7, §8.5).

Every hop (the first request and each redirect) is checked before anything is sent:
scheme http/https; host allowed (``example.com`` = apex and subdomains,
``*.example.com`` = subdomains only); IP literals only when listed exactly; the
name is resolved once and every address must be public unless the host itself is
listed exactly. The request then goes to the checked address (URL host replaced by
the IP, ``Host`` header and TLS SNI/certificate name kept), so a second DNS answer
cannot redirect it (no rebinding window). Redirects are followed by hand, at most
``MAX_REDIRECTS``. Policy refusals and transport failures raise ``BuiltinError``.
"""

from __future__ import annotations

import codecs
import ipaddress
import json as jsonlib
import re
import socket
import time
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from harness.artifacts.domains import split_entry
from harness.errors import BuiltinError
from harness.runtime import doubles
from harness.runtime.builtins.proc import trim_partial  # one UTF-8-safe cut for both
from harness.runtime.context import CallContext

MAX_REDIRECTS = 5
_REDIRECTS = (301, 302, 303, 307, 308)
_STRIP_CROSS_ORIGIN = ("authorization", "cookie", "proxy-authorization")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_HOSTNAME = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*")


# Trust store for https (True = httpx's default, certifi). Tests put an SSLContext here.
SSL_VERIFY: Any = True


def resolve(host: str, port: int) -> list[IPAddress]:
    """All addresses of ``host`` (the DNS seam tests replace)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def _literal(host: str) -> IPAddress | None:
    """The address if ``host`` is an IP literal in any form the resolver accepts
    (``127.1``, ``0x7f.1``, ``2130706433``, ``::1``), else None."""
    h = host.strip("[]")
    try:
        return ipaddress.ip_address(h)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(h, None, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError):
        return None
    return ipaddress.ip_address(str(infos[0][4][0]).split("%")[0])


def is_public(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        for embedded in (ip.ipv4_mapped, ip.sixtofour, (ip.teredo or (None, None))[1]):
            if embedded is not None and not is_public(embedded):
                return False
        if ip in ipaddress.ip_network("64:ff9b::/96"):  # NAT64 of an IPv4 address
            return is_public(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_unspecified)


def _norm(name: str) -> str:
    name = name.strip().lower().rstrip(".")
    try:
        return name.encode("idna").decode("ascii")
    except UnicodeError:
        return name


def host_allowed(
    host: str,
    allowed: tuple[str, ...],
    port: int | None = None,
    defaults: tuple[int, ...] | None = None,
) -> tuple[bool, bool]:
    """(allowed, listed exactly) for a host name or IP literal at ``port``.

    An entry ``host:port`` matches that port only. An entry without a port matches
    any port when ``defaults`` is None (``http.*``) and only the ports in ``defaults``
    otherwise (the egress proxy: 443 for a tunnel, 80 for plain http)."""
    lit = _literal(host)
    exact = False
    ok = False
    for raw in allowed:
        pattern, listed = split_entry(raw)
        if listed is not None and listed != port:
            continue
        if listed is None and defaults is not None and port not in defaults:
            continue
        entry = _norm(pattern)
        if lit is not None:
            elit = _literal(entry)
            if elit is not None and elit == lit:
                return True, True
            continue
        if entry.startswith("*."):
            ok = ok or (host.endswith(entry[1:]) and host != entry[2:])
        elif host == entry:
            ok = exact = True
        elif host.endswith("." + entry):
            ok = True
    return ok, exact


def _how_to_open(host: str) -> str:
    return (
        f'add "{host}" to network.allowed_domains in harness.md, e.g. '
        f'network: {{allowed_domains: ["{host}"]}}'
    )


def _not_allowed(
    fn: str,
    host: str,
    literal: bool,
    port: int,
    allowed: tuple[str, ...],
    defaults: tuple[int, ...] | None,
) -> str:
    kind = "IP address" if literal else "host"
    hosts = tuple(split_entry(entry)[0] for entry in allowed)
    if host_allowed(host, hosts)[0]:  # the host is listed, but not at this port
        shown = f"[{host}]" if ":" in host else host
        opened = "any port" if defaults is None else "port " + "/".join(map(str, defaults))
        return (
            f'{fn}: port {port} of {kind} "{host}" is not allowed (an entry without a port '
            f'opens {opened}; other ports must be listed); add "{shown}:{port}" to '
            "network.allowed_domains to open it"
        )
    return f'{fn}: {kind} "{host}" is not in network.allowed_domains; ' + _how_to_open(host)


def _allowed(
    fn: str, url: httpx.URL, allowed: tuple[str, ...], defaults: tuple[int, ...] | None = None
) -> tuple[str, IPAddress | None, int, bool]:
    """Refuse ``url`` unless policy lists it: (host, IP literal, port, listed exactly)."""
    if url.scheme not in ("http", "https"):
        raise BuiltinError(
            f'{fn}: scheme "{url.scheme}" is not allowed in "{url}"; only http and https'
        )
    host = url.raw_host.decode("ascii").lower().rstrip(".")
    if not host:
        raise BuiltinError(f'{fn}: URL "{url}" has no host')
    lit = _literal(host)
    if lit is None and not _HOSTNAME.fullmatch(host):
        raise BuiltinError(f'{fn}: invalid host "{host}" in URL "{url}"')
    port = url.port or (443 if url.scheme == "https" else 80)
    ok, exact = host_allowed(host, allowed, port, defaults)
    if not ok:
        raise BuiltinError(_not_allowed(fn, host, lit is not None, port, allowed, defaults))
    return host, lit, port, exact


def _check(
    fn: str, url: httpx.URL, allowed: tuple[str, ...], defaults: tuple[int, ...] | None = None
) -> IPAddress:
    """Refuse ``url`` unless policy allows it; return the address to connect to.
    ``defaults``: the ports an entry without a port opens (None: any port)."""
    host, lit, port, exact = _allowed(fn, url, allowed, defaults)
    if lit is not None:
        return lit  # listed exactly: the operator asked for this address
    try:
        addrs = resolve(host, port)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise BuiltinError(f'{fn}: cannot resolve "{host}": {exc}') from None
    if not addrs:
        raise BuiltinError(f'{fn}: "{host}" has no address')
    if not exact:
        bad = [str(a) for a in addrs if not is_public(a)]
        if bad:
            raise BuiltinError(
                f'{fn}: host "{host}" resolves to non-public address {", ".join(bad)} '
                "(loopback, private, link-local or reserved); refused unless the host "
                "itself is listed in network.allowed_domains"
            )
    return addrs[0]


def _deadline(ctx: CallContext, fn: str, timeout_ms: Any) -> float:
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float)) or timeout_ms <= 0:
        raise BuiltinError(f"{fn}: timeout_ms must be a positive number, got {timeout_ms!r}")
    budget = float(timeout_ms)
    remaining = ctx.remaining_ms()
    if remaining is not None:
        budget = min(budget, remaining)
    return time.monotonic() + budget / 1000.0


# Hop-by-hop and framing headers: harness (httpx) sets them from the request itself. A
# script setting them could frame a request two ways (Transfer-Encoding with
# Content-Length: request smuggling through an allowed host's proxies) or steer a proxy.
_RESERVED_HEADERS = frozenset(
    (
        "transfer-encoding",
        "content-length",
        "connection",
        "te",
        "upgrade",
        "keep-alive",
        "trailer",
        "host",
    )
)
# RFC 9110 token characters; values may hold visible characters, spaces and tabs only.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE_BAD = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _headers(fn: str, headers: Any) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise BuiltinError(f"{fn}: headers must be a dict of strings, got {type(headers).__name__}")
    out: dict[str, str] = {}
    for k, v in headers.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise BuiltinError(f"{fn}: headers must map strings to strings; got {k!r}: {v!r}")
        if _HEADER_NAME.fullmatch(k) is None:
            raise BuiltinError(
                f"{fn}: header {k!r} has an invalid name or value: a name is "
                "letters, digits and !#$%&'*+-.^_`|~ only (no spaces, colons, "
                "CR, LF or NUL)"
            )
        if _HEADER_VALUE_BAD.search(v) is not None:
            raise BuiltinError(
                f'{fn}: header "{k}" has an invalid name or value: the value '
                "holds a control character (CR, LF, NUL...); send printable "
                "text only"
            )
        lower = k.lower()
        if lower == "host":
            raise BuiltinError(f'{fn}: the "{k}" header is set from the URL; remove it')
        if lower in _RESERVED_HEADERS or lower.startswith("proxy-"):
            raise BuiltinError(
                f'{fn}: header "{k}" is a hop-by-hop or framing header that '
                "harness sets itself (Transfer-Encoding, Content-Length, "
                "Connection, TE, Trailer, Upgrade, Keep-Alive, Host, Proxy-*); "
                "remove it"
            )
        out[k] = v
    return out


class _Body:
    """Decode Content-Encoding incrementally, never holding more than ``limit`` bytes."""

    def __init__(self, encoding: str, limit: int) -> None:
        enc = encoding.strip().lower()
        self.limit = limit
        self.buf = bytearray()
        self.full = False
        self.z: Any = None
        if enc in ("gzip", "x-gzip"):
            self.z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self.z = zlib.decompressobj(zlib.MAX_WBITS)
            self.raw_fallback = True
        elif enc not in ("", "identity"):
            raise BuiltinError(f'unsupported Content-Encoding "{encoding}"')

    def feed(self, chunk: bytes) -> None:
        room = self.limit - len(self.buf)
        if room <= 0:
            self.full = True
            return
        if self.z is not None:
            try:
                chunk = self.z.decompress(chunk, room + 1)
            except zlib.error:
                if getattr(self, "raw_fallback", False) and not self.buf:
                    self.z = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate
                    self.raw_fallback = False
                    chunk = self.z.decompress(chunk, room + 1)
                else:
                    raise
        if len(chunk) > room:
            self.full = True
            chunk = chunk[:room]
        self.buf += chunk


def _charset(name: str | None) -> str:
    try:
        return codecs.lookup(name).name if name else "utf-8"
    except LookupError:
        return "utf-8"


def _public_url(url: httpx.URL) -> str:
    """The URL without credentials."""
    return str(url.copy_with(username=None, password=None)) if url.userinfo else str(url)


def _request(  # noqa: C901
    ctx: CallContext,
    fn: str,
    method: str,
    url: Any,
    headers: Any,
    content: bytes | None,
    timeout_ms: Any,
) -> dict[str, Any]:
    if not isinstance(url, str):
        raise BuiltinError(f"{fn}: url must be a string, got {type(url).__name__}")
    hdrs = _headers(fn, headers)
    deadline = _deadline(ctx, fn, timeout_ms)
    allowed = ctx.config.network.allowed_domains
    if not allowed:
        raise BuiltinError(
            f"{fn}: network access is closed (network.allowed_domains is empty); "
            "list the hosts tools may reach in harness.md, e.g. "
            'network: {allowed_domains: ["api.example.com"]}'
        )
    limit = ctx.config.limits.max_output_bytes
    try:
        current = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise BuiltinError(f'{fn}: invalid URL "{url}": {exc}') from None
    location, status = "", 0
    with httpx.Client(follow_redirects=False, trust_env=False, verify=SSL_VERIFY) as client:
        for _hop in range(MAX_REDIRECTS + 1):
            ip = _check(fn, current, allowed)
            left = deadline - time.monotonic()
            if left <= 0:
                raise BuiltinError(f'{fn}: timed out before contacting "{current.host}"')
            host_header = current.netloc.decode("ascii")
            req_headers = {**hdrs, "Host": host_header}
            if not any(k.lower() == "accept-encoding" for k in hdrs):
                req_headers["Accept-Encoding"] = "gzip, deflate"
            pinned = current.copy_with(host=str(ip))
            request = client.build_request(
                method,
                pinned,
                headers=req_headers,
                content=content,
                extensions={
                    "sni_hostname": current.host,
                    "timeout": {"connect": left, "read": left, "write": left, "pool": left},
                },
            )
            try:
                response = client.send(request, stream=True)
                try:
                    if response.status_code in _REDIRECTS and "location" in response.headers:
                        location = response.headers["location"]
                        status = response.status_code
                    else:
                        body = _Body(response.headers.get("content-encoding", ""), limit)
                        for chunk in response.iter_raw():
                            body.feed(chunk)
                            if body.full:
                                break
                            if time.monotonic() > deadline:
                                raise BuiltinError(f'{fn}: "{current}" timed out reading the body')
                        raw = trim_partial(bytes(body.buf)) if body.full else bytes(body.buf)
                        text = raw.decode(_charset(response.charset_encoding), "replace")
                        return {
                            "status": response.status_code,
                            "ok": 200 <= response.status_code < 300,
                            "headers": {k.lower(): v for k, v in response.headers.items()},
                            "body": text,
                            "url": _public_url(current),
                        }
                finally:
                    response.close()
            except httpx.TimeoutException:
                raise BuiltinError(f'{fn}: "{current}" timed out') from None
            except (httpx.HTTPError, zlib.error) as exc:
                raise BuiltinError(f'{fn}: request to "{current}" failed: {exc}') from None
            try:
                nxt = current.join(location)
            except (httpx.InvalidURL, ValueError) as exc:
                raise BuiltinError(f'{fn}: bad redirect Location "{location}": {exc}') from None
            if (nxt.scheme, nxt.host, nxt.port) != (current.scheme, current.host, current.port):
                hdrs = {k: v for k, v in hdrs.items() if k.lower() not in _STRIP_CROSS_ORIGIN}
            if status == 303 or (status in (301, 302) and method == "POST"):
                method, content = "GET", None
                hdrs = {k: v for k, v in hdrs.items() if k.lower() != "content-type"}
            current = nxt
    raise BuiltinError(f'{fn}: more than {MAX_REDIRECTS} redirects starting at "{url}"')


def get(ctx: CallContext, url: Any, headers: Any = None, timeout_ms: Any = 30000) -> dict[str, Any]:
    return _send(ctx, "http.get", "GET", url, headers, None, timeout_ms)


def _send(
    ctx: CallContext,
    fn: str,
    method: str,
    url: Any,
    headers: Any,
    content: bytes | None,
    timeout_ms: Any,
) -> dict[str, Any]:
    if not ctx.config.doubles:
        return _request(ctx, fn, method, url, headers, content, timeout_ms)
    # harness test: arguments and policy checked as always, then a fake answers
    # (runtime/doubles.py); no name is resolved before that (CI has no network).
    if not isinstance(url, str):
        raise BuiltinError(f"{fn}: url must be a string, got {type(url).__name__}")
    _headers(fn, headers)
    _deadline(ctx, fn, timeout_ms)
    allowed = ctx.config.network.allowed_domains
    if not allowed:
        return _request(ctx, fn, method, url, headers, content, timeout_ms)  # its refusal
    try:
        _allowed(fn, httpx.URL(url), allowed)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise BuiltinError(f'{fn}: invalid URL "{url}": {exc}') from None
    return doubles.http(
        ctx,
        fn,
        method,
        url,
        lambda: _request(ctx, fn, method, url, headers, content, timeout_ms),
    )


def post(
    ctx: CallContext,
    url: Any,
    body: Any = None,
    json: Any = None,
    headers: Any = None,
    timeout_ms: Any = 30000,
) -> dict[str, Any]:
    hdrs = dict(_headers("http.post", headers))
    if body is not None and json is not None:
        raise BuiltinError("http.post: pass body or json, not both")
    content: bytes | None = None
    if body is not None:
        if not isinstance(body, str):
            raise BuiltinError(f"http.post: body must be a string, got {type(body).__name__}")
        content = body.encode("utf-8")
    elif json is not None:
        try:
            content = jsonlib.dumps(json, ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise BuiltinError(f"http.post: json is not JSON-compatible: {exc}") from None
        if not any(k.lower() == "content-type" for k in hdrs):
            hdrs["Content-Type"] = "application/json"
    return _send(ctx, "http.post", "POST", url, hdrs, content, timeout_ms)


FUNCTIONS: dict[str, Callable[..., Any]] = {"http.get": get, "http.post": post}
