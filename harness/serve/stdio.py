"""``harness serve`` over stdio: the transport, and a fast lane for ``tools/call``.

The SDK's stdio transport reads and writes on worker threads (a thread hop for every
line, each way) and sends every request through its dispatcher, runner and middleware.
Here stdin and stdout are read and written from the event loop (non-blocking pipes),
and a plain handshake-era ``tools/call`` goes straight to
:meth:`HarnessMCPServer.call`, the same method the SDK's handler calls. The lane takes
a request only when the SDK would hand the same parameters to that handler:

- the connection is initialized (its client exists) in a handshake-era version, and
  no OpenTelemetry provider is set (the SDK's server span is then the call's parent);
- the line is UTF-8 JSON with exactly ``jsonrpc``, ``id`` (integer or string),
  ``method`` and ``params``; ``params`` has ``name`` (a string) and optionally
  ``arguments`` (an object or null), nothing else (no ``_meta``, ``task``, ...); no
  ``NaN``/``Infinity`` and no ``\\uD800``-``\\uDFFF`` escapes (the SDK's parser reads
  those its own way).

Its result is shaped for the wire by the SDK's own per-version serializer
(``mcp_types.methods.serialize_server_result``), so the answer is the SDK's
(``tests/serve/test_mcp_stdio_lane.py`` compares the two on the wire). A
``notifications/cancelled`` for a lane request cancels it here, and it is never
answered. Everything else goes to the SDK unchanged.

At the end of input every request still pending is answered (``printf ... | harness
serve`` gets all its answers), unless the client has closed its end of stdout as well:
then the calls in flight are cancelled, their workers and commands stopped.

As with the SDK's transport, while serving fd 0 reads /dev/null and fd 1 writes to
stderr, so children and stray prints never reach the wire. When stdin or stdout is
not a pipe or a socket (a file, a terminal) the SDK's own transport serves.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import select
import stat
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from mcp_types import methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from harness.serve import tracing

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from harness.serve.mcp import Client, HarnessMCPServer

log = logging.getLogger("harness.serve")

Replay = tuple[bytes, "dict[str, Any] | None"]
INTERNAL_ERROR = -32603
DRAIN_POLL_S = 0.02
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_PARAMS = frozenset(("name", "arguments"))


async def serve_stdio(server: HarnessMCPServer, replay: Replay | None = None) -> None:
    """Serve the process's stdin and stdout until the client goes away. ``replay``: the
    first line, already read by the fast start (fast_start.py), and the answer already
    sent for it, if any."""
    async with anyio.create_task_group() as tg:
        if server.watch:
            tg.start_soon(server.watch_loop)
        log.info("serving %d tools from %s over stdio", server.tool_count(), server.root)
        claimed = _claim()
        if claimed is None:
            await _serve_sdk_transport(server, replay)
        else:
            in_fd, out_fd, restore = claimed
            try:
                await Connection(server, in_fd, out_fd).run(replay)
            finally:
                restore()
        tg.cancel_scope.cancel()
        server.close_listeners()


def _pipe_like(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _claim() -> tuple[int, int, Callable[[], None]] | None:
    """Private non-blocking copies of fds 0 and 1, which now read /dev/null and write
    to stderr; and how to put everything back. None unless both are pipes or sockets."""
    if not (_pipe_like(0) and _pipe_like(1)):
        return None
    in_fd, out_fd = os.dup(0), os.dup(1)  # not inherited by children
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    os.set_blocking(in_fd, False)
    os.set_blocking(out_fd, False)

    def restore() -> None:
        # What the process printed while serving (a Python tool's print(), buffered when
        # PYTHONUNBUFFERED is unset) goes to stderr, where fd 1 points now: flushed
        # after the restore it would land on the protocol stream after the replies.
        for stream in (sys.stdout, sys.__stdout__):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.flush()
        for fd, target in ((in_fd, 0), (out_fd, 1)):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)
                os.dup2(fd, target)
                os.close(fd)

    return in_fd, out_fd, restore


def lane_request(line: bytes) -> tuple[int | str, str, dict[str, Any]] | None:
    """``(id, name, arguments)`` when ``line`` is a tools/call the lane takes, else None."""
    try:
        text = line.decode("utf-8")
        if _SURROGATE.search(text):
            return None
        msg = json.loads(text, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return None
    if (
        type(msg) is not dict
        or len(msg) != 4
        or msg.get("jsonrpc") != "2.0"
        or msg.get("method") != "tools/call"
    ):
        return None
    rid, params = msg.get("id"), msg.get("params")
    if type(rid) not in (int, str) or type(params) is not dict or not _PARAMS.issuperset(params):
        return None
    name, arguments = params.get("name"), params.get("arguments")
    if type(name) is not str:
        return None
    if arguments is None:
        arguments = {}
    elif type(arguments) is not dict:
        return None
    return rid, name, arguments  # type: ignore[return-value]  # rid: int | str, checked


def _refuse(constant: str) -> Any:
    raise ValueError(constant)


def lane_response(rid: int | str, result: types.CallToolResult, version: str) -> bytes:
    """The JSON-RPC answer line, shaped as the SDK shapes it for ``version``."""
    message: types.JSONRPCResponse | types.JSONRPCError
    try:
        wire = methods.serialize_server_result(
            "tools/call", version, result.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
        message = types.JSONRPCResponse(jsonrpc="2.0", id=rid, result=wire)
    except Exception:  # noqa: BLE001 - the SDK answers an invalid result the same way
        log.exception("handler for 'tools/call' returned an invalid result")
        message = types.JSONRPCError(
            jsonrpc="2.0",
            id=rid,
            error=types.ErrorData(
                code=INTERNAL_ERROR, message="Handler returned an invalid result"
            ),
        )
    return (message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()


def _cancelled_id(line: bytes) -> int | str | None:
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if type(msg) is not dict or msg.get("method") != "notifications/cancelled" or "id" in msg:
        return None
    params = msg.get("params")
    rid = params.get("requestId") if type(params) is dict else None
    return rid if type(rid) in (int, str) else None


class Connection:
    """One stdio connection: reads lines, runs lane calls, feeds the SDK the rest."""

    def __init__(self, server: HarnessMCPServer, in_fd: int, out_fd: int) -> None:
        self.server = server
        self.in_fd = in_fd
        self.out_fd = out_fd
        self.lock = anyio.Lock(fast_acquire=True)
        self.inflight: dict[int | str, anyio.CancelScope] = {}
        self.sdk_pending: set[int | str] = set()  # requests the SDK has not answered yet
        self.broken = False
        self._tg: TaskGroup | None = None

    async def run(self, replay: Replay | None) -> None:
        in_send, in_recv = anyio.create_memory_object_stream[Any](0)
        out_send, out_recv = anyio.create_memory_object_stream[Any](0)
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._pump_out, out_recv, replay[1] if replay else None)
            tg.start_soon(self._read, in_send, replay[0] if replay else None)
            await self.server.server.run(in_recv, out_send, self.server.init_options())
            tg.cancel_scope.cancel()

    # -- in ------------------------------------------------------------------------------

    async def _read(self, in_send: MemoryObjectSendStream[Any], first: bytes | None) -> None:
        async with in_send:
            if first is not None:
                await self._forward(in_send, first)
            buf = bytearray()
            while not self.broken:
                try:
                    chunk = os.read(self.in_fd, 1 << 16)
                except BlockingIOError:
                    await anyio.wait_readable(self.in_fd)
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                start = len(buf)
                buf += chunk
                nl = buf.find(b"\n", start)
                if nl < 0:
                    continue
                begin = 0
                while nl >= 0:
                    await self._line(bytes(buf[begin:nl]), in_send)
                    begin = nl + 1
                    nl = buf.find(b"\n", begin)
                del buf[:begin]
            if buf.strip():
                await self._line(bytes(buf), in_send)
            await self._drain()

    async def _drain(self) -> None:
        """At the end of input: answer what is pending, unless the client has closed
        its end of stdout too (then the lane's calls are cancelled here and the SDK's
        when its input closes)."""
        poller = select.poll()
        poller.register(self.out_fd, 0)  # POLLERR / POLLHUP only
        while (self.inflight or self.sdk_pending) and not self.broken:
            if poller.poll(0):
                break
            await anyio.sleep(DRAIN_POLL_S)
        for scope in list(self.inflight.values()):
            scope.cancel()

    async def _line(self, line: bytes, in_send: MemoryObjectSendStream[Any]) -> None:
        if b'"tools/call"' in line:
            client = self._client()
            request = lane_request(line) if client is not None else None
            if request is not None and request[0] not in self.inflight:
                assert self._tg is not None and client is not None
                scope = self.inflight[request[0]] = anyio.CancelScope()
                self._tg.start_soon(self._call, scope, client, *request)
                return
        if self.inflight and b"notifications/cancelled" in line:
            rid = _cancelled_id(line)
            pending = self.inflight.get(rid) if rid is not None else None
            if pending is not None:
                pending.cancel()
                return
        await self._forward(in_send, line)

    async def _forward(self, in_send: MemoryObjectSendStream[Any], line: bytes) -> None:
        """A line to the SDK, keeping count of the requests it has to answer."""
        message = _parse(line)
        if isinstance(message, Exception):
            await in_send.send(message)
            return
        if isinstance(message, types.JSONRPCRequest):
            self.sdk_pending.add(message.id)
        elif (
            isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
            and message.params
        ):
            self.sdk_pending.discard(message.params.get("requestId"))  # never answered
        await in_send.send(SessionMessage(message))

    def _client(self) -> Client | None:
        """The connection's client, when the lane may serve it."""
        found = None
        for client in self.server.clients.values():
            if client.modern or client.closed:
                continue
            if found is not None:
                return None
            found = client
        if (
            found is None
            or found.version is None
            or found.version in MODERN_PROTOCOL_VERSIONS
            or tracing.active()
        ):
            return None
        return found

    async def _call(
        self,
        scope: anyio.CancelScope,
        client: Client,
        rid: int | str,
        name: str,
        arguments: dict[str, Any],
    ) -> None:
        log.debug('tools/call "%s" (id %r) in the stdio lane', name, rid)
        data = None
        try:
            with scope:
                result = await self.server.call(client, name, arguments)
                assert client.version is not None
                data = lane_response(rid, result, client.version)
        finally:
            if self.inflight.get(rid) is scope:
                del self.inflight[rid]
        if data is not None:  # a cancelled request is never answered
            await self._write(data)

    # -- out -----------------------------------------------------------------------------

    async def _pump_out(
        self, out_recv: MemoryObjectReceiveStream[Any], answered: dict[str, Any] | None
    ) -> None:
        """Write the SDK's messages; its answer to the request the fast start answered
        (fast_start.py) is dropped, and compared with ours."""
        drop = answered["id"] if answered is not None else None
        async with out_recv:
            async for item in out_recv:
                message = item.message
                text = message.model_dump_json(by_alias=True, exclude_unset=True)
                if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
                    self.sdk_pending.discard(message.id)
                if (
                    drop is not None
                    and getattr(message, "id", None) == drop
                    and (hasattr(message, "result") or hasattr(message, "error"))
                ):
                    drop = None
                    _compare(answered, text)
                    continue
                await self._write((text + "\n").encode())

    async def _write(self, data: bytes) -> None:
        """One whole line (never interleaved, never cut by a cancellation)."""
        with anyio.CancelScope(shield=True):
            async with self.lock:
                view = memoryview(data)
                while view and not self.broken:
                    try:
                        view = view[os.write(self.out_fd, view) :]
                    except BlockingIOError:
                        await anyio.wait_writable(self.out_fd)
                    except OSError:  # the client closed its end
                        self.broken = True


def _parse(line: bytes) -> Any:
    """A line as the SDK's own transport parses it: a message, or the exception."""
    try:
        return types.jsonrpc_message_adapter.validate_json(
            line.decode("utf-8", errors="replace"), by_name=False
        )
    except Exception as exc:  # noqa: BLE001 - the SDK answers a bad line
        return exc


async def _to_sdk(in_send: MemoryObjectSendStream[Any], line: bytes) -> None:
    message = _parse(line)
    await in_send.send(message if isinstance(message, Exception) else SessionMessage(message))


def _compare(answered: dict[str, Any] | None, theirs: str) -> None:
    mine = json.loads(json.dumps(answered))
    if mine != json.loads(theirs):
        log.warning(
            "the fast initialize answer differed from the SDK's: sent %s, the SDK says %s",
            mine,
            theirs,
        )


async def _serve_sdk_transport(server: HarnessMCPServer, replay: Replay | None) -> None:
    """The SDK's stdio transport (stdin or stdout is a file or a terminal)."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        if replay is None:
            await server.server.run(read_stream, write_stream, server.init_options())
            return
        first, answered = replay
        in_send, in_recv = anyio.create_memory_object_stream[Any](0)
        out_send, out_recv = anyio.create_memory_object_stream[Any](0)

        async def pump_in() -> None:
            async with in_send:
                await _to_sdk(in_send, first)
                async for item in read_stream:
                    await in_send.send(item)

        async def pump_out() -> None:
            drop = answered["id"] if answered is not None else None
            async with out_recv:
                async for item in out_recv:
                    message = item.message
                    if (
                        drop is not None
                        and getattr(message, "id", None) == drop
                        and (hasattr(message, "result") or hasattr(message, "error"))
                    ):
                        drop = None
                        _compare(
                            answered, message.model_dump_json(by_alias=True, exclude_unset=True)
                        )
                        continue
                    await write_stream.send(item)
            await write_stream.aclose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_in)
            tg.start_soon(pump_out)
            await server.server.run(in_recv, out_send, server.init_options())
            tg.cancel_scope.cancel()
