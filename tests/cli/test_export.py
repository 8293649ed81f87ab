"""Provider export formats (harness/artifacts/export.py) on hand-built specs."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import jsonschema
import mcp.types
import pytest

from harness.artifacts.export import (
    FORMATS,
    definition,
    definitions,
    mcp_output_schema,
    provider_name,
    strict_schema,
    strip_strict_nulls,
)
from harness.artifacts.model import Parameter, Source, ToolSpec
from harness.errors import UsageError


def schema_of(params: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the loader builds (SPEC §3): properties and required in YAML order."""
    props = {}
    required = []
    for name, p in params.items():
        p = dict(p)
        if p.pop("required", False):
            required.append(name)
        props[name] = p
    return {"type": "object", "properties": props, "required": required}


def tool(name: str = "read_file", params: dict | None = None, **kw: Any) -> ToolSpec:
    params = (
        params
        if params is not None
        else {
            "path": {"type": "string", "description": "File to read", "required": True},
            "limit": {"type": "integer", "minimum": 1},
        }
    )
    schema = schema_of(params)
    return ToolSpec(
        name=name,
        description=kw.pop("description", f"Do {name}."),
        parameters=tuple(
            Parameter(name=k, type=v["type"], required=bool(v.get("required")))
            for k, v in params.items()
        ),
        input_schema=MappingProxyType(schema),
        source=Source(path=f".harness/tools/{name}.md"),
        **kw,
    )


READ_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File to read"},
        "limit": {"type": "integer", "minimum": 1},
    },
    "required": ["path"],
}


def test_openai_format_exact() -> None:
    assert definition(tool(), "openai") == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Do read_file.",
            "parameters": READ_SCHEMA,
        },
    }


def test_anthropic_format_exact() -> None:
    assert definition(tool(), "anthropic") == {
        "name": "read_file",
        "description": "Do read_file.",
        "input_schema": READ_SCHEMA,
    }


def test_openai_strict_format_exact() -> None:
    assert definition(tool(), "openai-strict") == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Do read_file.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to read"},
                    "limit": {"type": ["integer", "null"], "minimum": 1},
                },
                "required": ["path", "limit"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }


def test_mcp_format_exact_with_annotations_and_returns() -> None:
    t = tool(
        "git.status",
        annotations={
            "read_only": True,
            "destructive": False,
            "idempotent": True,
            "open_world": False,
            "title": "Git status",
            "extra": 1,
        },
        returns={"type": "object", "properties": {"clean": {"type": "boolean"}}},
    )
    d = definition(t, "mcp")
    assert d == {
        "name": "git.status",
        "title": "Git status",
        "description": "Do git.status.",
        "inputSchema": READ_SCHEMA,
        "outputSchema": {"type": "object", "properties": {"clean": {"type": "boolean"}}},
        "annotations": {
            "title": "Git status",
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    }
    # the official SDK accepts it and keeps every field
    parsed = mcp.types.Tool.model_validate(d)
    assert parsed.annotations is not None and parsed.annotations.read_only_hint is True
    assert parsed.model_dump(by_alias=True, exclude_none=True) == d


def test_mcp_without_returns_or_annotations_has_neither() -> None:
    assert definition(tool(), "mcp") == {
        "name": "read_file",
        "description": "Do read_file.",
        "inputSchema": READ_SCHEMA,
    }


@pytest.mark.parametrize(
    "returns",
    [
        {"type": "string"},
        {"type": "array", "items": {"type": "integer"}},
        {"enum": [1, 2]},
        {"type": ["object", "null"]},
    ],
)
def test_mcp_non_object_returns_are_wrapped_in_result(returns: dict) -> None:
    assert mcp_output_schema(returns) == {
        "type": "object",
        "properties": {"result": returns},
        "required": ["result"],
    }
    mcp.types.Tool.model_validate(definition(tool(returns=returns), "mcp"))


def test_provider_names_replace_dots_except_mcp() -> None:
    assert provider_name("git.status", "openai") == "git_status"
    assert provider_name("git.status", "openai-strict") == "git_status"
    assert provider_name("git.status", "anthropic") == "git_status"
    assert provider_name("git.status", "mcp") == "git.status"
    d = definitions([tool("git.status")], "anthropic")
    assert d[0]["name"] == "git_status"


def test_colliding_provider_names_are_refused() -> None:
    with pytest.raises(UsageError, match='tools "a.b" and "a_b" both export as "a_b" for openai'):
        definitions([tool("a.b"), tool("a_b")], "openai")
    assert [d["name"] for d in definitions([tool("a.b"), tool("a_b")], "mcp")] == ["a.b", "a_b"]


def test_unknown_format_is_a_usage_error() -> None:
    with pytest.raises(
        UsageError, match='unknown format "gemini"; use one of: openai, openai-strict'
    ):
        definitions([tool()], "gemini")


def test_disabled_never_and_deferred_only_on_request() -> None:
    tools = [
        tool("a"),
        tool("b", loading="deferred"),
        tool("c", enabled=False),
        tool("d", enabled=False, loading="deferred"),
    ]
    for fmt in FORMATS:
        names = [d.get("name") or d["function"]["name"] for d in definitions(tools, fmt)]
        assert names == ["a"]
        names = [
            d.get("name") or d["function"]["name"]
            for d in definitions(tools, fmt, include_deferred=True)
        ]
        assert names == ["a", "b"]


def test_order_is_kept_and_output_is_plain_json() -> None:
    tools = [tool("zeta"), tool("alpha")]
    out = definitions(tools, "openai")
    assert [d["function"]["name"] for d in out] == ["zeta", "alpha"]
    text = json.dumps(out)  # MappingProxyType inside the spec must not leak
    assert list(json.loads(text)[0]["function"]["parameters"]["properties"]) == ["path", "limit"]


def test_no_parameters_gives_an_empty_object_schema() -> None:
    t = tool("ping", params={})
    assert definition(t, "openai-strict")["function"]["parameters"] == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
    t = ToolSpec(name="bare", description="x", source=Source(path="x.md"))
    assert definition(t, "openai")["function"]["parameters"] == {"type": "object", "properties": {}}


def test_strict_rewrites_nested_objects_and_drops_unsupported_keywords() -> None:
    original = schema_of(
        {
            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": 20,
                "required": True,
                "description": "Who",
            },
            "when": {"type": "string", "format": "date-time"},
            "color": {"type": "string", "format": "color"},
            "filters": {
                "type": "array",
                "uniqueItems": True,
                "maxItems": 5,
                "items": {
                    "type": "object",
                    "properties": {"field": {"type": "string"}, "value": {"type": "number"}},
                    "required": ["field"],
                    "patternProperties": {"^x": {"type": "string"}},
                },
            },
            "meta": {"type": "object"},
            "opts": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "properties": {"deep": {"type": "boolean"}},
                "required": True,
            },
            "either": {
                "type": "string",
                "oneOf": [{"const": "a"}, {"const": "b"}],
                "allOf": [{"minLength": 1}],
                "not": {"const": "c"},
            },
            "pinned": {"type": "string", "const": "x"},
        }
    )
    assert strict_schema(original) == {
        "type": "object",
        "properties": {
            "mode": {
                "type": ["string", "null"],
                "enum": ["fast", "slow", None],
                "description": '(default: "fast")',
            },
            "name": {"type": "string", "description": "Who (minLength: 1, maxLength: 20)"},
            "when": {"type": ["string", "null"], "format": "date-time"},
            "color": {"type": ["string", "null"], "description": '(format: "color")'},
            "filters": {
                "type": ["array", "null"],
                "maxItems": 5,
                "items": {
                    "type": "object",
                    "properties": {
                        "field": {"type": "string"},
                        "value": {"type": ["number", "null"]},
                    },
                    "required": ["field", "value"],
                    "additionalProperties": False,
                },
                "description": "(uniqueItems: true)",
            },
            "meta": {
                "type": ["object", "null"],
                "properties": {},
                "required": [],
                "additionalProperties": False,
            },
            "opts": {
                "type": "object",
                "properties": {"deep": {"type": ["boolean", "null"]}},
                "required": ["deep"],
                "additionalProperties": False,
            },
            "either": {"type": ["string", "null"], "anyOf": [{"const": "a"}, {"const": "b"}]},
            "pinned": {"anyOf": [{"type": "string", "const": "x"}, {"type": "null"}]},
        },
        "required": [
            "mode",
            "name",
            "when",
            "color",
            "filters",
            "meta",
            "opts",
            "either",
            "pinned",
        ],
        "additionalProperties": False,
    }


def test_strict_nullable_for_schemas_without_type() -> None:
    s = strict_schema(
        {
            "type": "object",
            "properties": {
                "ref": {"$ref": "#/$defs/p", "description": "A point"},
                "alt": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "already": {"type": ["string", "null"]},
            },
            "$defs": {"p": {"type": "object", "properties": {"x": {"type": "number"}}}},
        }
    )
    assert s["properties"] == {
        "ref": {"description": "A point", "anyOf": [{"$ref": "#/$defs/p"}, {"type": "null"}]},
        "alt": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        "already": {"type": ["string", "null"]},
    }
    assert s["$defs"]["p"] == {
        "type": "object",
        "properties": {"x": {"type": ["number", "null"]}},
        "required": ["x"],
        "additionalProperties": False,
    }


def test_strict_does_not_modify_the_spec() -> None:
    t = tool()
    before = json.dumps(dict(t.input_schema), default=dict)
    definition(t, "openai-strict")
    assert json.dumps(dict(t.input_schema), default=dict) == before


def test_strip_strict_nulls_restores_valid_arguments() -> None:
    original = schema_of(
        {
            "path": {"type": "string", "required": True},
            "limit": {"type": "integer"},
            "note": {"type": ["string", "null"]},
            "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}},
        }
    )
    args = {"path": "a", "limit": None, "note": None, "opts": {"deep": None}, "extra": None}
    fixed = strip_strict_nulls(original, args)
    assert fixed == {"path": "a", "note": None, "opts": {}, "extra": None}
    jsonschema.Draft202012Validator(original).validate(fixed)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(original).validate(args)
