"""OpenAI-compatible Chat Completions (OpenAI, Ollama, vLLM, llama.cpp server).

Request: ``POST {base_url}/chat/completions`` with ``stream: true``; tools in the
``openai`` export format. Stream: ``data:`` events of ``chat.completion.chunk``
objects ending with ``data: [DONE]``; text arrives in ``choices[0].delta.content``,
tool calls in ``choices[0].delta.tool_calls`` as pieces keyed by ``index`` (the first
piece of each carries ``id`` and ``function.name``, the rest carry fragments of
``function.arguments``). A server that ignores ``stream`` and answers with one JSON
``chat.completion`` is read too. Tool results go back as ``role: tool`` messages with
their ``tool_call_id``, in call order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

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


class OpenAIAdapter:
    provider = "openai"
    format = "openai"

    def __init__(self, settings: ModelSettings, system: str) -> None:
        self.settings = settings
        self.system = system
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        self._ids = 0

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        return headers

    def start(self, prompt: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        if self.system:
            messages.append({"role": "system", "content": self.system})
        messages.append({"role": "user", "content": prompt})
        return messages

    def body(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.settings.name,
            "messages": list(messages),
            "stream": True,
        }
        if tools:
            body["tools"] = list(tools)
        # OpenAI's own API wants max_completion_tokens (newer models reject max_tokens);
        # compatible servers (Ollama, vLLM, llama.cpp) know max_tokens.
        host = (urlsplit(self.settings.base_url).hostname or "").lower()
        key = "max_completion_tokens" if host == "api.openai.com" else "max_tokens"
        body[key] = self.settings.max_tokens
        return body

    # -- responses -------------------------------------------------------------------

    def read_stream(self, events: Iterator[Event], on_text: TextSink) -> Turn:
        text: list[str] = []
        slots: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage: dict[str, Any] | None = None
        done = False
        for event in events:
            if event.data.strip() == "[DONE]":
                done = True
                break
            chunk = decode_event(event.data, self.provider)
            if not isinstance(chunk, Mapping):
                continue
            message = error_message(chunk)
            if message is not None:
                raise ProviderError(f"openai stream reported an error: {message}")
            if isinstance(chunk.get("usage"), Mapping):
                usage = dict(chunk["usage"])
            for choice in chunk.get("choices") or ():
                if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta") or {}
                content = delta.get("content")
                if isinstance(content, str) and content:
                    text.append(content)
                    on_text(content)
                for piece in delta.get("tool_calls") or ():
                    self._add_piece(slots, piece)
                if choice.get("finish_reason"):
                    finish = str(choice["finish_reason"])
        if not done and finish is None:
            raise ProviderError(
                "openai stream ended before the response was complete "
                "(no finish_reason and no [DONE])"
            )
        calls = [slots[i] for i in sorted(slots)]
        return self._turn("".join(text), calls, finish, usage)

    @staticmethod
    def _add_piece(slots: dict[int, dict[str, Any]], piece: Any) -> None:
        if not isinstance(piece, Mapping):
            return
        function = piece.get("function") or {}
        call_id = piece.get("id") or ""
        index = piece.get("index")
        if not isinstance(index, int):
            # Servers that send each call whole and without "index": match by id.
            index = next(
                (i for i, s in slots.items() if call_id and s["id"] == call_id), len(slots)
            )
        slot = slots.setdefault(index, {"id": "", "name": "", "arguments": []})
        if call_id:
            slot["id"] = call_id
        if function.get("name"):
            slot["name"] = function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            slot["arguments"].append(arguments)
        elif isinstance(arguments, Mapping):  # some servers send an already decoded object
            slot["arguments"].append(json.dumps(arguments))

    def read_json(self, data: Any, on_text: TextSink) -> Turn:
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise ProviderError(
                f"openai response has no choices[0].message: {json.dumps(data)[:200]}"
            ) from None
        text = message.get("content") or ""
        if not isinstance(text, str):
            text = ""
        if text:
            on_text(text)
        slots: dict[int, dict[str, Any]] = {}
        for i, piece in enumerate(message.get("tool_calls") or ()):
            if isinstance(piece, Mapping):
                self._add_piece(slots, {**piece, "index": i})
        usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else None
        return self._turn(
            text, [slots[i] for i in sorted(slots)], choice.get("finish_reason"), usage
        )

    def _turn(
        self,
        text: str,
        slots: list[dict[str, Any]],
        finish: str | None,
        usage: Mapping[str, Any] | None,
    ) -> Turn:
        calls: list[ModelCall] = []
        wire: list[dict[str, Any]] = []
        for slot in slots:
            if not slot["id"]:
                self._ids += 1
                slot["id"] = f"call_{self._ids}"
            raw = "".join(slot["arguments"])
            name = slot["name"]
            if name:
                arguments, error = parse_arguments(raw, name)
            else:
                arguments, error = None, "tool call has no function name"
            calls.append(
                ModelCall(
                    id=slot["id"], name=name, raw_arguments=raw, arguments=arguments, error=error
                )
            )
            wire.append(
                {"id": slot["id"], "type": "function", "function": {"name": name, "arguments": raw}}
            )
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if wire:
            message["tool_calls"] = wire
        else:
            message["content"] = text
        return Turn(
            text=text,
            calls=tuple(calls),
            stop_reason=finish,
            message=message,
            usage=dict(usage) if usage else None,
        )

    def results(self, turn: Turn, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        return [
            {"role": "tool", "tool_call_id": call.id, "content": result_text(result)}
            for call, result in zip(turn.calls, results, strict=True)
        ]
