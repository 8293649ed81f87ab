"""The pieces under the loop: SSE framing, settings resolution, argument decoding."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from harness.agent import ModelConfigError, ModelSettings, ProviderError, resolve_settings
from harness.agent.anthropic import AnthropicAdapter
from harness.agent.base import is_loopback, parse_arguments
from harness.agent.openai import OpenAIAdapter
from harness.agent.sse import Event, iter_events
from harness.config import ModelConfig


def events(text: str) -> list[Event]:
    # The same line splitting the loop uses (httpx handles \n, \r\n and \r).
    response = httpx.Response(200, content=text.encode())
    return list(iter_events(response.iter_lines()))


def test_sse_events_data_joining_comments_and_line_endings() -> None:
    stream = (
        ": keep-alive comment\r\n"
        'event: message_start\r\ndata: {"a":1}\r\n\r\n'
        "data: line one\ndata:line two\n\n"
        "event: ping\n\n"  # no data: skipped
        "data:  two spaces\rdata\r\r"
        "data: [DONE]"
    )  # last event not terminated
    assert events(stream) == [
        Event(event="message_start", data='{"a":1}'),
        Event(event="message", data="line one\nline two"),
        Event(event="message", data=" two spaces\n"),
        Event(event="message", data="[DONE]"),
    ]


def test_sse_ignores_id_and_retry_fields() -> None:
    assert events("id: 7\nretry: 10\ndata: x\n\n") == [Event(data="x")]


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("", {}),
        ("  ", {}),
        ('{"a": 1}', {"a": 1}),
        ('{"nested": {"b": [1, 2]}}', {"nested": {"b": [1, 2]}}),
    ],
)
def test_parse_arguments_accepts_objects(raw: str, expected: dict[str, object]) -> None:
    assert parse_arguments(raw, "t") == (expected, None)


@pytest.mark.parametrize(
    "raw,needle",
    [
        ('{"a": ', "not valid JSON"),
        ("[1]", "expected a JSON object, got list"),
        ('"s"', "expected a JSON object, got str"),
        ("null", "got NoneType"),
    ],
)
def test_parse_arguments_rejects_everything_else(raw: str, needle: str) -> None:
    value, error = parse_arguments(raw, "t")
    assert value is None and error is not None
    assert error.startswith('invalid arguments for tool "t"') and needle in error


@pytest.mark.parametrize(
    "url,local",
    [
        ("http://localhost:11434/v1", True),
        ("http://127.0.0.1:8080", True),
        ("http://127.8.9.10/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://ollama.localhost/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://192.168.1.5:8000/v1", False),
        ("http://localhost.evil.com/v1", False),
        ("http://10.0.0.1/v1", False),
    ],
)
def test_is_loopback(url: str, local: bool) -> None:
    assert is_loopback(url) is local


def test_settings_defaults_per_provider() -> None:
    s = resolve_settings(ModelConfig(name="gpt-x"), environ={"OPENAI_API_KEY": "k"})
    assert (s.provider, s.base_url, s.api_key_env, s.api_key) == (
        "openai",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        "k",
    )
    s = resolve_settings(
        ModelConfig(name="claude-x"),
        provider="anthropic",
        environ={"ANTHROPIC_API_KEY": "sk-ant-secret"},
    )
    assert (s.provider, s.base_url, s.api_key_env) == (
        "anthropic",
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
    )
    assert "sk-ant-secret" not in repr(s)  # the key never shows in reprs


def test_settings_flags_override_config() -> None:
    cfg = ModelConfig(
        provider="anthropic", name="a", base_url="https://x.example/v1", api_key_env="CFG_KEY"
    )
    s = resolve_settings(
        cfg,
        model="b",
        provider="openai",
        base_url="http://localhost:1/v1",
        api_key_env="FLAG_KEY",
        environ={"FLAG_KEY": "f", "CFG_KEY": "c"},
    )
    assert (s.provider, s.name, s.base_url, s.api_key) == (
        "openai",
        "b",
        "http://localhost:1/v1",
        "f",
    )


def test_model_flag_may_be_a_url() -> None:
    s = resolve_settings(ModelConfig(name="llama3"), model="http://localhost:11434/v1", environ={})
    assert (s.name, s.base_url, s.api_key) == ("llama3", "http://localhost:11434/v1", None)


@pytest.mark.parametrize(
    "cfg,kw,needle",
    [
        (ModelConfig(), {}, "no model name: set model.name in harness.md or pass --model"),
        (ModelConfig(name="m"), {}, 'environment variable "OPENAI_API_KEY" is not set'),
        (
            ModelConfig(name="m", api_key_env="MINE"),
            {"environ": {"OPENAI_API_KEY": "k"}},
            'environment variable "MINE" is not set',
        ),
        (ModelConfig(name="m"), {"base_url": "localhost:8080"}, "must start with http://"),
        (ModelConfig(name="m"), {"provider": "gemini"}, 'unknown model provider "gemini"'),
    ],
)
def test_settings_errors(cfg: ModelConfig, kw: dict[str, object], needle: str) -> None:
    kw.setdefault("environ", {})
    with pytest.raises(ModelConfigError) as info:
        resolve_settings(cfg, **kw)  # type: ignore[arg-type]
    assert needle in str(info.value)
    assert info.value.exit_code == 2


def test_empty_key_counts_as_missing() -> None:
    with pytest.raises(ModelConfigError):
        resolve_settings(ModelConfig(name="m"), environ={"OPENAI_API_KEY": ""})


# -- adapters, fed events directly ------------------------------------------------------


def _settings(provider: str) -> ModelSettings:
    return ModelSettings(
        provider=provider, name="m", base_url="http://localhost:1", api_key_env="X"
    )


def _sse(*items: tuple[str, dict[str, Any] | str]) -> Iterator[Event]:
    return iter(
        [
            Event(event=name or "message", data=d if isinstance(d, str) else json.dumps(d))
            for name, d in items
        ]
    )


def test_openai_calls_without_index_or_id_are_kept_apart() -> None:
    adapter = OpenAIAdapter(_settings("openai"), "")
    chunks = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"function": {"name": "a", "arguments": '{"x": 1}'}}]},
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"function": {"name": "b", "arguments": {"y": 2}}}]},
                    "finish_reason": "stop",
                }
            ]
        },
    ]
    turn = adapter.read_stream(_sse(*[("", c) for c in chunks]), lambda t: None)
    assert [(c.id, c.name, c.arguments) for c in turn.calls] == [
        ("call_1", "a", {"x": 1}),
        ("call_2", "b", {"y": 2}),
    ]
    # The ids made up here are the ones sent back with the results.
    assert [c["id"] for c in turn.message["tool_calls"]] == ["call_1", "call_2"]


def test_openai_call_without_a_name_is_an_error_result() -> None:
    adapter = OpenAIAdapter(_settings("openai"), "")
    chunk = {
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"arguments": "{}"}}]},
                "finish_reason": "stop",
            }
        ]
    }
    [call] = adapter.read_stream(_sse(("", chunk)), lambda t: None).calls
    assert call.error == "tool call has no function name"


def test_openai_stream_with_garbage_event_is_a_provider_error() -> None:
    adapter = OpenAIAdapter(_settings("openai"), "")
    with pytest.raises(ProviderError, match="not JSON: <html>"):
        adapter.read_stream(_sse(("", "<html>oops")), lambda t: None)


def test_anthropic_thinking_blocks_are_sent_back_unchanged() -> None:
    adapter = AnthropicAdapter(_settings("anthropic"), "")
    turn = adapter.read_stream(
        _sse(
            ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "thinking", "thinking": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "thinking_delta", "thinking": "hm"},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "signature_delta", "signature": "sig"},
                },
            ),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "tool_use", "id": "t", "name": "a", "input": {}},
                },
            ),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use"},
                    "usage": {"output_tokens": 9},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ),
        lambda t: None,
    )
    assert turn.message["content"] == [
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        {"type": "tool_use", "id": "t", "name": "a", "input": {}},
    ]
    assert turn.calls[0].arguments == {} and turn.stop_reason == "tool_use"
    assert turn.usage == {"input_tokens": 3, "output_tokens": 9}


def test_anthropic_url_accepts_a_base_url_ending_in_v1() -> None:
    s = _settings("anthropic")
    assert AnthropicAdapter(s, "").url == "http://localhost:1/v1/messages"
    s = ModelSettings(provider="anthropic", name="m", base_url="http://h/v1/", api_key_env="X")
    assert AnthropicAdapter(s, "").url == "http://h/v1/messages"


def test_openai_max_tokens_key_depends_on_the_server() -> None:
    local = OpenAIAdapter(_settings("openai"), "").body([], [])
    assert local["max_tokens"] == 4096 and "tools" not in local
    s = ModelSettings(
        provider="openai",
        name="m",
        base_url="https://api.openai.com/v1",
        api_key_env="X",
        api_key="k",
    )
    assert OpenAIAdapter(s, "").body([], [])["max_completion_tokens"] == 4096
