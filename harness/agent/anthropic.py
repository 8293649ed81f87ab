"""The Anthropic Messages API.

Request: ``POST {base_url}/v1/messages`` (``x-api-key``, ``anthropic-version``) with
``stream: true``, the system prompt in ``system`` and tools in the ``anthropic``
export format. Stream: named SSE events ``message_start``, ``content_block_start``,
``content_block_delta`` (``text_delta``, ``input_json_delta`` with ``partial_json``,
``thinking_delta``, ``signature_delta``), ``content_block_stop``, ``message_delta``
(``stop_reason``, usage), ``message_stop``; ``ping`` is ignored and ``error`` fails the
turn. Tool results go back as one user message of ``tool_result`` blocks
(``tool_use_id``, ``content``, ``is_error``), in call order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from harness.results import ToolResult

from .base import (
    ModelCall,
    ModelSettings,
    ProviderError,
    TextSink,
    Turn,
    decode_event,
    error_message,
    parse_arguments,
    result_text,
)
from .sse import Event

API_VERSION = "2023-06-01"


class AnthropicAdapter:
    provider = "anthropic"
    format = "anthropic"

    def __init__(self, settings: ModelSettings, system: str) -> None:
        self.settings = settings
        self.system = system
        base = settings.base_url.rstrip("/")
        self.url = base + ("/messages" if base.endswith("/v1") else "/v1/messages")

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION, "Accept": "text/event-stream"}
        if self.settings.api_key:
            headers["x-api-key"] = self.settings.api_key
        return headers

    def start(self, prompt: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": prompt}]

    def body(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.settings.name,
            "max_tokens": self.settings.max_tokens,
            "messages": list(messages),
            "stream": True,
        }
        if self.system:
            body["system"] = self.system
        if tools:
            body["tools"] = list(tools)
        return body

    # -- responses -------------------------------------------------------------------

    def read_stream(self, events: Iterator[Event], on_text: TextSink) -> Turn:
        blocks: dict[int, dict[str, Any]] = {}
        partial: dict[int, list[str]] = {}
        stop: str | None = None
        usage: dict[str, Any] = {}
        finished = False
        for event in events:
            data = decode_event(event.data, self.provider)
            if not isinstance(data, Mapping):
                continue
            kind = data.get("type", event.event)
            if kind == "error":
                raise ProviderError(
                    f"anthropic stream reported an error: {error_message(data) or event.data}"
                )
            if kind == "message_start":
                usage.update((data.get("message") or {}).get("usage") or {})
            elif kind == "content_block_start":
                index = int(data.get("index", len(blocks)))
                blocks[index] = dict(data.get("content_block") or {})
                partial[index] = []
            elif kind == "content_block_delta":
                index = int(data.get("index", 0))
                block = blocks.setdefault(index, {"type": "text", "text": ""})
                self._apply(block, partial.setdefault(index, []), data.get("delta") or {}, on_text)
            elif kind == "message_delta":
                stop = (data.get("delta") or {}).get("stop_reason") or stop
                usage.update(data.get("usage") or {})
            elif kind == "message_stop":
                finished = True
                break
        if not finished:
            raise ProviderError(
                "anthropic stream ended before the response was complete (no message_stop)"
            )
        for index, block in blocks.items():
            if block.get("type") == "tool_use" and partial.get(index):
                block["_raw"] = "".join(partial[index])
        return self._turn([blocks[i] for i in sorted(blocks)], stop, usage)

    @staticmethod
    def _apply(
        block: dict[str, Any], partial: list[str], delta: Mapping[str, Any], on_text: TextSink
    ) -> None:
        kind = delta.get("type")
        if kind == "text_delta":
            piece = str(delta.get("text", ""))
            block["text"] = block.get("text", "") + piece
            if piece:
                on_text(piece)
        elif kind == "input_json_delta":
            partial.append(str(delta.get("partial_json", "")))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))

    def read_json(self, data: Any, on_text: TextSink) -> Turn:
        content = data.get("content") if isinstance(data, Mapping) else None
        if not isinstance(content, list):
            raise ProviderError(f"anthropic response has no content list: {json.dumps(data)[:200]}")
        blocks = [dict(b) for b in content if isinstance(b, Mapping)]
        for block in blocks:
            if block.get("type") == "text" and block.get("text"):
                on_text(str(block["text"]))
        usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
        return self._turn(blocks, data.get("stop_reason"), dict(usage or {}))

    def _turn(self, blocks: list[dict[str, Any]], stop: str | None, usage: dict[str, Any]) -> Turn:
        text: list[str] = []
        calls: list[ModelCall] = []
        content: list[dict[str, Any]] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                if block.get("text"):  # the API rejects empty text blocks
                    text.append(str(block["text"]))
                    content.append({"type": "text", "text": block["text"]})
            elif kind == "tool_use":
                name = str(block.get("name", ""))
                raw = block.pop("_raw", None)
                if raw is None:
                    value = block.get("input")
                    raw = json.dumps(value if value is not None else {})
                arguments, error = parse_arguments(raw, name)
                if not name:
                    arguments, error = None, "tool call has no name"
                calls.append(
                    ModelCall(
                        id=str(block.get("id", "")),
                        name=name,
                        raw_arguments=raw,
                        arguments=arguments,
                        error=error,
                    )
                )
                # The API wants an object back as input even when the model's was broken.
                content.append(
                    {
                        "type": "tool_use",
                        "id": block.get("id", ""),
                        "name": name,
                        "input": arguments if arguments is not None else {},
                    }
                )
            elif kind in ("thinking", "redacted_thinking"):
                content.append(block)  # must be sent back unchanged with tool results
        message = {"role": "assistant", "content": content}
        return Turn(
            text="".join(text),
            calls=tuple(calls),
            stop_reason=stop,
            message=message,
            usage=usage or None,
        )

    def results(self, turn: Turn, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        for call, result in zip(turn.calls, results, strict=True):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call.id,
                "is_error": result.is_error,
            }
            text = result_text(result)
            if text:
                block["content"] = text
            blocks.append(block)
        return [{"role": "user", "content": blocks}] if blocks else []
