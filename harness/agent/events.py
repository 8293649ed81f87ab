"""Hook events of the agent loop (ai-harness's names): ``turn.start``, ``completion.pre``,
``completion.post``, ``agent.stop``, ``turn.end`` and ``error``.

The loop asks :class:`LoopHooks` at each point; it fires the event through the
session (``Session.fire``: the hooks of that event, fail-closed, audited) and says what
the decision means there:

- ``turn.start`` ``{message, turn}``: block fails the run; modify may change ``message``.
- ``completion.pre`` ``{model, messages, tools, round}``: block fails the run; modify may
  change ``messages`` / ``tools`` of this one request.
- ``completion.post`` ``{model, round, text, tool_calls, finish_reason, usage}``: block
  fails the run.
- ``agent.stop`` ``{response, finish_reason, iteration, tool_calls, tool_results, usage,
  turn}``: fired before a final answer is accepted; block keeps the loop going with the
  reason as the next user message (the round limit still holds).
- ``turn.end`` ``{response, tool_calls, tool_results, usage, rounds, turn}`` plus the
  capitalised keys ai-harness's code sends (``Response``, ``ToolCalls``, ``ToolResults``,
  ``Usage``): block fails the run; modify may change ``response`` (the returned text).
- ``error`` ``{error, kind, turn}``: fired when the run fails; observe only.

A session a ``session.start`` hook refused (``Session.refused``) fails every run at
``turn.start``. A session without ``fire`` (a bare
:class:`~harness.agent.loop.ToolSession`) fires nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from harness.results import ToolCall, ToolResult

from .base import AgentError, Turn

# Events whose hooks can refuse or rewrite the model's text: when one has a hook, text
# reaches ``on_text`` (stdout in ``harness run``) only after they allowed it.
TEXT_GATES = ("completion.post", "agent.stop", "turn.end")


class HookBlockedError(AgentError):
    """A hook of an agent-loop event blocked (or failed closed)."""


def _calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    return [{"id": c.id, "name": c.name, "arguments": dict(c.arguments)} for c in calls]


def _results(results: Sequence[ToolResult]) -> list[dict[str, Any]]:
    return [
        {"call_id": r.call_id, "name": r.name, "content": r.text, "is_error": r.is_error}
        for r in results
    ]


class LoopHooks:
    """The agent-loop events of one run, fired through ``session.fire``."""

    def __init__(self, session: Any, model: str) -> None:
        self._session = session
        self._fire = getattr(session, "fire", None)
        begin = getattr(session, "begin_turn", None)
        self._end = getattr(session, "end_turn", None)
        self.turn = begin() if begin is not None else 1
        self.model = model
        handles = getattr(session, "handles", None)
        # True when a hook may refuse or rewrite text: the loop then holds it back.
        self.gates_text = self._fire is not None and (
            handles is None or any(handles(event) for event in TEXT_GATES)
        )

    def _run(self, event: str, payload: Mapping[str, Any]) -> Any:
        if self._fire is None:
            return None
        return self._fire(event, payload)

    @staticmethod
    def _why(event: str, out: Any) -> str:
        return str(out.why)

    def _checked(self, event: str, payload: Mapping[str, Any]) -> Mapping[str, Any]:
        out = self._run(event, payload)
        if out is None:
            return payload
        if out.blocked_by is not None:
            raise HookBlockedError(f"agent loop stopped: {event} {self._why(event, out)}")
        return out.payload

    def turn_start(self, prompt: str) -> str:
        refused = getattr(self._session, "refused", None)
        if isinstance(refused, str):  # a session.start hook blocked: no run in it
            raise HookBlockedError(f"agent loop stopped: {refused}")
        got = self._checked("turn.start", {"message": prompt, "turn": self.turn})
        message = got.get("message", prompt)
        if not isinstance(message, str):
            raise HookBlockedError(
                "agent loop stopped: a turn.start hook set message to "
                f"{type(message).__name__}; it must be a string"
            )
        return message

    def completion_pre(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], rounds: int
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        if self._fire is None:
            return messages, tools
        got = self._checked(
            "completion.pre",
            {"model": self.model, "messages": messages, "tools": tools, "round": rounds + 1},
        )
        new_messages, new_tools = got.get("messages", messages), got.get("tools", tools)
        for key, value in (("messages", new_messages), ("tools", new_tools)):
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise HookBlockedError(
                    f"agent loop stopped: a completion.pre hook set {key} "
                    "to something other than a list of objects"
                )
        return new_messages, new_tools

    def completion_post(self, turn: Turn, rounds: int) -> None:
        if self._fire is None:
            return
        self._checked(
            "completion.post",
            {
                "model": self.model,
                "round": rounds + 1,
                "text": turn.text,
                "tool_calls": [
                    {
                        "id": c.id,
                        "name": c.name,
                        "arguments": c.arguments if c.arguments is not None else c.raw_arguments,
                    }
                    for c in turn.calls
                ],
                "finish_reason": turn.stop_reason,
                "usage": turn.usage,
            },
        )

    def agent_stop(
        self, turn: Turn, rounds: int, calls: Sequence[ToolCall], results: Sequence[ToolResult]
    ) -> str | None:
        """None to accept the final answer, else the reason to go on with."""
        out = self._run(
            "agent.stop",
            {
                "response": turn.text,
                "finish_reason": turn.stop_reason,
                "iteration": rounds + 1,
                "tool_calls": _calls(calls),
                "tool_results": _results(results),
                "usage": turn.usage,
                "turn": self.turn,
            },
        )
        if out is None or out.blocked_by is None:
            return None
        return out.reason or f'hook "{out.blocked_by}" asked to continue'

    def turn_end(
        self,
        text: str,
        rounds: int,
        calls: Sequence[ToolCall],
        results: Sequence[ToolResult],
        usage: Any,
    ) -> str:
        if self._fire is None:
            return text
        tool_calls, tool_results = _calls(calls), _results(results)
        got = self._checked(
            "turn.end",
            {
                "response": text,
                "tool_calls": tool_calls,
                "tool_results": tool_results,
                "usage": usage,
                "rounds": rounds,
                "turn": self.turn,
                "Response": text,
                "ToolCalls": tool_calls,
                "ToolResults": tool_results,
                "Usage": usage,
            },
        )
        response = got.get("response", text)
        if not isinstance(response, str):
            raise HookBlockedError(
                "agent loop stopped: a turn.end hook set response to "
                f"{type(response).__name__}; it must be a string"
            )
        return response

    def error(self, exc: BaseException) -> None:
        with contextlib.suppress(Exception):  # observe only: never hides the real error
            self._run("error", {"error": str(exc), "kind": type(exc).__name__, "turn": self.turn})

    def close(self) -> None:
        if self._end is not None:
            self._end()
