"""Tool definitions exactly as each provider accepts them (SPEC §11).

Formats:

- ``openai``: Chat Completions ``{"type": "function", "function": {name, description,
  parameters}}``; the parameters are the tool's JSON Schema unchanged.
- ``openai-strict``: the same with ``"strict": true`` and the schema rewritten into the
  subset OpenAI's strict mode (Structured Outputs) accepts, see :func:`strict_schema`.
- ``anthropic``: Messages API ``{name, description, input_schema}``.
- ``mcp``: MCP ``Tool`` ``{name, title?, description, inputSchema, outputSchema?,
  annotations?}``.

OpenAI and Anthropic names must match ``^[a-zA-Z0-9_-]{1,64}$``: a ``.`` becomes ``_``
(:func:`provider_name`). MCP keeps the name. Tools with ``enabled: false`` are never
exported; ``loading: deferred`` tools only with ``include_deferred=True``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal, cast

from harness.artifacts.model import ToolSpec
from harness.errors import UsageError

Format = Literal["openai", "openai-strict", "anthropic", "mcp"]
FORMATS: tuple[Format, ...] = ("openai", "openai-strict", "anthropic", "mcp")

# Keywords OpenAI strict mode accepts (Structured Outputs "supported schemas").
# Everything else is dropped; see docs/cli.md "openai-strict".
STRICT_KEYWORDS = frozenset(
    {
        "type", "description", "title", "enum", "const",
        "properties", "required", "additionalProperties", "items", "anyOf",
        "$ref", "$defs", "definitions",
        "pattern", "format",
        "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "minItems", "maxItems",
    }
)  # fmt: skip
# String formats strict mode supports; another ``format`` is dropped.
STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# Dropped keywords whose (scalar) value is kept for the model as a note in the
# description, e.g. ``"Name (default: \"x\", maxLength: 20)"``.
NOTED_KEYWORDS = (
    "default", "minLength", "maxLength", "format", "uniqueItems",
    "minProperties", "maxProperties", "minContains", "maxContains",
)  # fmt: skip

# harness annotation key -> MCP ToolAnnotations key
MCP_ANNOTATIONS = {
    "title": "title",
    "read_only": "readOnlyHint",
    "destructive": "destructiveHint",
    "idempotent": "idempotentHint",
    "open_world": "openWorldHint",
}
# Key under which a non-object ``returns`` value is wrapped for MCP ``outputSchema``.
MCP_RESULT_KEY = "result"


def provider_name(name: str, format: str) -> str:
    """The name a provider sees: ``.`` → ``_`` for OpenAI and Anthropic, unchanged for MCP."""
    _check_format(format)
    return name if format == "mcp" else name.replace(".", "_")


def exported(tools: Iterable[ToolSpec], *, include_deferred: bool = False) -> list[ToolSpec]:
    """The tools a listing shows: enabled ones, deferred ones only when asked."""
    return [t for t in tools if t.enabled and (include_deferred or t.loading != "deferred")]


def definitions(
    tools: Iterable[ToolSpec], format: str, *, include_deferred: bool = False
) -> list[dict[str, Any]]:
    """Definitions of ``tools`` (in the given order) in ``format``.

    Raises :class:`UsageError` for an unknown format, or when two tools end up with
    the same provider name (``a.b`` and ``a_b`` for OpenAI).
    """
    _check_format(format)
    chosen = exported(tools, include_deferred=include_deferred)
    seen: dict[str, str] = {}
    for t in chosen:
        pname = provider_name(t.name, format)
        if pname in seen:
            raise UsageError(
                f'tools "{seen[pname]}" and "{t.name}" both export as "{pname}" '
                f"for {format}; rename one of them"
            )
        seen[pname] = t.name
    return [definition(t, format) for t in chosen]


def definition(tool: ToolSpec, format: str) -> dict[str, Any]:
    """One tool's definition in ``format`` (no enabled/deferred filtering)."""
    _check_format(format)
    name = provider_name(tool.name, format)
    params = plain(tool.input_schema) or {"type": "object", "properties": {}}
    if format == "openai":
        return {
            "type": "function",
            "function": {"name": name, "description": tool.description, "parameters": params},
        }
    if format == "openai-strict":
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": tool.description,
                "parameters": strict_schema(params),
                "strict": True,
            },
        }
    if format == "anthropic":
        return {"name": name, "description": tool.description, "input_schema": params}
    return _mcp(tool, params)


def _mcp(tool: ToolSpec, params: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name}
    ann = mcp_annotations(tool.annotations)
    if "title" in ann:
        out["title"] = ann["title"]
    out["description"] = tool.description
    out["inputSchema"] = params
    output = mcp_output_schema(tool.returns)
    if output is not None:
        out["outputSchema"] = output
    if ann:
        out["annotations"] = ann
    return out


def mcp_annotations(annotations: Mapping[str, Any] | None) -> dict[str, Any]:
    """harness ``annotations`` → MCP ``ToolAnnotations``; unknown keys are left out."""
    if not annotations:
        return {}
    return {
        mcp_key: annotations[key]
        for key, mcp_key in MCP_ANNOTATIONS.items()
        if key in annotations and annotations[key] is not None
    }


def mcp_output_schema(returns: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """MCP ``outputSchema`` from ``returns``; ``None`` when the tool declares none.

    MCP requires an object schema (``"type": "object"`` at the root). A ``returns``
    that is not one is wrapped as ``{"type": "object", "properties": {"result":
    RETURNS}, "required": ["result"]}``; the server then sends the value as
    ``structuredContent: {"result": value}`` (see :func:`mcp_output_is_wrapped`).
    """
    if returns is None:
        return None
    schema = plain(returns)
    if mcp_output_is_wrapped(returns):
        return {
            "type": "object",
            "properties": {MCP_RESULT_KEY: schema},
            "required": [MCP_RESULT_KEY],
        }
    return cast(dict[str, Any], schema)


def mcp_output_is_wrapped(returns: Mapping[str, Any] | None) -> bool:
    """True when ``returns`` is not an object schema and the MCP export wraps it."""
    return returns is not None and returns.get("type") != "object"


# --------------------------------------------------------------------------- strict


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Rewrite a parameters schema into the subset OpenAI strict mode accepts.

    Every object schema, nested too, gets ``additionalProperties: false`` and lists all
    its properties in ``required`` (in property order); properties that were optional
    become nullable (``"type": [T, "null"]``, ``null`` added to an ``enum``, or
    ``anyOf`` with ``{"type": "null"}`` when there is no plain ``type``). Keywords
    strict mode rejects are dropped (``oneOf`` becomes ``anyOf``); scalar ones such
    as ``default`` or ``maxLength`` are kept as a note in the description.
    """
    root = _strict(plain(schema))
    root["type"] = "object"
    root.setdefault("properties", {})
    root.setdefault("required", [])
    root["additionalProperties"] = False
    return root


def _is_object(node: Mapping[str, Any]) -> bool:
    t = node.get("type")
    return (
        t == "object"
        or (isinstance(t, list) and "object" in t)
        or (t is None and "properties" in node)
    )


def _strict(node: Any) -> Any:
    if not isinstance(node, dict):
        return node  # boolean schemas: nothing to rewrite
    out: dict[str, Any] = {}
    notes: list[str] = []
    source = dict(node)
    if "oneOf" in source and "anyOf" not in source:
        source["anyOf"] = source.pop("oneOf")
    for key, value in source.items():
        if key not in STRICT_KEYWORDS or (key == "format" and value not in STRICT_FORMATS):
            if key in NOTED_KEYWORDS and not isinstance(value, dict | list):
                notes.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {k: _strict(v) for k, v in value.items()}
        elif key == "items" and isinstance(value, dict):
            out[key] = _strict(value)
        elif key == "items":
            continue  # tuple form (draft 4-7): not supported
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [_strict(v) for v in value]
        elif key in ("required", "additionalProperties"):
            continue  # rebuilt below for objects
        else:
            out[key] = value
    if _is_object(source):
        props: dict[str, Any] = out.get("properties", {})
        required = source.get("required")
        originally = set(required) if isinstance(required, list) else set()
        out["properties"] = {k: v if k in originally else _nullable(v) for k, v in props.items()}
        out["required"] = list(props)
        out["additionalProperties"] = False
    if notes:
        desc = out.get("description")
        note = "(" + ", ".join(notes) + ")"
        out["description"] = f"{desc} {note}" if desc else note
    return out


def _nullable(node: Any) -> Any:
    """``node`` that also accepts ``null`` (an optional property made required)."""
    if not isinstance(node, dict):
        return node  # True accepts null already
    t = node.get("type")
    if "const" not in node and isinstance(t, str | list):
        types = [t] if isinstance(t, str) else list(t)
        if "null" in types:
            return node
        out = dict(node)
        out["type"] = [*types, "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        return out
    if "type" not in node and isinstance(node.get("anyOf"), list):
        if any(isinstance(b, dict) and b.get("type") == "null" for b in node["anyOf"]):
            return node
        return {**node, "anyOf": [*node["anyOf"], {"type": "null"}]}
    wrapped: dict[str, Any] = {}
    inner = dict(node)
    if "description" in inner:
        wrapped["description"] = inner.pop("description")
    wrapped["anyOf"] = [inner, {"type": "null"}]
    return wrapped


def strip_strict_nulls(schema: Mapping[str, Any], arguments: Any) -> Any:
    """Undo the strict rewrite on a model's arguments before validating them.

    A model calling an ``openai-strict`` tool sends ``null`` for every optional argument
    it leaves out. This drops such keys (recursively through nested objects) when the
    original ``schema`` does not make the property required and does not itself accept
    ``null``, so the arguments validate against the tool's real schema.
    """
    if not isinstance(arguments, dict) or not isinstance(schema, Mapping):
        return arguments
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return arguments
    required = schema.get("required")
    req = set(required) if isinstance(required, list | tuple) else set()
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        sub = props.get(key)
        if value is None and key not in req and isinstance(sub, Mapping):
            if not _accepts_null(sub):
                continue
        out[key] = strip_strict_nulls(sub, value) if isinstance(sub, Mapping) else value
    return out


def _accepts_null(schema: Mapping[str, Any]) -> bool:
    t = schema.get("type")
    if t == "null" or (isinstance(t, list | tuple) and "null" in t):
        return True
    enum = schema.get("enum")
    return isinstance(enum, list | tuple) and None in enum


# --------------------------------------------------------------------------- helpers


def plain(value: Any) -> Any:
    """A deep copy made of plain ``dict``/``list`` (specs hold read-only mappings)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _check_format(format: str) -> None:
    if format not in FORMATS:
        raise UsageError(f'unknown format "{format}"; use one of: {", ".join(FORMATS)}')
