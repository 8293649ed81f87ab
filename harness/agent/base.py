"""What the provider adapters and the loop share: settings, one model turn, errors.

An adapter (``openai.py``, ``anthropic.py``) knows one wire format: how to build the
request body and headers, how to read a streamed (SSE) or plain JSON response into a
:class:`Turn`, and how to append tool results to the conversation. The loop
(``loop.py``) knows none of that.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from harness.errors import HarnessError, UsageError
from harness.results import ToolResult
from harness.runtime import nesting

from .sse import Event

TextSink = Callable[[str], None]

DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    # GitHub Copilot's OpenAI-compatible endpoint (ai-harness's default provider).
    "copilot": "https://api.githubcopilot.com",
}
DEFAULT_KEY_ENVS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "copilot": "GITHUB_TOKEN",
}
EXCERPT_CHARS = 500


class AgentError(HarnessError):
    """The agent loop could not finish: the provider failed or the round limit was hit."""

    exit_code = 1


class ProviderError(AgentError):
    """The model provider answered with an HTTP error, a broken stream, or not at all."""

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class RoundLimitError(AgentError):
    """The model still asked for tools after ``limits.max_tool_calls_per_turn`` rounds."""

    def __init__(self, message: str, *, rounds: int, messages: Sequence[Mapping[str, Any]]) -> None:
        super().__init__(message)
        self.rounds = rounds
        self.messages = tuple(messages)


class ModelConfigError(UsageError):
    """Model settings are incomplete: no model name, no API key, a bad base URL."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Resolved model settings: ``harness.md`` ``model:`` section, then flags, then env."""

    provider: str
    name: str
    base_url: str
    api_key_env: str
    api_key: str | None = field(default=None, repr=False)
    max_tokens: int = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall:
    """One tool call as the model asked for it. ``error`` is set when it cannot run."""

    id: str
    name: str
    raw_arguments: str
    arguments: dict[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One model response, fully assembled. ``message`` is it in the provider's format."""

    text: str
    calls: tuple[ModelCall, ...]
    stop_reason: str | None
    message: dict[str, Any]
    usage: dict[str, Any] | None = None


class Adapter(Protocol):
    """One provider wire format."""

    provider: str
    format: str  # the ``definitions(format=...)`` export sent as tools
    url: str
    settings: ModelSettings

    def headers(self) -> dict[str, str]: ...

    def start(self, prompt: str) -> list[dict[str, Any]]: ...

    def body(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]: ...

    def read_stream(self, events: Iterator[Event], on_text: TextSink) -> Turn: ...

    def read_json(self, data: Any, on_text: TextSink) -> Turn: ...

    def results(self, turn: Turn, results: Sequence[ToolResult]) -> list[dict[str, Any]]: ...


def is_loopback(url: str) -> bool:
    """True for http(s) URLs whose host is localhost or a loopback address."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_arguments(raw: str, name: str) -> tuple[dict[str, Any] | None, str | None]:
    """Decode a model's tool-call arguments; an error message names the tool and the fix."""
    if raw.strip() == "":
        return {}, None
    try:
        value, deep = nesting.loads(raw, f'the arguments of tool "{name}"')  # the one rule
    except ValueError as exc:
        return None, (
            f'invalid arguments for tool "{name}": not valid JSON ({exc}); '
            f"send the arguments as one JSON object"
        )
    if deep is not None:
        return None, f'invalid arguments for tool "{name}": {deep}'
    if not isinstance(value, dict):
        return None, (
            f'invalid arguments for tool "{name}": expected a JSON object, '
            f"got {type(value).__name__}"
        )
    return value, None


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def decode_event(data: str, provider: str) -> Any:
    try:
        return json.loads(data)
    except RecursionError:
        raise ProviderError(too_deep(provider, "an event")) from None
    except ValueError:
        raise ProviderError(
            f"{provider} stream sent an event that is not JSON: {excerpt(data, 200)}"
        ) from None


def too_deep(provider: str, what: str) -> str:
    """A provider answer too deep to decode at all (its tool calls cannot even be read)."""
    return (
        f"{provider} sent {what} nested too deeply to decode (more than "
        f"{nesting.MAX_VALUE_DEPTH} levels of objects and arrays are refused)"
    )


def error_message(body: Any) -> str | None:
    """The ``error.message`` both providers put in error bodies, if present."""
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping) and isinstance(err.get("message"), str):
            kind = err.get("type")
            return f"{kind}: {err['message']}" if isinstance(kind, str) and kind else err["message"]
        if isinstance(err, str):
            return err
    return None


def result_text(result: ToolResult) -> str:
    """What the model is shown for a result: its text, else its error message."""
    return result.text or (result.error or "")
