"""Reopened class "egress Host": one function decides where a proxied request goes.

The Host check came back through a second path (a bare LF inside a header) after the
first fix. Now :func:`harness.upstream.egress.allowed_target` is the only decision:
the structural tests make sure nothing in ``harness/upstream`` opens a connection but
``_dial``, that ``_dial`` only gets what ``allowed_target`` returned and that nothing
else makes a ``Target``; the walk sends every form of request (each method family,
each target form, Host agreeing or not) and checks that each one either fails to
parse or was decided by ``allowed_target``, and that the origin sees a request only
when the decision allowed it, with the decided Host.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
from pathlib import Path

import pytest

from harness.upstream import egress
from harness.upstream.egress import EgressProxy

UPSTREAM = Path(egress.__file__).parent
# Calls that open a network connection (relay.py runs inside the sandbox and only
# connects to the proxy's Unix socket: checked below on its own).
_CONNECTS = {"open_connection", "create_connection", "connect", "sock_connect", "connect_ex"}


def _functions(tree: ast.AST) -> dict[str, ast.AST]:
    return {
        node.name: node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _called(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        fn = node.func
        return fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
    return None


def _enclosing(tree: ast.AST) -> dict[ast.AST, str]:
    """The innermost function around each node."""
    owner: dict[ast.AST, str] = {}

    def visit(node: ast.AST, name: str | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = node.name
        if name is not None:
            owner[node] = name
        for child in ast.iter_child_nodes(node):
            visit(child, name)

    visit(tree, None)
    return owner


def test_only_dial_opens_a_connection_in_the_upstream_package() -> None:
    for path in sorted(UPSTREAM.glob("*.py")):
        tree = ast.parse(path.read_text())
        owner = _enclosing(tree)
        for node in ast.walk(tree):
            name = _called(node)
            if name not in _CONNECTS:
                continue
            where = f"{path.name}:{node.lineno} ({owner.get(node)})"
            if path.name == "relay.py":
                assert owner.get(node) == "serve", where  # the Unix socket to the proxy
                continue
            assert path.name == "egress.py" and owner.get(node) == "_dial", where


def test_dial_gets_only_what_allowed_target_returned() -> None:
    tree = ast.parse(Path(egress.__file__).read_text())
    owner = _enclosing(tree)
    dials = [node for node in ast.walk(tree) if _called(node) == "_dial"]
    assert dials, "no call to _dial"
    for call in dials:
        fn = _functions(tree)[owner[call]]
        assert isinstance(call, ast.Call) and len(call.args) == 1
        arg = call.args[0]
        assert isinstance(arg, ast.Name), ast.dump(arg)
        sources = [
            node.value
            for node in ast.walk(fn)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == arg.id for t in node.targets)
        ]
        assert sources and all(_called(v) == "allowed_target" for v in sources), owner[call]
    makers = {owner.get(node) for node in ast.walk(tree) if _called(node) == "Target"}
    assert makers == {"allowed_target"}, makers


def test_the_relay_connects_only_to_the_unix_socket() -> None:
    text = (UPSTREAM / "relay.py").read_text()
    assert "socket.socket(socket.AF_UNIX" in text and text.count(".connect(") == 1


async def _backend(seen: list[bytes]) -> tuple[asyncio.AbstractServer, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = b""
        try:
            while chunk := await asyncio.wait_for(reader.read(65536), 0.5):
                data += chunk
                if b"\r\n\r\n" in data and not data.startswith(b"HTTP"):
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        seen.append(data)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


# (name, request with {a} = the allowed authority 127.0.0.1:PORT, expected: "parse"
# for a head refused before any decision, "refuse" for a decision against it,
# "pass" for a request that reaches the origin).
FORMS = [
    ("get-absolute", "GET http://{a}/x HTTP/1.1\r\nHost: {a}\r\n\r\n", "pass"),
    ("head-absolute", "HEAD http://{a}/x HTTP/1.1\r\nHost: {a}\r\n\r\n", "pass"),
    ("delete-absolute", "DELETE http://{a}/x HTTP/1.1\r\nHost: {a}\r\n\r\n", "pass"),
    ("custom-method", "FROB http://{a}/x HTTP/1.1\r\nHost: {a}\r\n\r\n", "pass"),
    (
        "post-body",
        "POST http://{a}/ HTTP/1.1\r\nHost: {a}\r\nContent-Length: 2\r\n\r\nhi",
        "pass",
    ),
    ("http10-no-host", "GET http://{a}/x HTTP/1.0\r\n\r\n", "pass"),
    ("host-foreign", "GET http://{a}/ HTTP/1.1\r\nHost: internal-admin.example\r\n\r\n", "refuse"),
    ("host-other-port", "GET http://{a}/ HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", "refuse"),
    (
        "target-foreign",
        "GET http://internal-admin.example/ HTTP/1.1\r\nHost: {a}\r\n\r\n",
        "refuse",
    ),
    ("origin-form", "GET /x HTTP/1.1\r\nHost: {a}\r\n\r\n", "refuse"),
    ("asterisk-form", "OPTIONS * HTTP/1.1\r\nHost: {a}\r\n\r\n", "refuse"),
    ("https-absolute", "GET https://{a}/ HTTP/1.1\r\nHost: {a}\r\n\r\n", "refuse"),
    ("userinfo", "GET http://u:p@{a}/ HTTP/1.1\r\nHost: {a}\r\n\r\n", "refuse"),
    ("connect", "CONNECT {a} HTTP/1.1\r\nHost: {a}\r\n\r\n", "pass"),
    ("connect-lower", "connect {a} HTTP/1.1\r\nHost: {a}\r\n\r\n", "pass"),
    (
        "connect-host-foreign",
        "CONNECT {a} HTTP/1.1\r\nHost: internal-admin.example\r\n\r\n",
        "refuse",
    ),
    (
        "connect-foreign",
        "CONNECT internal-admin.example:443 HTTP/1.1\r\nHost: internal-admin.example:443\r\n\r\n",
        "refuse",
    ),
    ("connect-path", "CONNECT http://{a}/ HTTP/1.1\r\nHost: {a}\r\n\r\n", "refuse"),
    (
        "connect-undeclared-port",
        "CONNECT 127.0.0.1:5432 HTTP/1.1\r\nHost: 127.0.0.1:5432\r\n\r\n",
        "refuse",
    ),
    (
        "two-hosts",
        "GET http://{a}/ HTTP/1.1\r\nHost: {a}\r\nHost: internal-admin.example\r\n\r\n",
        "parse",
    ),
    (
        "bare-lf",
        "GET http://{a}/ HTTP/1.1\r\nHost: {a}\r\nX: a\nHost: internal-admin.example\r\n\r\n",
        "parse",
    ),
    (
        "bare-cr",
        "GET http://{a}/ HTTP/1.1\r\nHost: {a}\r\nX: a\rHost: internal-admin.example\r\n\r\n",
        "parse",
    ),
    (
        "folded",
        "GET http://{a}/ HTTP/1.1\r\nHost: {a}\r\nX: a\r\n Host: internal-admin.example\r\n\r\n",
        "parse",
    ),
    ("lf-only", "GET http://{a}/ HTTP/1.1\nHost: {a}\n\n", "parse"),
    ("no-version", "GET http://{a}/\r\nHost: {a}\r\n\r\n", "parse"),
    ("space-in-name", "GET http://{a}/ HTTP/1.1\r\nHost : internal-admin.example\r\n\r\n", "parse"),
    ("nul-in-value", "GET http://{a}/ HTTP/1.1\r\nHost: {a}\r\nX: a\x00b\r\n\r\n", "parse"),
    (
        "chunked",
        "POST http://{a}/ HTTP/1.1\r\nHost: {a}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "refuse",
    ),
    (
        "two-lengths",
        "POST http://{a}/ HTTP/1.1\r\nHost: {a}\r\nContent-Length: 1\r\n"
        "Content-Length: 2\r\n\r\nhi",
        "parse",
    ),
]


@pytest.mark.parametrize(("name", "template", "expected"), FORMS, ids=[f[0] for f in FORMS])
def test_every_form_of_request_goes_through_the_one_decision(
    name: str, template: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    decided: list[egress.Target | Exception] = []
    real = egress.allowed_target

    def spy(server: str, request: object, allowed: tuple[str, ...]) -> egress.Target:
        try:
            target = real(server, request, allowed)  # type: ignore[arg-type]
        except Exception as exc:
            decided.append(exc)
            raise
        decided.append(target)
        return target

    monkeypatch.setattr(egress, "allowed_target", spy)

    async def main() -> tuple[bytes, list[bytes]]:
        seen: list[bytes] = []
        server, port = await _backend(seen)
        proxy = EgressProxy("s", (f"127.0.0.1:{port}",))
        await proxy.start()
        try:
            reader, writer = await asyncio.open_unix_connection(proxy.socket)
            writer.write(template.format(a=f"127.0.0.1:{port}").encode("latin-1"))
            await writer.drain()
            if name.startswith("connect"):
                await asyncio.sleep(0.2)
                with contextlib.suppress(ConnectionError):  # a refusal closed it
                    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                    await writer.drain()
            answer = b""
            try:
                while chunk := await asyncio.wait_for(reader.read(65536), 1.0):
                    answer += chunk
            except (TimeoutError, ConnectionError):
                pass
            writer.close()
            await asyncio.sleep(0.6)
        finally:
            await proxy.stop()
            server.close()
        return answer, seen

    answer, seen = asyncio.run(main())
    received = [s for s in seen if s]
    if expected == "parse":
        assert answer.startswith((b"HTTP/1.1 400", b"HTTP/1.1 431")), answer
        assert decided == [] and received == [], (decided, received)
        return
    assert len(decided) == 1, decided  # decided once, by the one function
    if expected == "refuse":
        assert not answer.startswith(b"HTTP/1.1 200"), answer
        assert received == [], received
        return
    target = decided[0]
    assert isinstance(target, egress.Target), target
    assert b"200" in answer.split(b"\r\n", 1)[0], answer
    assert len(received) == 1 and b"internal-admin" not in received[0], received
    if not target.tunnel:
        assert f"\r\nHost: {target.authority}\r\n".encode() in received[0], received
        assert received[0].count(b"\r\nHost:") == 1
