"""Fake model servers for agent tests without a network: ``harness.testing.FakeModelServer``.

A local server on 127.0.0.1 (a free port, in a thread) that speaks the real wire
formats: OpenAI Chat Completions (``POST /v1/chat/completions``) and Anthropic Messages
(``POST /v1/messages``), streamed as server-sent events over HTTP/1.1 chunked transfer
encoding when the request says ``stream: true``, one JSON document otherwise. It
replays scripted :class:`Reply` objects in order and records every request it got
(:class:`Request`: path, headers, decoded JSON body). Point ``Harness.run`` (or any
OpenAI / Anthropic client) at ``server.base_url``::

    from harness.testing import FakeModelServer, Reply, ToolUse

    with FakeModelServer("openai", [Reply(tools=[ToolUse("add", {"a": 1})]),
                                    Reply(text="done")]) as server:
        h.run("add 1", provider="openai", model="fake-model", base_url=server.base_url)
        server.requests[1].body["messages"]     # what the loop sent back

Documented in docs/testing.md ("Agent tests with a fake model").
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ToolUse:
    """A tool call the model makes: ``arguments`` as a dict, or a str sent verbatim
    (to test broken JSON); ``id`` is generated when None."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)  # a str is sent verbatim
    id: str | None = None

    @property
    def raw(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Reply:
    """One scripted model turn."""

    text: str = ""
    tools: list[ToolUse] = field(default_factory=list)
    chunk: int = 0  # split text and arguments into deltas of this many characters (0: whole)
    interleave: bool = False  # OpenAI: send argument pieces of parallel calls round-robin
    split_bytes: int = 0  # write the SSE byte stream in HTTP chunks of this size (0: per event)
    status: int = 200  # >= 400: an HTTP error with a provider-style error body
    error: str = "scripted failure"
    error_type: str = "api_error"
    stream_error: str | None = None  # an error event after the text
    truncate: bool = False  # end the stream without [DONE] / message_stop
    json: bool = False  # answer with one JSON document even if streaming was asked for


@dataclass(frozen=True)
class Request:
    """One request the server received (``body``: decoded JSON, else the text)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def _pieces(text: str, size: int) -> list[str]:
    if size <= 0 or not text:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


class FakeModelServer:
    """A scripted model on 127.0.0.1 speaking ``provider``'s wire format ("openai" or
    "anthropic"). Each request gets the next of ``replies`` (``repeat_last``: the last
    one forever); ``requests`` records what was sent; ``base_url`` is what a client is
    configured with. Use it as a context manager (it runs in a daemon thread)."""

    def __init__(
        self,
        provider: str,
        replies: list[Reply],
        *,
        repeat_last: bool = False,
        model: str = "fake-model",
    ) -> None:
        if provider not in ("openai", "anthropic"):
            raise ValueError(f'provider must be "openai" or "anthropic", got {provider!r}')
        self.provider, self.model = provider, model
        self.replies = list(replies)
        self.repeat_last = repeat_last
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None

    # -- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> FakeModelServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        httpd = self._started()
        httpd.shutdown()
        httpd.server_close()

    def _started(self) -> ThreadingHTTPServer:
        if self._httpd is None:
            raise RuntimeError("start the server first: with FakeModelServer(...) as server:")
        return self._httpd

    @property
    def port(self) -> int:
        """The port it listens on (once started with ``with``)."""
        return int(self._started().server_address[1])

    @property
    def base_url(self) -> str:
        """What a user would configure: ``.../v1`` for OpenAI, the host for Anthropic."""
        root = f"http://127.0.0.1:{self.port}"
        return root + "/v1" if self.provider == "openai" else root

    def next_reply(self) -> Reply | None:
        with self._lock:
            if len(self.replies) > 1 or (self.replies and not self.repeat_last):
                return self.replies.pop(0)
            return self.replies[0] if self.replies else None

    def new_id(self) -> str:
        return f"{'call' if self.provider == 'openai' else 'toolu'}_{next(self._ids):03d}"

    # -- wire formats ----------------------------------------------------------------

    def error_body(self, reply: Reply) -> dict[str, Any]:
        if self.provider == "openai":
            return {
                "error": {
                    "message": reply.error,
                    "type": reply.error_type,
                    "param": None,
                    "code": None,
                }
            }
        return {"type": "error", "error": {"type": reply.error_type, "message": reply.error}}

    def json_body(self, reply: Reply) -> dict[str, Any]:
        calls = [(t.id or self.new_id(), t) for t in reply.tools]
        if self.provider == "openai":
            message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
            if calls:
                message["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": t.name, "arguments": t.raw}}
                    for i, t in calls
                ]
            return {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 1,
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if calls else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
        content += [
            {"type": "tool_use", "id": i, "name": t.name, "input": json.loads(t.raw)}
            for i, t in calls
        ]
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    def sse(self, reply: Reply) -> Iterator[bytes]:
        events = (
            self._openai_events(reply)
            if self.provider == "openai"
            else self._anthropic_events(reply)
        )
        for name, data in events:
            payload = data if isinstance(data, str) else json.dumps(data)
            head = f"event: {name}\n" if name else ""
            yield (head + f"data: {payload}\n\n").encode("utf-8")

    def _openai_events(self, reply: Reply) -> Iterator[tuple[str, Any]]:  # noqa: C901
        def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str, Any]:
            return "", {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        yield chunk({"role": "assistant", "content": ""})
        if reply.text:
            for text in _pieces(reply.text, reply.chunk):
                yield chunk({"content": text})
        if reply.stream_error is not None:
            yield "", {"error": {"message": reply.stream_error, "type": "server_error"}}
            return
        heads: list[dict[str, Any]] = []
        bodies: list[list[dict[str, Any]]] = []
        for index, tool in enumerate(reply.tools):
            heads.append(
                {
                    "index": index,
                    "id": tool.id or self.new_id(),
                    "type": "function",
                    "function": {"name": tool.name, "arguments": ""},
                }
            )
            bodies.append(
                [
                    {"index": index, "function": {"arguments": p}}
                    for p in _pieces(tool.raw, reply.chunk)
                ]
            )
        if reply.interleave:
            for head in heads:
                yield chunk({"tool_calls": [head]})
            for row in itertools.zip_longest(*bodies):
                for piece in row:
                    if piece is not None:
                        yield chunk({"tool_calls": [piece]})
        else:
            for head, pieces in zip(heads, bodies, strict=True):
                yield chunk({"tool_calls": [head]})
                for piece in pieces:
                    yield chunk({"tool_calls": [piece]})
        if reply.truncate:
            return
        yield chunk({}, "tool_calls" if reply.tools else "stop")
        yield "", "[DONE]"

    def _anthropic_events(self, reply: Reply) -> Iterator[tuple[str, Any]]:
        yield (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        )
        yield "ping", {"type": "ping"}
        index = 0
        if reply.text:
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            for piece in _pieces(reply.text, reply.chunk):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
            index += 1
        if reply.stream_error is not None:
            yield (
                "error",
                {
                    "type": "error",
                    "error": {"type": "overloaded_error", "message": reply.stream_error},
                },
            )
            return
        for tool in reply.tools:
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": tool.id or self.new_id(),
                        "name": tool.name,
                        "input": {},
                    },
                },
            )
            for piece in ["", *_pieces(tool.raw, reply.chunk)]:
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
            index += 1
        if reply.truncate:
            return
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "tool_use" if reply.tools else "end_turn",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": 5},
            },
        )
        yield "message_stop", {"type": "message_stop"}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:
        fake = self.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with fake._lock:
            fake.requests.append(
                Request(
                    method="POST",
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
            )
        expected = "/v1/chat/completions" if fake.provider == "openai" else "/v1/messages"
        if self.path != expected:
            return self._json(404, {"error": {"message": f"no route {self.path}"}})
        reply = fake.next_reply()
        if reply is None:
            return self._json(500, fake.error_body(Reply(error="fake server: no reply left")))
        if reply.status >= 400:
            return self._json(reply.status, fake.error_body(reply))
        if reply.json or not (isinstance(body, dict) and body.get("stream")):
            return self._json(200, fake.json_body(reply))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        data = fake.sse(reply)
        if reply.split_bytes:
            whole = b"".join(data)
            data = iter(
                [whole[i : i + reply.split_bytes] for i in range(0, len(whole), reply.split_bytes)]
            )
        for piece in data:
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
