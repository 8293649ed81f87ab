"""``http.get`` / ``http.post`` against a real server on 127.0.0.1 (docs/spec.md §7, §8.5).

DNS answers for made-up names come from the ``net.resolve`` seam; everything else
(sockets, HTTP, redirects, gzip) is real.
"""

from __future__ import annotations

import dataclasses
import gzip
import ipaddress
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from harness.config import Config
from harness.errors import BuiltinError
from harness.runtime.builtins import net
from harness.runtime.context import CallContext


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/hello":
            self._send(
                200,
                b"hello",
                {"X-Seen-Host": self.headers["Host"], "Content-Type": "text/plain; charset=utf-8"},
            )
        elif url.path == "/redirect":
            self._send(int(q.get("code", "302")), b"", {"Location": q["to"]})
        elif url.path == "/loop":
            self._send(302, b"", {"Location": "/loop"})
        elif url.path == "/big":
            self._send(200, "é".encode() * 100000, {"Content-Type": "text/plain; charset=utf-8"})
        elif url.path == "/gzip":
            self._send(200, gzip.compress(b"z" * (50 << 20)), {"Content-Encoding": "gzip"})
        elif url.path == "/headers":
            self._send(200, json.dumps(dict(self.headers.items())).encode())
        elif url.path == "/slow":
            time.sleep(3)
            self._send(200, b"late")
        elif url.path == "/missing":
            self._send(404, b"nope")
        else:
            self._send(500, b"?")

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        if self.path.startswith("/redirect"):
            self._send(302, b"", {"Location": "/headers"})
            return
        self._send(
            200,
            json.dumps(
                {"body": body.decode(), "ctype": self.headers["Content-Type"], "method": "POST"}
            ).encode(),
        )


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def make_ctx(tmp_path: Path, *allowed: str, max_output: int = 65536) -> CallContext:
    config = Config(root=tmp_path, workspace=tmp_path)
    config = dataclasses.replace(
        config,
        network=dataclasses.replace(config.network, allowed_domains=allowed),
        limits=dataclasses.replace(config.limits, max_output_bytes=max_output),
    )
    return CallContext(config=config)


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Made-up names -> addresses; real resolution for everything else."""
    table: dict[str, list[str]] = {}
    real = net.resolve

    def resolve(host: str, port: int) -> list[Any]:
        if host in table:
            return [ipaddress.ip_address(a) for a in table[host]]
        return real(host, port)

    monkeypatch.setattr(net, "resolve", resolve)
    return table


def test_registered_names() -> None:
    assert net.FUNCTIONS == {"http.get": net.get, "http.post": net.post}


def test_network_closed_by_default(tmp_path: Path, port: int) -> None:
    with pytest.raises(BuiltinError, match=r"network access is closed.*allowed_domains"):
        net.get(make_ctx(tmp_path), f"http://127.0.0.1:{port}/hello")


def test_listed_ip_literal_works(tmp_path: Path, port: int) -> None:
    r = net.get(make_ctx(tmp_path, "127.0.0.1"), f"http://127.0.0.1:{port}/hello")
    assert set(r) == {"status", "ok", "headers", "body", "url"}
    assert r["status"] == 200 and r["ok"] is True and r["body"] == "hello"
    assert r["headers"]["x-seen-host"] == f"127.0.0.1:{port}"
    assert r["url"] == f"http://127.0.0.1:{port}/hello"


def test_error_status_is_a_result(tmp_path: Path, port: int) -> None:
    r = net.get(make_ctx(tmp_path, "127.0.0.1"), f"http://127.0.0.1:{port}/missing")
    assert r["status"] == 404 and r["ok"] is False and r["body"] == "nope"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "2130706433", "0x7f.0.0.1", "[::1]"])
def test_unlisted_ip_literal_refused(tmp_path: Path, port: int, host: str) -> None:
    with pytest.raises(BuiltinError, match=r'IP address ".*" is not in network.allowed_domains'):
        net.get(make_ctx(tmp_path, "example.com"), f"http://{host}:{port}/hello")


def test_unlisted_host_refused_with_how_to(tmp_path: Path) -> None:
    with pytest.raises(
        BuiltinError,
        match=r'host "evil.test" is not in network.allowed_domains; '
        r'add "evil.test"',
    ):
        net.get(make_ctx(tmp_path, "example.com"), "http://evil.test/")


def test_localhost_listed_works(tmp_path: Path, port: int) -> None:
    r = net.get(make_ctx(tmp_path, "localhost"), f"http://localhost:{port}/hello")
    assert r["body"] == "hello" and r["headers"]["x-seen-host"] == f"localhost:{port}"


def test_name_resolving_to_loopback_refused_unless_listed(
    tmp_path: Path, port: int, fake_dns: dict[str, list[str]]
) -> None:
    fake_dns["api.example.com"] = ["127.0.0.1"]
    for allowed in ("example.com", "*.example.com"):
        with pytest.raises(
            BuiltinError,
            match=r'"api.example.com" resolves to non-public '
            r"address 127.0.0.1",
        ):
            net.get(make_ctx(tmp_path, allowed), f"http://api.example.com:{port}/hello")
    r = net.get(make_ctx(tmp_path, "api.example.com"), f"http://api.example.com:{port}/hello")
    assert r["body"] == "hello"
    # connected to the checked address, with the name kept in Host
    assert r["headers"]["x-seen-host"] == f"api.example.com:{port}"


@pytest.mark.parametrize(
    "addr",
    [
        "10.1.2.3",
        "192.168.0.1",
        "172.16.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "64:ff9b::a00:1",
    ],
)
def test_private_and_reserved_addresses_refused(
    tmp_path: Path, fake_dns: dict[str, list[str]], addr: str
) -> None:
    fake_dns["api.example.com"] = ["93.184.216.34", addr]  # one bad answer is enough
    with pytest.raises(BuiltinError, match="non-public address"):
        net.get(make_ctx(tmp_path, "example.com"), "http://api.example.com/")


def test_public_addresses_pass_the_check() -> None:
    for addr in ("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "8.8.8.8"):
        assert net.is_public(ipaddress.ip_address(addr))


def test_resolved_once_no_rebinding(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = iter([["127.0.0.1"], ["10.9.9.9"], ["10.9.9.9"]])
    calls = []

    def resolve(host: str, p: int) -> list[Any]:
        calls.append(host)
        return [ipaddress.ip_address(a) for a in next(answers)]

    monkeypatch.setattr(net, "resolve", resolve)
    r = net.get(make_ctx(tmp_path, "api.example.com"), f"http://api.example.com:{port}/hello")
    assert r["body"] == "hello" and calls == ["api.example.com"]


@pytest.mark.parametrize(
    "host, allowed, expected",
    [
        ("example.com", ("example.com",), (True, True)),
        ("api.example.com", ("example.com",), (True, False)),
        ("a.b.example.com", ("example.com",), (True, False)),
        ("example.com", ("*.example.com",), (False, False)),
        ("api.example.com", ("*.example.com",), (True, False)),
        ("a.b.example.com", ("*.example.com",), (True, False)),
        ("badexample.com", ("example.com",), (False, False)),
        ("badexample.com", ("*.example.com",), (False, False)),
        ("example.com.evil.net", ("example.com",), (False, False)),
        ("example.co", ("example.com",), (False, False)),
        ("example.com", ("EXAMPLE.com.",), (True, True)),
        ("xn--bcher-kva.de", ("bücher.de",), (True, True)),
        ("127.0.0.1", ("localhost",), (False, False)),
        ("::1", ("[::1]",), (True, True)),
    ],
)
def test_apex_and_wildcard_rules(
    host: str, allowed: tuple[str, ...], expected: tuple[bool, bool]
) -> None:
    assert net.host_allowed(host, allowed) == expected


def test_wildcard_does_not_allow_apex_end_to_end(tmp_path: Path) -> None:
    with pytest.raises(BuiltinError, match='host "example.com" is not in'):
        net.get(make_ctx(tmp_path, "*.example.com"), "http://example.com/")


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://example.com/x", "gopher://example.com/", "data:text/plain,hi"],
)
def test_non_http_scheme_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(BuiltinError, match="(is not allowed|only http and https|no host)"):
        net.get(make_ctx(tmp_path, "example.com"), url)


def test_redirect_within_allowed_host(tmp_path: Path, port: int) -> None:
    r = net.get(make_ctx(tmp_path, "127.0.0.1"), f"http://127.0.0.1:{port}/redirect?to=/hello")
    assert r["body"] == "hello" and r["url"] == f"http://127.0.0.1:{port}/hello"


def test_redirect_to_refused_host(tmp_path: Path, port: int) -> None:
    with pytest.raises(BuiltinError, match='host "evil.test" is not in network.allowed_domains'):
        net.get(
            make_ctx(tmp_path, "127.0.0.1"),
            f"http://127.0.0.1:{port}/redirect?to=http://evil.test/",
        )


def test_redirect_from_listed_name_to_loopback_ip_refused(tmp_path: Path, port: int) -> None:
    with pytest.raises(BuiltinError, match='IP address "127.0.0.1" is not in'):
        net.get(
            make_ctx(tmp_path, "localhost"),
            f"http://localhost:{port}/redirect?to=http://127.0.0.1:{port}/hello",
        )


def test_redirect_to_private_resolution_refused(
    tmp_path: Path, port: int, fake_dns: dict[str, list[str]]
) -> None:
    fake_dns["internal.example.com"] = ["10.0.0.5"]
    with pytest.raises(BuiltinError, match='"internal.example.com" resolves to non-public'):
        net.get(
            make_ctx(tmp_path, "127.0.0.1", "example.com"),
            f"http://127.0.0.1:{port}/redirect?to=http://internal.example.com/",
        )


def test_redirect_to_file_scheme_refused(tmp_path: Path, port: int) -> None:
    with pytest.raises(BuiltinError, match='scheme "file" is not allowed'):
        net.get(
            make_ctx(tmp_path, "127.0.0.1"),
            f"http://127.0.0.1:{port}/redirect?to=file:///etc/passwd",
        )


def test_too_many_redirects(tmp_path: Path, port: int) -> None:
    with pytest.raises(BuiltinError, match="more than 5 redirects"):
        net.get(make_ctx(tmp_path, "127.0.0.1"), f"http://127.0.0.1:{port}/loop")


def test_cross_origin_redirect_drops_credentials(tmp_path: Path, port: int) -> None:
    ctx = make_ctx(tmp_path, "127.0.0.1", "localhost")
    r = net.get(
        ctx,
        f"http://127.0.0.1:{port}/redirect?to=http://localhost:{port}/headers",
        headers={"Authorization": "Bearer t0ken", "X-Keep": "1"},
    )
    seen = {k.lower(): v for k, v in json.loads(r["body"]).items()}
    assert "authorization" not in seen and seen["x-keep"] == "1"
    r = net.get(
        ctx,
        f"http://127.0.0.1:{port}/redirect?to=/headers",
        headers={"Authorization": "Bearer t0ken"},
    )
    assert json.loads(r["body"])["Authorization"] == "Bearer t0ken"  # same origin keeps it


def test_body_capped_utf8_safe(tmp_path: Path, port: int) -> None:
    r = net.get(make_ctx(tmp_path, "127.0.0.1", max_output=1001), f"http://127.0.0.1:{port}/big")
    assert r["body"] == "é" * 500


def test_gzip_body_capped_while_decoding(tmp_path: Path, port: int) -> None:
    r = net.get(make_ctx(tmp_path, "127.0.0.1", max_output=1000), f"http://127.0.0.1:{port}/gzip")
    assert r["body"] == "z" * 1000


def test_timeout(tmp_path: Path, port: int) -> None:
    with pytest.raises(BuiltinError, match="timed out"):
        net.get(make_ctx(tmp_path, "127.0.0.1"), f"http://127.0.0.1:{port}/slow", timeout_ms=200)


def test_timeout_clamped_to_call_deadline(tmp_path: Path, port: int) -> None:
    ctx = make_ctx(tmp_path, "127.0.0.1")
    ctx.deadline = time.monotonic() + 0.2
    with pytest.raises(BuiltinError, match="timed out"):
        net.get(ctx, f"http://127.0.0.1:{port}/slow", timeout_ms=30000)


def test_connection_refused_is_clear(tmp_path: Path) -> None:
    with pytest.raises(BuiltinError, match='request to "http://127.0.0.1:9/" failed'):
        net.get(make_ctx(tmp_path, "127.0.0.1"), "http://127.0.0.1:9/")


def test_post_json_and_body(tmp_path: Path, port: int) -> None:
    ctx = make_ctx(tmp_path, "127.0.0.1")
    r = net.post(ctx, f"http://127.0.0.1:{port}/echo", json={"a": [1, "é"]})
    seen = json.loads(r["body"])
    assert json.loads(seen["body"]) == {"a": [1, "é"]} and seen["ctype"] == "application/json"
    r = net.post(
        ctx,
        f"http://127.0.0.1:{port}/echo",
        body="raw text",
        headers={"Content-Type": "text/plain"},
    )
    assert json.loads(r["body"]) == {"body": "raw text", "ctype": "text/plain", "method": "POST"}


def test_post_302_becomes_get(tmp_path: Path, port: int) -> None:
    r = net.post(make_ctx(tmp_path, "127.0.0.1"), f"http://127.0.0.1:{port}/redirect", body="x")
    assert r["status"] == 200 and r["url"].endswith("/headers")


def test_credentials_not_echoed_in_url(tmp_path: Path, port: int) -> None:
    r = net.get(make_ctx(tmp_path, "127.0.0.1"), f"http://user:pw@127.0.0.1:{port}/hello")
    assert r["url"] == f"http://127.0.0.1:{port}/hello"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda c: net.get(c, 5), "url must be a string"),
        (lambda c: net.get(c, "http://127.0.0.1/", headers=["x"]), "headers must be a dict"),
        (lambda c: net.get(c, "http://127.0.0.1/", headers={"X": 1}), "headers must map strings"),
        (lambda c: net.get(c, "http://127.0.0.1/", headers={"X": "a\r\nB: c"}), "invalid name"),
        (lambda c: net.get(c, "http://127.0.0.1/", headers={"Host": "x"}), '"Host" header'),
        (lambda c: net.get(c, "http://127.0.0.1/", timeout_ms=-1), "timeout_ms must be"),
        (lambda c: net.get(c, "http://[bad/"), 'invalid host "%5bbad"'),
        (lambda c: net.get(c, "http://exa mple.com/"), "invalid host"),
        (lambda c: net.get(c, "http://a..b/"), "invalid host"),
        (lambda c: net.post(c, "http://127.0.0.1/", body="a", json={}), "body or json, not both"),
        (lambda c: net.post(c, "http://127.0.0.1/", body=5), "body must be a string"),
        (lambda c: net.post(c, "http://127.0.0.1/", json={1, 2}), "not JSON-compatible"),
    ],
)
def test_bad_arguments(tmp_path: Path, call: Any, message: str) -> None:
    with pytest.raises(BuiltinError, match=message):
        call(make_ctx(tmp_path, "127.0.0.1"))


# ---------------------------------------------------------------- https to the pinned address


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """An HTTPS server on 127.0.0.1 whose certificate names only api.example.com."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    d = tmp_path_factory.mktemp("tls")

    def sh(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    sh(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=test CA",
    )
    sh(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "leaf.key",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=api.example.com",
    )
    (d / "ext.cnf").write_text("subjectAltName=DNS:api.example.com\n")
    sh(
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "leaf.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    )
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    sctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    sctx.load_cert_chain(d / "leaf.pem", d / "leaf.key")
    srv.socket = sctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1], d / "ca.pem"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def trust(tls: tuple[int, Path], monkeypatch: pytest.MonkeyPatch) -> int:
    import ssl

    monkeypatch.setattr(net, "SSL_VERIFY", ssl.create_default_context(cafile=str(tls[1])))
    return tls[0]


def test_https_pinned_address_keeps_sni_and_cert_name(
    tmp_path: Path, trust: int, fake_dns: dict[str, list[str]]
) -> None:
    fake_dns["api.example.com"] = ["127.0.0.1"]
    r = net.get(make_ctx(tmp_path, "api.example.com"), f"https://api.example.com:{trust}/hello")
    assert r["body"] == "hello" and r["url"] == f"https://api.example.com:{trust}/hello"
    assert r["headers"]["x-seen-host"] == f"api.example.com:{trust}"


def test_https_certificate_for_another_name_fails(
    tmp_path: Path, trust: int, fake_dns: dict[str, list[str]]
) -> None:
    fake_dns["other.example.com"] = ["127.0.0.1"]
    with pytest.raises(BuiltinError, match="failed: .*(certificate|hostname)"):
        net.get(make_ctx(tmp_path, "other.example.com"), f"https://other.example.com:{trust}/hello")
