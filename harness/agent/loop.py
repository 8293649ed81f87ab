"""The provider-neutral agent loop (docs/spec.md §13).

``Harness.run`` delegates to :func:`run_agent`.

Each round: send the conversation and the tool definitions (in the provider's own
export format) to the model; stream its answer (text goes to ``on_text`` as it
arrives, or, when a ``completion.post`` / ``agent.stop`` / ``turn.end`` hook exists, only
after those hooks allowed it and as they left it); if it asked for tools, run them all
with one ``call_many`` and append the results in call order with their call ids;
repeat. A model that still asks for tools after ``limits.max_tool_calls_per_turn``
rounds raises :class:`RoundLimitError`.

The loop needs only a small slice of the tool side (:class:`ToolSide`): ``config``,
``system_prompt``, ``definitions(format=...)`` and ``session()`` whose sessions offer
``call_many`` and ``emit``. Every tool call goes through ``call_many``, hence the
pipeline; the only results made here are for calls that cannot be made at all
(arguments that are not a JSON object), and those are emitted as audit events too.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from harness.artifacts.export import provider_name
from harness.config import Config, ModelConfig
from harness.results import ToolCall, ToolResult

from .anthropic import AnthropicAdapter
from .base import (
    DEFAULT_BASE_URLS,
    DEFAULT_KEY_ENVS,
    Adapter,
    ModelConfigError,
    ModelSettings,
    ProviderError,
    RoundLimitError,
    TextSink,
    Turn,
    error_message,
    excerpt,
    is_loopback,
    too_deep,
)
from .events import LoopHooks
from .openai import OpenAIAdapter
from .sse import iter_events
from .transcript import Transcript

ToolSink = Callable[[ToolCall, ToolResult], None]
TIMEOUT = httpx.Timeout(600.0, connect=30.0)


class ToolSession(Protocol):
    def call_many(self, calls: list[ToolCall]) -> list[ToolResult]: ...

    def emit(self, event: str, **fields: Any) -> None: ...


class ToolSide(Protocol):
    @property
    def config(self) -> Config: ...

    @property
    def system_prompt(self) -> str: ...

    def definitions(self, format: str = ...) -> list[dict[str, Any]]: ...

    def session(self) -> AbstractContextManager[Any]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentResult:
    """What one ``run`` produced. ``messages`` is the conversation in the provider's format."""

    text: str  # the text of the final model turn
    rounds: int  # tool rounds run
    calls: tuple[ToolCall, ...]
    results: tuple[ToolResult, ...]
    messages: tuple[dict[str, Any], ...]
    stop_reason: str | None
    provider: str
    model: str


def resolve_settings(
    config: ModelConfig,
    *,
    model: str | None = None,
    provider: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ModelSettings:
    """Merge ``harness.md`` ``model:`` settings, flags and the environment; check them.

    ``model`` may be a URL (``--model http://localhost:11434/v1``): it then sets the
    base URL and the name comes from ``harness.md``. The API key is read from the
    variable named by ``api_key_env`` (default ``OPENAI_API_KEY`` /
    ``ANTHROPIC_API_KEY``); it may be missing only when the base URL is a loopback
    address (a local server), in which case no key is sent.
    """
    environ = os.environ if environ is None else environ
    if config.problems:
        raise ModelConfigError(
            "the model block of harness.md is invalid: "
            + "; ".join(config.problems)
            + " (see harness validate)"
        )
    provider = provider or config.provider or "openai"
    if provider not in DEFAULT_BASE_URLS:
        raise ModelConfigError(
            f'unknown model provider "{provider}"; use openai, anthropic or copilot'
        )
    name = config.name
    if model and "://" in model:
        base_url = base_url or model
    elif model:
        name = model
    url = base_url or config.base_url or DEFAULT_BASE_URLS[provider]
    if not url.startswith(("http://", "https://")):
        raise ModelConfigError(f'model base URL "{url}" must start with http:// or https://')
    if not name:
        raise ModelConfigError("no model name: set model.name in harness.md or pass --model NAME")
    env = api_key_env or config.api_key_env or DEFAULT_KEY_ENVS[provider]
    key = environ.get(env) or None
    if key is None and not is_loopback(url):
        raise ModelConfigError(
            f'no API key for {provider} at {url}: environment variable "{env}" is not set '
            f"(name another variable with model.api_key_env in harness.md or --api-key-env)"
        )
    return ModelSettings(
        provider=provider,
        name=name,
        base_url=url,
        api_key_env=env,
        api_key=key,
        max_tokens=config.max_tokens,
    )


def make_adapter(settings: ModelSettings, system: str) -> Adapter:
    if settings.provider == "anthropic":
        return AnthropicAdapter(settings, system)
    return OpenAIAdapter(settings, system)  # openai and copilot (OpenAI-compatible)


def run_agent(
    harness: ToolSide,
    prompt: str,
    *,
    model: str | None = None,
    provider: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    max_rounds: int | None = None,
    on_text: TextSink | None = None,
    on_tool: ToolSink | None = None,
    session: ToolSession | None = None,
    client: httpx.Client | None = None,
    environ: Mapping[str, str] | None = None,
    history: Sequence[Mapping[str, Any]] | None = None,
) -> AgentResult:
    """Drive the model with the harness's tools until it answers without asking for tools.

    Raises :class:`ModelConfigError` (settings), :class:`ProviderError` (HTTP error,
    broken stream, unreachable server) or :class:`RoundLimitError`.
    """
    config = harness.config
    settings = resolve_settings(
        config.model,
        model=model,
        provider=provider,
        base_url=base_url,
        api_key_env=api_key_env,
        environ=environ,
    )
    limit = config.limits.max_tool_calls_per_turn if max_rounds is None else max_rounds
    if limit < 0:
        raise ModelConfigError(f"max rounds must be >= 0, got {limit}")
    connect = getattr(harness, "connect_uncached", None)
    if connect is not None:
        connect()  # upstream servers with no cached listing: the model is offered their tools
    with ExitStack() as stack:
        if client is None:
            client = stack.enter_context(httpx.Client(timeout=TIMEOUT))
        if session is None:
            session = stack.enter_context(harness.session())
        loop = _Loop(
            harness,
            session,
            make_adapter(settings, harness.system_prompt),
            client,
            limit,
            on_text or (lambda _t: None),
            on_tool,
        )
        return loop.run(prompt, history)
    raise AssertionError("unreachable")  # pragma: no cover  (mypy: ExitStack may swallow)


class _Loop:
    def __init__(
        self,
        harness: ToolSide,
        session: ToolSession,
        adapter: Adapter,
        client: httpx.Client,
        limit: int,
        on_text: TextSink,
        on_tool: ToolSink | None,
    ) -> None:
        self.harness, self.session, self.adapter, self.client = harness, session, adapter, client
        self.limit, self.on_text, self.on_tool = limit, on_text, on_tool
        self.settings = adapter.settings
        self.transcript = Transcript.for_session(harness.config, session)

    def run(self, prompt: str, history: Sequence[Mapping[str, Any]] | None = None) -> AgentResult:
        # ``history``: the messages of an earlier result (its ``messages``), to continue
        # the same conversation with a new user turn (harness eval's ``turns:``).
        self.hooks = hooks = LoopHooks(self.session, self.settings.name)
        try:
            return self._run(prompt, history)
        except Exception as exc:
            hooks.error(exc)
            raise
        finally:
            hooks.close()

    def _run(self, prompt: str, history: Sequence[Mapping[str, Any]] | None) -> AgentResult:
        hooks = self.hooks
        prompt = hooks.turn_start(prompt)
        if history:
            messages = [dict(m) for m in history]
            messages.append({"role": "user", "content": prompt})
        else:
            messages = self.adapter.start(prompt)
        for message in messages[len(history or ()) :]:
            self.transcript.message(message)
        calls: list[ToolCall] = []
        results: list[ToolResult] = []
        rounds = 0
        try:
            while True:
                turn = self._ask(messages, rounds)
                messages.append(turn.message)
                self.transcript.message(turn.message)
                if not turn.calls:
                    reason = hooks.agent_stop(turn, rounds, calls, results)
                    if reason is None:
                        text = hooks.turn_end(turn.text, rounds, calls, results, turn.usage)
                        self._release(text)  # what the hooks allowed, as they left it
                        return AgentResult(
                            text=text,
                            rounds=rounds,
                            calls=tuple(calls),
                            results=tuple(results),
                            messages=tuple(messages),
                            stop_reason=turn.stop_reason,
                            provider=self.settings.provider,
                            model=self.settings.name,
                        )
                    # An agent.stop hook blocked: go on, its reason is the next user turn.
                    self._limit(rounds, messages, "an agent.stop hook still refused the answer")
                    rounds += 1
                    nudge = {"role": "user", "content": reason}
                    messages.append(nudge)
                    self.transcript.message(nudge)
                    continue
                self._limit(rounds, messages, "the model still asked for tools")
                rounds += 1
                round_calls, round_results = self._run_tools(turn, rounds)
                calls += round_calls
                results += round_results
                for message in self.adapter.results(turn, round_results):
                    messages.append(message)
                    self.transcript.message(message)
        finally:
            self.transcript.close()

    def _limit(self, rounds: int, messages: list[dict[str, Any]], what: str) -> None:
        if rounds < self.limit:
            return
        msg = (
            f"agent loop stopped: {what} after {rounds} "
            f"rounds, the limit set by limits.max_tool_calls_per_turn "
            f"(or --max-rounds); raise it in harness.md if the task needs more"
        )
        self.session.emit("agent.round_limit", rounds=rounds, limit=self.limit, error=msg)
        raise RoundLimitError(msg, rounds=rounds, messages=messages)

    # -- one model request -----------------------------------------------------------

    def _definitions(self) -> list[dict[str, Any]]:
        # A session may know more tools than the harness (registered or surfaced ones).
        source = getattr(self.session, "definitions", None) or self.harness.definitions
        return list(source(format=self.adapter.format))

    def _ask(self, messages: list[dict[str, Any]], rounds: int) -> Turn:
        tools = self._definitions()
        self._names = _name_map(self.harness, self.session, self.adapter.format)
        sent, tools = self.hooks.completion_pre(messages, tools, rounds)
        body = self.adapter.body(sent, tools)
        self.session.emit(
            "model.request",
            round=rounds + 1,
            provider=self.adapter.provider,
            model=self.settings.name,
            url=self.adapter.url,
            messages=len(messages),
            tools=len(tools),
        )
        started = time.perf_counter()
        try:
            turn = self._post(body)
        except ProviderError as exc:
            self.session.emit("model.error", round=rounds + 1, status=exc.status, error=str(exc))
            raise
        self.session.emit(
            "model.response",
            round=rounds + 1,
            stop_reason=turn.stop_reason,
            text=turn.text,
            tool_calls=[
                {"id": c.id, "name": c.name, "arguments": c.raw_arguments} for c in turn.calls
            ],
            usage=turn.usage,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )
        self.hooks.completion_post(turn, rounds)
        if turn.calls:
            self._release(turn.text)  # no agent.stop / turn.end for a turn that asks for tools
        return turn

    def _sink(self) -> TextSink:
        """Where streamed text goes: ``on_text`` as it arrives, or nowhere yet when a hook
        may still refuse or rewrite it (:meth:`_release` then sends what they allowed)."""
        return (lambda _piece: None) if self.hooks.gates_text else self.on_text

    def _release(self, text: str) -> None:
        if self.hooks.gates_text and text:
            self.on_text(text)

    def _post(self, body: dict[str, Any]) -> Turn:
        adapter, url = self.adapter, self.adapter.url
        try:
            with self.client.stream("POST", url, json=body, headers=adapter.headers()) as resp:
                if resp.status_code >= 400:
                    raise self._http_error(resp)
                kind = resp.headers.get("content-type", "")
                if "text/event-stream" in kind:
                    return adapter.read_stream(iter_events(resp.iter_lines()), self._sink())
                raw = resp.read().decode("utf-8", "replace")
                try:
                    data = json.loads(raw)
                except RecursionError:
                    raise ProviderError(too_deep(adapter.provider, "an answer")) from None
                except ValueError:
                    raise ProviderError(
                        f"{adapter.provider} answered {url} with neither an event stream nor "
                        f"JSON (content-type {kind or 'none'}): {excerpt(raw, 200)}",
                        status=resp.status_code,
                        body=raw,
                    ) from None
                return adapter.read_json(data, self._sink())
        except httpx.TimeoutException as exc:
            raise ProviderError(f"{adapter.provider} request to {url} timed out: {exc}") from None
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"cannot talk to {adapter.provider} at {url}: {type(exc).__name__}: {exc}"
            ) from None

    def _http_error(self, resp: httpx.Response) -> ProviderError:
        raw = resp.read()[:20000].decode("utf-8", "replace")
        try:
            detail = error_message(json.loads(raw)) or excerpt(raw)
        except (ValueError, RecursionError):
            detail = excerpt(raw)
        msg = (
            f"{self.adapter.provider} API error: HTTP {resp.status_code} "
            f"{resp.reason_phrase} from POST {self.adapter.url}: {detail or '(empty body)'}"
        )
        if resp.status_code in (401, 403):
            env = self.settings.api_key_env
            msg += (
                f'; check the API key in environment variable "{env}"'
                if self.settings.api_key
                else f'; environment variable "{env}" is not set'
            )
        return ProviderError(msg, status=resp.status_code, body=raw)

    # -- one tool round --------------------------------------------------------------

    def _run_tools(self, turn: Turn, rounds: int) -> tuple[list[ToolCall], list[ToolResult]]:
        calls: list[ToolCall] = []
        slots: list[ToolResult | None] = []
        runnable: list[ToolCall] = []
        for mc in turn.calls:
            name = self._names.get(mc.name, mc.name)
            call = ToolCall(name=name, arguments=mc.arguments or {}, id=mc.id)
            calls.append(call)
            if mc.error is not None:
                self.session.emit(
                    "model.tool_call_invalid",
                    round=rounds,
                    call_id=mc.id,
                    tool=name,
                    arguments=mc.raw_arguments,
                    error=mc.error,
                )
                slots.append(
                    ToolResult(
                        call_id=mc.id, name=name, is_error=True, text=mc.error, error=mc.error
                    )
                )
            else:
                runnable.append(call)
                slots.append(None)
        ran = iter(self.session.call_many(runnable) if runnable else ())
        results = [slot if slot is not None else next(ran) for slot in slots]
        for call, result in zip(calls, results, strict=True):
            self.transcript.result(call, result)
            if self.on_tool is not None:
                self.on_tool(call, result)
        return calls, results


def _name_map(harness: ToolSide, session: ToolSession, format: str) -> dict[str, str]:
    """Exported name -> tool name, for names a provider export had to change (``.`` → ``_``)."""
    names: set[str] = set()
    for owner in (harness, session):
        known = getattr(owner, "tools", None)
        if isinstance(known, Mapping):
            names.update(str(n) for n in known)
    pairs = ((provider_name(n, format), n) for n in names)
    return {exported: name for exported, name in pairs if exported != name}
