"""Every hook event harness fires: its payload's shape, what its decisions do, and how
ai-harness (the format's origin) shaped it differently. The one declaration the runtime
(tests check every fired payload against it), the docs (docs/hooks.md's event table is
generated from :func:`markdown_table` and tested) and ``harness validate`` (the guard
checker in :mod:`harness.guards`) share.

A type is written as text: ``string``, ``integer``, ``number``, ``boolean``, ``null``,
``object`` (a dict with any keys), ``any`` (not known in advance), ``a|b`` for either;
a dict literal is an object with exactly those keys, a one-element list a list of that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Type = Any  # str | dict[str, Type] | list[Type]

CALL = {"id": "string", "name": "string", "arguments": "object"}
RESULT = {"call_id": "string", "name": "string", "content": "string", "is_error": "boolean"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One event: payload keys -> types, the decisions that do something, the origin."""

    name: str
    fired: str  # when harness fires it (docs)
    payload: Mapping[str, Type]
    block: str | None = None  # what a block does; None: a block has no effect
    modify: tuple[str, ...] = ()  # keys a modify may change; (): a modify has no effect
    text: str | None = None  # the key holding the event's text, if any
    # ai-harness: how its payload differed, and its keys -> what to read here instead.
    origin: str = ""
    origin_keys: Mapping[str, str] = field(default_factory=dict)


EVENTS: dict[str, Event] = {
    e.name: e
    for e in (
        Event(
            name="tool.pre",
            fired="before every call, after its arguments were validated",
            payload={
                "id": "string",
                "name": "string",
                "arguments": "object",
                "args": "object",
                "session": "string",
            },
            block="the tool does not run; the result is the refusal",
            modify=("arguments", "args"),
            origin_keys={"tool_name": 'payload["name"]', "tool": 'payload["name"]'},
        ),
        Event(
            name="tool.post",
            fired="after every call",
            payload={
                "id": "string",
                "call_id": "string",
                "name": "string",
                "arguments": "object",
                "session": "string",
                "result": "any",
                "content": "string",
                "is_error": "boolean",
                "error": "string|null",
                "duration_ms": "number",
            },
            block="the result is withheld",
            modify=("result", "is_error", "error", "content"),
            text="content",
            origin="`result` is the value `run` returned (ai-harness: the result text, "
            "which is `content` here)",
            origin_keys={"output": 'payload["content"]', "tool_name": 'payload["name"]'},
        ),
        Event(
            name="session.start",
            fired="a session opens (a run, an MCP client, `Harness.session()`)",
            payload={"session": "string"},
            block="the session is refused: every call and run in it fails with the reason",
            origin="ai-harness passes no payload (None)",
        ),
        Event(
            name="session.end",
            fired="a session ends",
            payload={"session": "string"},
            origin="ai-harness passes no payload (None)",
        ),
        Event(
            name="meta.tool_register",
            fired="a script calls `meta.tool_register()` (alias `meta.register_tool`)",
            payload={
                "name": "string",
                "description": "string",
                "parameters": "object",
                "script": "string",
                "by": "string|null",
                "session": "string",
                "replace": "boolean",
            },
            block="the tool is not registered (the script's call fails)",
        ),
        Event(
            name="turn.start",
            fired="a run starts (`harness run`, `Harness.run`)",
            payload={"message": "string", "turn": "integer", "session": "string"},
            block="the run fails",
            modify=("message",),
            text="message",
            origin="ai-harness passes the user message itself as a string",
        ),
        Event(
            name="turn.end",
            fired="after the final answer",
            payload={
                "response": "string",
                "tool_calls": [CALL],
                "tool_results": [RESULT],
                "usage": "object|null",
                "rounds": "integer",
                "turn": "integer",
                "Response": "string",
                "ToolCalls": [CALL],
                "ToolResults": [RESULT],
                "Usage": "object|null",
                "session": "string",
            },
            block="the run fails",
            modify=("response",),
            text="response",
            origin="ai-harness's docs describe {text, tool_calls, usage}; its code sends "
            "the capitalised keys, given here too",
            origin_keys={"text": 'payload["response"]'},
        ),
        Event(
            name="completion.pre",
            fired="before each model request",
            payload={
                "model": "string",
                "messages": ["object"],
                "tools": ["object"],
                "round": "integer",
                "session": "string",
            },
            block="the run fails",
            modify=("messages", "tools"),
        ),
        Event(
            name="completion.post",
            fired="after each model reply",
            payload={
                "model": "string",
                "round": "integer",
                "text": "string",
                "tool_calls": [{"id": "string", "name": "string", "arguments": "any"}],
                "finish_reason": "string|null",
                "usage": "object|null",
                "session": "string",
            },
            block="the run fails",
            text="text",
            origin="ai-harness passes the provider's raw reply ({id, choices, usage})",
            origin_keys={
                "choices": 'payload["text"], payload["tool_calls"], payload["finish_reason"]',
                "id": 'payload["round"]',
                "object": 'payload["model"]',
                "created": 'payload["round"]',
            },
        ),
        Event(
            name="agent.stop",
            fired="before a final answer is accepted",
            payload={
                "response": "string",
                "finish_reason": "string|null",
                "iteration": "integer",
                "tool_calls": [CALL],
                "tool_results": [RESULT],
                "usage": "object|null",
                "turn": "integer",
                "session": "string",
            },
            block="the loop goes on with the reason as the next user message",
            text="response",
            origin="ai-harness's exit-policy variant passes capitalised keys",
            origin_keys={
                "Response": 'payload["response"]',
                "ToolCalls": 'payload["tool_calls"]',
                "ToolResults": 'payload["tool_results"]',
                "Usage": 'payload["usage"]',
                "text": 'payload["response"]',
            },
        ),
        Event(
            name="error",
            fired="a run fails",
            payload={"error": "string", "kind": "string", "turn": "integer", "session": "string"},
        ),
    )
}
# ai-harness's name for the one meta event harness fires.
ALIASES = {"meta.register_tool": "meta.tool_register"}
# custom.<name>: what emit() passed (a dict as it is; any other value under "value"),
# plus "session". validate derives each event's shape from the tools that emit it.
CUSTOM = Event(
    name="custom.<name>",
    fired="`emit(name, value)` in a tool script, `Session.fire()`",
    payload={"session": "string"},
    block="`emit` raises in the tool",
    modify=("*",),
    text="value",
    origin="ai-harness passes the emitted value itself (a string stays a string)",
)


def event(name: str) -> Event | None:
    """The declaration of ``name`` (aliases and ``custom.*`` included), or None."""
    name = ALIASES.get(name, name)
    if name.startswith("custom."):
        return CUSTOM
    return EVENTS.get(name)


def fired() -> tuple[str, ...]:
    """Every event name harness fires, aliases included (``custom.*`` as a pattern)."""
    return (*EVENTS, *ALIASES, "custom.<name>")


def type_text(t: Type) -> str:
    """``t`` as the docs write it."""
    if isinstance(t, list):
        return f"list of {type_text(t[0])}"
    if isinstance(t, dict):
        return "{" + ", ".join(f"{k}: {type_text(v)}" for k, v in t.items()) + "}"
    return str(t).replace("|", " or ")


def conforms(value: Any, t: Type) -> bool:
    """Whether a JSON value has type ``t`` (tests check fired payloads with it)."""
    if isinstance(t, list):
        return isinstance(value, list) and all(conforms(v, t[0]) for v in value)
    if isinstance(t, dict):
        return isinstance(value, dict) and all(
            k in t and conforms(v, t[k]) for k, v in value.items()
        )
    return any(_is(value, one) for one in t.split("|"))


def _is(value: Any, name: str) -> bool:
    if name == "any":
        return True
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "object":
        return isinstance(value, dict)
    return False


def payload_problems(name: str, payload: Mapping[str, Any]) -> list[str]:
    """Where a fired payload differs from the declaration (empty: it conforms)."""
    spec = event(name)
    if spec is None:
        return [f"{name} is not a declared event"]
    if spec is CUSTOM:
        return [] if isinstance(payload.get("session"), str) else ["custom payload lacks session"]
    found = [f"{name} payload lacks {k!r}" for k in spec.payload if k not in payload]
    for key, value in payload.items():
        if key not in spec.payload:
            found.append(f"{name} payload has undeclared key {key!r}")
        elif not conforms(value, spec.payload[key]):
            found.append(
                f"{name} payload {key!r} is not {type_text(spec.payload[key])}: {value!r:.80}"
            )
    return found


def _decisions(spec: Event) -> str:
    parts = [f"block: {spec.block}" if spec.block else "block: no effect (validate error)"]
    if spec.modify == ("*",):
        parts.append("modify: the new value is what `emit` returns")
    elif spec.modify:
        parts.append("modify: " + ", ".join(f"`{k}`" for k in spec.modify))
    else:
        parts.append("modify: no effect (validate error)")
    return "; ".join(parts)


def markdown_table() -> str:
    """The event table of docs/hooks.md (a test keeps the two equal)."""
    rows = [
        "| event | fired | payload (key: type) | decisions |",
        "|---|---|---|---|",
    ]
    for spec in (*EVENTS.values(), CUSTOM):
        keys = ", ".join(f"`{k}`: {type_text(t)}" for k, t in spec.payload.items())
        if spec is CUSTOM:
            keys = "the emitted dict, or `value`: the emitted value; " + keys
        rows.append(f"| `{spec.name}` | {spec.fired} | {keys} | {_decisions(spec)} |")
    return "\n".join(rows) + "\n"
