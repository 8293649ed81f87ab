"""Tool definitions exactly as each provider accepts them (docs/spec.md §11).

Formats:

- ``openai``: Chat Completions ``{"type": "function", "function": {name, description,
  parameters}}``; the parameters are the tool's JSON Schema, ``items: {}`` added to
  arrays without ``items`` (:func:`openai_parameters`).
- ``openai-strict``: the same with ``"strict": true`` and the schema rewritten into the
  subset OpenAI's strict mode (Structured Outputs) accepts, see :func:`strict_schema`.
  A tool whose schema that subset cannot express faithfully (free-form objects, maps,
  untyped arrays, tuples, an ``allOf`` that cannot be merged;
  :func:`strict_incompatibilities`) goes out with
  ``"strict": false`` and its ``openai`` parameters. :func:`strip_strict_nulls` undoes
  the nulls a strict-mode model sends for left-out optional arguments.
- ``anthropic``: Messages API ``{name, description, input_schema}``.
- ``mcp``: MCP ``Tool`` ``{name, title?, description, inputSchema, outputSchema?,
  annotations?}``.

OpenAI and Anthropic names must match ``^[a-zA-Z0-9_-]{1,64}$``: a ``.`` becomes ``_``
(:func:`provider_name`). MCP keeps the name. Tools with ``enabled: false`` are never
exported; ``loading: deferred`` tools only with ``include_deferred=True``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, cast

from harness.artifacts.model import ToolSpec
from harness.artifacts.problems import type_name
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


def export_name(name: str) -> str:
    """The name OpenAI and Anthropic see (``^[a-zA-Z0-9_-]{1,64}$``): ``.`` → ``_``.

    The one place this rule is spelled (``tests/security/test_attack3_export_names.py``
    checks): every path deciding whether a tool can be exported asks
    :func:`without_clashes` or :func:`export_clash`, which use it."""
    return name.replace(".", "_")


def provider_name(name: str, format: str) -> str:
    """The name a provider sees: :func:`export_name` for OpenAI and Anthropic, the name
    unchanged for MCP."""
    _check_format(format)
    return name if format == "mcp" else export_name(name)


def export_clash(name: str, others: Iterable[str]) -> str | None:
    """The first of ``others`` (other than ``name`` itself) that exports as ``name`` does."""
    mine = export_name(name)
    return next((o for o in others if o != name and export_name(o) == mine), None)


def clash_message(name: str, other: str, server: str | None = None) -> str:
    """Why tool ``name`` (of upstream ``server``) is left out: it exports like ``other``."""
    owner = f'tool "{name}" of upstream server "{server}"' if server else f'tool "{name}"'
    fix = " with tools.deny in the server's declaration" if server else ""
    return (
        f'{owner} is left out: it would export as "{export_name(name)}", like the tool '
        f'"{other}" (OpenAI and Anthropic see "." as "_"); rename or deny one of them{fix}'
    )


def without_clashes(
    candidates: Iterable[str], taken: Iterable[str] = ()
) -> tuple[list[str], list[tuple[str, str]]]:
    """The ``candidates`` (in order) that can be exported beside ``taken`` and the ones
    kept before them, and ``(left out, the name it clashes with)`` for the others: two
    tools never export under one provider name (``a.b`` and ``a_b`` for OpenAI)."""
    owner: dict[str, str] = {export_name(t): t for t in taken}
    kept: list[str] = []
    clashes: list[tuple[str, str]] = []
    for name in candidates:
        exported = export_name(name)
        other = owner.get(exported)
        if other is not None and other != name:
            clashes.append((name, other))
            continue
        owner[exported] = name
        kept.append(name)
    return kept, clashes


def join_upstream(
    tools: Mapping[str, ToolSpec],
    listed: Mapping[str, ToolSpec],
    server_of: Callable[[str], str | None],
) -> tuple[dict[str, ToolSpec], dict[str, str]]:
    """``tools`` with the ``listed`` upstream tools that can be offered beside them, and
    why each other one is not: its name is taken, or it would export like another tool
    (local tools win, then the first name in sorted order). The one join of upstream
    tools, for a harness (``Harness._sync_upstream``) and the CLI (``include_upstream``)."""
    joined = dict(tools)
    left_out: dict[str, str] = {}
    for name in listed:
        if name in tools:
            left_out[name] = (
                f'upstream tool "{name}" is left out: a tool of that name is already '
                f"defined in {tools[name].source.path}"
            )
    kept, clashes = without_clashes(sorted(n for n in listed if n not in tools), tools)
    for name, other in clashes:
        left_out[name] = clash_message(name, other, server_of(name))
    joined.update((name, listed[name]) for name in kept)
    return joined, left_out


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
    if format != "mcp":
        _kept, clashes = without_clashes(t.name for t in chosen)
        for name, other in clashes:
            raise UsageError(
                f'tools "{other}" and "{name}" both export as "{export_name(name)}" '
                f"for {format}; rename one of them"
            )
    return [definition(t, format) for t in chosen]


def definition(tool: ToolSpec, format: str) -> dict[str, Any]:
    """One tool's definition in ``format`` (no enabled/deferred filtering)."""
    _check_format(format)
    name = provider_name(tool.name, format)
    params = plain(tool.input_schema) or {"type": "object", "properties": {}}
    if format == "openai":
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": tool.description,
                "parameters": openai_parameters(params),
            },
        }
    if format == "openai-strict":
        # A schema strict mode cannot express (see strict_incompatibilities) goes out
        # unchanged with "strict": false rather than rewritten into a different meaning.
        strict = not strict_incompatibilities(params)
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": tool.description,
                "parameters": strict_schema(params) if strict else openai_parameters(params),
                "strict": strict,
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

# Types strict mode knows; ``type`` values must come from here.
_TYPE_ORDER = ("string", "number", "integer", "boolean", "object", "array", "null")
STRICT_TYPES = frozenset(_TYPE_ORDER)
_ANNOTATIONS = ("title", "description")


class _Converter:
    """One strict rewrite: the result and, in ``reasons``, what it could not express."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def fail(self, path: str, why: str) -> None:
        where = f'"{path}"' if path else "the parameters object"
        self.reasons.append(f"{where}: {why}")

    def root(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        src = plain(schema)
        for key in ("anyOf", "oneOf", "$ref"):
            if key in src:
                self.fail("", f'"{key}" at the root; strict mode needs one plain object')
                del src[key]
        src["type"] = "object"
        out = self.node(src, "")
        out.setdefault("properties", {})
        out.setdefault("required", [])
        return cast(dict[str, Any], out)

    def node(self, node: Any, path: str) -> dict[str, Any]:
        if not isinstance(node, dict):
            self.fail(path, f"boolean schema {json.dumps(node)}; strict mode needs a typed schema")
            return {}
        src = self._combined(dict(node), path)
        if "$ref" in src:
            return self._ref(src)
        if isinstance(src.get("anyOf"), list) and src["anyOf"]:
            return self._any_of(src, path)
        out, notes = self._keep(src)
        if "type" not in out and (implied := _implied_type(src)) is not None:
            out = {"type": implied, **out}
        types = _types(out.get("type"))
        if not types:
            self.fail(path, 'no "type" (any value is allowed); strict mode needs a type')
        elif not types <= STRICT_TYPES:
            self.fail(path, f"unknown type {json.dumps(out['type'])}")
        for key in ("enum", "const"):
            values = out.get(key) if key == "enum" else [out.get(key)]
            if isinstance(values, list) and any(isinstance(v, dict | list) for v in values):
                self.fail(path, f'"{key}" with object or array values is not supported')
        if "object" in types:
            self._object(src, out, path)
        if "array" in types:
            self._array(src, out, path)
        _add_notes(out, notes)
        return out

    def _combined(self, src: dict[str, Any], path: str) -> dict[str, Any]:
        """``oneOf`` as ``anyOf`` (exclusive choice -> any choice: only widens), and
        ``allOf`` merged in, round by round (allOf inside allOf branches)."""
        if "oneOf" in src:
            branches = src.pop("oneOf")
            src.setdefault("anyOf", branches)
        for _ in range(32):
            if "allOf" not in src:
                break
            src = self._all_of(src, path)
        return src

    def _all_of(self, src: dict[str, Any], path: str) -> dict[str, Any]:
        """``src`` with its ``allOf`` branches merged in (strict mode has no ``allOf``):
        properties and required names join, types meet. A branch that is a ``$ref`` or
        disagrees with the rest on a keyword cannot be merged: that is a reason."""
        branches = src.pop("allOf")
        if not isinstance(branches, list):
            self.fail(path, '"allOf" is not a list')
            return src
        for i, branch in enumerate(branches):
            if not isinstance(branch, dict) or "$ref" in branch:
                what = "a $ref" if isinstance(branch, dict) else f"{json.dumps(branch)}"
                self.fail(
                    path,
                    f'"allOf" branch {i} is {what}; strict mode has no allOf and harness '
                    "merges only inline schemas: inline it",
                )
                continue
            merged, clash = _conjoin(src, branch)
            if merged is None:
                self.fail(
                    path,
                    f'"allOf" branch {i} disagrees on "{clash}" with the rest; strict mode '
                    "has no allOf and these cannot be merged into one schema",
                )
            else:
                src = merged
        return src

    def _keep(self, src: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        out: dict[str, Any] = {}
        notes: list[str] = []
        for key, value in src.items():
            if key not in STRICT_KEYWORDS or (key == "format" and value not in STRICT_FORMATS):
                if key in NOTED_KEYWORDS and not isinstance(value, dict | list):
                    notes.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
            elif key in ("$defs", "definitions") and isinstance(value, dict):
                out[key] = {k: self.node(v, f"{key}.{k}") for k, v in value.items()}
            elif key not in ("properties", "required", "additionalProperties", "items", "anyOf"):
                out[key] = value  # those five are rebuilt by _object / _array
        return out, notes

    def _ref(self, src: dict[str, Any]) -> dict[str, Any]:
        # OpenAI accepts a bare ``$ref`` only; annotations move to an anyOf wrapper and
        # constraints next to it are dropped (harness still validates them).
        ref = {"$ref": src["$ref"]}
        ann = {k: src[k] for k in _ANNOTATIONS if isinstance(src.get(k), str)}
        defs, _ = self._keep({k: v for k, v in src.items() if k in ("$defs", "definitions")})
        return {**defs, **ann, "anyOf": [ref]} if ann else {**defs, **ref}

    def _any_of(self, src: dict[str, Any], path: str) -> dict[str, Any]:
        # A ∧ (B1 ∨ B2) == (A ∧ B1) ∨ (A ∧ B2): keywords next to anyOf go into each branch,
        # so every branch carries its own type (``{"type": "string", "anyOf": [{"const":
        # "a"}]}`` -> ``{"anyOf": [{"type": "string", "const": "a"}]}``).
        shared = {k: v for k, v in src.items() if k not in ("anyOf", *_ANNOTATIONS)}
        out: dict[str, Any] = {k: src[k] for k in _ANNOTATIONS if isinstance(src.get(k), str)}
        defs: dict[str, Any] = {k: shared.pop(k) for k in ("$defs", "definitions") if k in shared}
        out.update(self._keep(defs)[0])
        branches = []
        for i, branch in enumerate(src["anyOf"]):
            merged = _merge(shared, branch)
            if merged is not None:
                branches.append(self.node(merged, f"{path}.anyOf[{i}]".lstrip(".")))
        if not branches:
            self.fail(path, "no anyOf branch is compatible with the keywords next to it")
        out["anyOf"] = branches
        return out

    def _object(self, src: dict[str, Any], out: dict[str, Any], path: str) -> None:
        props = src.get("properties")
        extra = src.get("additionalProperties")
        if src.get("patternProperties"):
            self.fail(
                path,
                '"patternProperties" allows extra keys (a map); strict mode '
                "only allows objects with fixed properties",
            )
        if extra is not None and extra is not False:
            self.fail(
                path,
                '"additionalProperties" allows extra keys (a map); strict mode '
                "only allows objects with fixed properties",
            )
        elif extra is None and not isinstance(props, dict):
            self.fail(
                path,
                'object without "properties" accepts any keys; strict mode only '
                "allows objects with fixed properties",
            )
        props = props if isinstance(props, dict) else {}
        required = src.get("required")
        originally = set(required) if isinstance(required, list) else set()
        converted = {k: self.node(v, f"{path}.{k}".lstrip(".")) for k, v in props.items()}
        out["properties"] = {
            k: v if k in originally else _nullable(v) for k, v in converted.items()
        }
        out["required"] = list(props)
        out["additionalProperties"] = False

    def _array(self, src: dict[str, Any], out: dict[str, Any], path: str) -> None:
        items = src.get("items")
        if "prefixItems" in src or isinstance(items, list):
            self.fail(path, "tuple array (prefixItems / items list); strict mode has no tuples")
        elif "items" not in src:
            self.fail(path, 'array without "items"; strict mode needs a typed item schema')
        elif items is True or items == {}:
            self.fail(path, "array items accept any value; strict mode needs a typed item schema")
        else:
            out["items"] = self.node(items, f"{path}[]")


def _types(t: Any) -> set[str]:
    if isinstance(t, str):
        return {t}
    return {x for x in t if isinstance(x, str)} if isinstance(t, list) else set()


_AS_JSON = {
    "null": "null",
    "boolean": "boolean",
    "integer": "integer",
    "number": "number",
    "string": "string",
    "list": "array",
}


def _json_type(value: Any) -> str:
    """The JSON Schema type of a JSON value (anything else counts as an object)."""
    return _AS_JSON.get(type_name(value), "object")


def _implied_type(src: dict[str, Any]) -> str | list[str] | None:
    """The ``type`` that ``enum``/``const``/``properties``/``items`` imply, if any."""
    if "enum" in src and isinstance(src["enum"], list):
        values = src["enum"]
    elif "const" in src:
        values = [src["const"]]
    elif "properties" in src:
        values = [{}]
    elif "items" in src or "prefixItems" in src:
        values = [[]]
    else:
        return None
    found = {_json_type(v) for v in values}
    if {"integer", "number"} <= found:
        found.discard("integer")
    types = [t for t in _TYPE_ORDER if t in found]
    if not types:
        return None
    return types[0] if len(types) == 1 else types


def _merge(shared: dict[str, Any], branch: Any) -> Any:
    """``shared`` ∧ ``branch`` as one schema; None when their types cannot overlap."""
    if not isinstance(branch, dict) or not shared:
        return branch
    merged = {**shared, **branch}
    if isinstance(shared.get("required"), list) and isinstance(branch.get("required"), list):
        merged["required"] = list(dict.fromkeys([*shared["required"], *branch["required"]]))
    if isinstance(shared.get("properties"), dict) and isinstance(branch.get("properties"), dict):
        merged["properties"] = {**shared["properties"], **branch["properties"]}
    if "type" in shared and "type" in branch:
        a, b = _types(shared["type"]), _types(branch["type"])
        both = a & b
        if ("number" in a and "integer" in b) or ("integer" in a and "number" in b):
            both.add("integer")
        if not both:
            return None
        ordered = [t for t in _TYPE_ORDER if t in both]
        merged["type"] = ordered[0] if len(ordered) == 1 else ordered
    return merged


def _meet(a: Any, b: Any) -> Any:
    """The ``type`` both ``a`` and ``b`` allow; None when none."""
    x, y = _types(a), _types(b)
    both = x & y
    if ("number" in x and "integer" in y) or ("integer" in x and "number" in y):
        both.add("integer")
    ordered = [t for t in _TYPE_ORDER if t in both]
    if not ordered:
        return None
    return ordered[0] if len(ordered) == 1 else ordered


def _conjoin(a: dict[str, Any], b: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """``a`` ∧ ``b`` as one schema, or ``(None, keyword they disagree on)``."""
    out = dict(a)
    for key, value in b.items():
        mine = out.get(key)
        if key not in out or mine == value or key in _ANNOTATIONS:
            out.setdefault(key, value)
        elif key == "required" and isinstance(mine, list) and isinstance(value, list):
            out[key] = list(dict.fromkeys([*mine, *value]))
        elif key == "allOf" and isinstance(mine, list) and isinstance(value, list):
            out[key] = [*mine, *value]
        elif key == "properties" and isinstance(mine, dict) and isinstance(value, dict):
            props = dict(mine)
            for name, sub in value.items():
                old = props.get(name)
                props[name] = sub if old is None or old == sub else {"allOf": [old, sub]}
            out[key] = props
        elif key == "type" and (met := _meet(mine, value)) is not None:
            out[key] = met
        else:
            return None, key
    return out, ""


def _add_notes(out: dict[str, Any], notes: list[str]) -> None:
    if notes:
        desc = out.get("description")
        note = "(" + ", ".join(notes) + ")"
        out["description"] = f"{desc} {note}" if desc else note


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """A converted schema that also accepts ``null`` (an optional property made required)."""
    if isinstance(node.get("anyOf"), list) and "type" not in node:
        if any("null" in _types(b.get("type")) for b in node["anyOf"] if isinstance(b, dict)):
            return node
        return {**node, "anyOf": [*node["anyOf"], {"type": "null"}]}
    if "type" in node and "const" not in node:
        types = _types(node["type"])
        if "null" in types:
            return node
        out = dict(node)
        out["type"] = [*([node["type"]] if isinstance(node["type"], str) else node["type"]),
                       "null"]  # fmt: skip
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        return out
    wrapped: dict[str, Any] = {}  # $ref, const
    inner = dict(node)
    if "description" in inner:
        wrapped["description"] = inner.pop("description")
    wrapped["anyOf"] = [inner, {"type": "null"}]
    return wrapped


def strict_incompatibilities(schema: Mapping[str, Any] | None) -> list[str]:
    """Why ``schema`` cannot be sent faithfully in OpenAI strict mode; ``[]`` when it can.

    Each entry names the place (a parameter path such as ``"opts.tags[]"``) and the
    construct: a free-form object or map (no ``properties``, ``additionalProperties``
    other than ``false``, ``patternProperties``), an array without a typed ``items``,
    a tuple (``prefixItems``), a schema with no ``type`` to infer (any value), a
    boolean schema, ``enum``/``const`` of objects or arrays. :func:`definition` exports
    such a tool with ``"strict": false``.
    """
    conv = _Converter()
    conv.root(schema or {"type": "object", "properties": {}})
    return conv.reasons


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Rewrite a parameters schema into the subset OpenAI strict mode accepts.

    Every object schema, nested too, gets ``additionalProperties: false`` and lists all
    its properties in ``required`` (in property order); properties that were optional
    become nullable (``"type": [T, "null"]``, ``null`` added to an ``enum``, or ``anyOf``
    with ``{"type": "null"}`` when there is no plain ``type``). A missing ``type`` is
    inferred from ``enum``/``const``/``properties``/``items``; keywords next to
    ``anyOf`` move into each branch; ``oneOf`` becomes ``anyOf``; ``allOf`` branches
    are merged into their schema. Keywords strict mode
    rejects are dropped; scalar ones such as ``default`` or ``maxLength`` are kept as a
    note in the description.

    Raises ``ValueError`` when :func:`strict_incompatibilities` is not empty.
    """
    conv = _Converter()
    out = conv.root(schema)
    if conv.reasons:
        raise ValueError("not expressible in strict mode: " + "; ".join(conv.reasons))
    return out


def openai_parameters(schema: Any) -> Any:
    """``schema`` for OpenAI without strict mode: unchanged, except that an array schema
    without ``items`` gets ``"items": {}`` (same meaning; OpenAI rejects the schema with
    "array schema missing items" otherwise)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: openai_parameters(v) for k, v in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [openai_parameters(v) for v in value]
        elif key in _SUBSCHEMA_ONE:
            out[key] = openai_parameters(value)
        else:
            out[key] = value
    if "array" in _types(schema.get("type")) and "items" not in schema:
        out["items"] = {}
    return out


_SUBSCHEMA_ONE = frozenset((
    "items", "additionalProperties", "not", "if", "then", "else", "contains",
    "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema",
))  # fmt: skip
_SUBSCHEMA_MAPS = frozenset(
    ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
)
_SUBSCHEMA_LISTS = frozenset(("allOf", "anyOf", "oneOf", "prefixItems", "items"))


def strip_strict_nulls(schema: Mapping[str, Any], arguments: Any) -> Any:
    """Undo the strict rewrite on a model's arguments before validating them.

    A model calling an ``openai-strict`` tool sends ``null`` for every optional argument
    it leaves out. This drops such keys when the tool's real ``schema`` does not make
    the property required and does not itself accept ``null`` (checked with a real
    validator, so ``enum``/``anyOf``/``$ref`` count), recursively through nested
    objects, array items, ``anyOf``/``oneOf`` branches and local ``$ref`` s. Anything
    else is returned unchanged (a copy; ``arguments`` is not modified).
    """
    if not isinstance(schema, Mapping):
        return arguments
    root = plain(schema)
    return _Stripper(root).strip(root, arguments)


class _Stripper:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self._validator: Any = None

    def resolve(self, node: Any) -> Any:
        """``node`` with local ``$ref`` s (``#``, ``#/$defs/x``) followed."""
        for _ in range(32):
            ref = node.get("$ref") if isinstance(node, dict) else None
            if not isinstance(ref, str) or not ref.startswith("#"):
                return node
            target: Any = self.root
            for part in [p for p in ref[1:].split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and part in target:
                    target = target[part]
                elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                    target = target[int(part)]
                else:
                    return node
            node = target
        return node

    def accepts_null(self, node: Any) -> bool:
        from harness.artifacts.patterns import python_validator

        try:
            if self._validator is None:
                self._validator = python_validator(self.root)
            return bool(self._validator.evolve(schema=node).is_valid(None))
        except Exception:  # unresolvable $ref and the like: the real validation reports it
            return False

    def strip(self, node: Any, value: Any) -> Any:
        node = self.resolve(node)
        if not isinstance(node, dict):
            return value
        if isinstance(value, list):
            items = self._items(node)
            return value if items is None else [self.strip(items, v) for v in value]
        if not isinstance(value, dict):
            return value
        props, required = self._object(node, value)
        if props is None:
            return dict(value)
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = props.get(key)
            if item is None and sub is not None and key not in required:
                if not self.accepts_null(sub):
                    continue
            out[key] = item if sub is None else self.strip(sub, item)
        return out

    def _branches(self, node: dict[str, Any], *keys: str) -> list[dict[str, Any]]:
        """``node``'s ``keys`` subschemas, resolved, nested anyOf/oneOf flattened."""
        found: list[dict[str, Any]] = []
        todo = [node]
        while todo and len(found) < 256:
            for key in keys:
                values = todo[0].get(key)
                for branch in map(self.resolve, values if isinstance(values, list) else []):
                    if isinstance(branch, dict):
                        found.append(branch)
                        if keys != ("allOf",):
                            todo.append(branch)
            todo.pop(0)
        return found

    def _object(
        self, node: dict[str, Any], value: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, set[str]]:
        """Properties and required names that apply to ``value`` (allOf merged; the
        anyOf/oneOf branch whose properties match its keys)."""
        props: dict[str, Any] = {}
        required: set[str] = set()
        found = False
        for part in [node, *self._branches(node, "allOf")]:
            if isinstance(part.get("properties"), dict):
                props.update(part["properties"])
                found = True
            if isinstance(part.get("required"), list):
                required |= {r for r in part["required"] if isinstance(r, str)}
        choices = [b for b in self._branches(node, "anyOf", "oneOf")
                   if isinstance(b.get("properties"), dict)]  # fmt: skip
        keys = set(value)
        pick = next((b for b in choices if set(props) | set(b["properties"]) == keys), None)
        pick = pick or next((b for b in choices if keys <= set(props) | set(b["properties"])), None)
        if pick is not None:
            props = {**props, **pick["properties"]}
            if isinstance(pick.get("required"), list):
                required |= {r for r in pick["required"] if isinstance(r, str)}
            found = True
        return (props if found else None), required

    def _items(self, node: dict[str, Any]) -> Any:
        """The item schema for an array value (all candidates as one anyOf)."""
        found = [
            part["items"]
            for part in [node, *self._branches(node, "anyOf", "oneOf")]
            if isinstance(part.get("items"), dict)
        ]
        if len(found) > 1:
            return {"anyOf": found}
        return found[0] if found else None


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
