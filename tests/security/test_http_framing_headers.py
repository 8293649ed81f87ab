"""Issue 10 item 5: scripts cannot send hop-by-hop or framing headers.

``Transfer-Encoding`` together with ``Content-Length`` is a request-smuggling
primitive against an allowed host's proxies. A raw recording server on 127.0.0.1 shows
what reaches the wire: a refused header must never leave the process.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config import Config
from harness.errors import BuiltinError
from harness.runtime.builtins import net
from harness.runtime.context import CallContext


class Recorder:
    """Accepts connections, records each request's head, answers 200 ``ok``."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.heads: list[str] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                except OSError:
                    pass
                self.heads.append(data.split(b"\r\n\r\n")[0].decode("latin-1"))
                try:
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                    )
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.close()


def ctx(tmp_path: Path) -> CallContext:
    config = Config(root=tmp_path, workspace=tmp_path)
    config = dataclasses.replace(
        config, network=dataclasses.replace(config.network, allowed_domains=("127.0.0.1",))
    )
    return CallContext(config=config)


REFUSED = [
    "Transfer-Encoding",
    "transfer-encoding",
    "TRANSFER-ENCODING",
    "Content-Length",
    "content-LENGTH",
    "Connection",
    "connection",
    "TE",
    "te",
    "Upgrade",
    "Keep-Alive",
    "keep-alive",
    "Trailer",
    "Proxy-Authorization",
    "proxy-connection",
    "PROXY-Foo",
    "Host",
    "HOST",
]


@pytest.mark.parametrize("name", REFUSED)
@pytest.mark.parametrize("method", ["get", "post"])
def test_hop_by_hop_and_framing_headers_are_refused(
    tmp_path: Path, recorder: Recorder, name: str, method: str
) -> None:
    before = len(recorder.heads)
    url = f"http://127.0.0.1:{recorder.port}/x"
    with pytest.raises(BuiltinError, match=rf'http\.{method}: .*"{name}"') as info:
        if method == "get":
            net.get(ctx(tmp_path), url, headers={name: "chunked" if "ength" not in name else "5"})
        else:
            net.post(
                ctx(tmp_path),
                url,
                body="hello",
                headers={name: "chunked" if "ength" not in name else "5"},
            )
    assert "remove it" in str(info.value)
    assert len(recorder.heads) == before  # nothing reached the server


def test_smuggling_pair_never_reaches_the_wire(tmp_path: Path, recorder: Recorder) -> None:
    before = len(recorder.heads)
    with pytest.raises(BuiltinError, match="hop-by-hop or framing header"):
        net.post(
            ctx(tmp_path),
            f"http://127.0.0.1:{recorder.port}/x",
            body="0\r\n\r\nGET /a",
            headers={"Content-Length": "4", "Transfer-Encoding": "chunked"},
        )
    assert len(recorder.heads) == before


@pytest.mark.parametrize(
    "headers",
    [
        {"X-A": "a\r\nTransfer-Encoding: chunked"},
        {"X-A": "a\nb"},
        {"X-A": "a\rb"},
        {"X-A": "a\x00b"},
        {"X-A\r\nTransfer-Encoding": "chunked"},
        {"X\nA": "b"},
        {"X\x00A": "b"},
        {"X A": "b"},
        {"X:A": "b"},
        {"": "b"},
    ],
)
def test_control_characters_in_names_and_values_are_refused(
    tmp_path: Path, recorder: Recorder, headers: dict[str, str]
) -> None:
    before = len(recorder.heads)
    with pytest.raises(BuiltinError, match="invalid name or value"):
        net.get(ctx(tmp_path), f"http://127.0.0.1:{recorder.port}/x", headers=headers)
    assert len(recorder.heads) == before


def test_ordinary_headers_reach_the_server(tmp_path: Path, recorder: Recorder) -> None:
    r = net.post(
        ctx(tmp_path),
        f"http://127.0.0.1:{recorder.port}/x",
        body="hello",
        headers={
            "Authorization": "Bearer t",
            "X-Trace": "a\tb",
            "Accept": "*/*",
            "Content-Type": "text/plain",
        },
    )
    assert r["status"] == 200 and r["body"] == "ok"
    head = recorder.heads[-1].lower()
    assert "authorization: bearer t" in head and "x-trace: a\tb" in head
    # Framing comes from harness: exactly one Content-Length, no Transfer-Encoding.
    assert head.count("content-length:") == 1 and "content-length: 5" in head
    assert "transfer-encoding" not in head
