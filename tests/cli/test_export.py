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
    openai_parameters,
    provider_name,
    strict_incompatibilities,
    strict_schema,
    strip_strict_nulls,
)
from harness.artifacts.model import Parameter, Source, ToolSpec
from harness.errors import UsageError


def schema_of(params: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the loader builds (docs/spec.md §3): properties and required in YAML order."""
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
            Parameter(name=k, type=str(v.get("type", "")), required=bool(v.get("required")))
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
                    "minProperties": 1,
                },
            },
            "opts": {
                "type": "object",
                "additionalProperties": False,
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
                    "description": "(minProperties: 1)",
                },
                "description": "(uniqueItems: true)",
            },
            "opts": {
                "type": "object",
                "properties": {"deep": {"type": ["boolean", "null"]}},
                "required": ["deep"],
                "additionalProperties": False,
            },
            "either": {
                "anyOf": [
                    # allOf is merged in (strict mode has none): its minLength is noted.
                    {"type": "string", "const": "a", "description": "(minLength: 1)"},
                    {"type": "string", "const": "b", "description": "(minLength: 1)"},
                    {"type": "null"},
                ]
            },
            "pinned": {"anyOf": [{"type": "string", "const": "x"}, {"type": "null"}]},
        },
        "required": [
            "mode",
            "name",
            "when",
            "color",
            "filters",
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


# ------------------------------------------------------------- strict: review cases


def strict_fn(params: dict) -> dict[str, Any]:
    return definition(tool("t", params=params), "openai-strict")["function"]


@pytest.mark.parametrize(
    ("param", "reason"),
    [
        ({"type": "array"}, '"x": array without "items"'),
        ({"type": "array", "items": {}}, '"x": array items accept any value'),
        ({"type": "array", "items": True}, '"x": array items accept any value'),
        ({"type": "array", "prefixItems": [{"type": "string"}]}, '"x": tuple array'),
        ({"type": "array", "items": [{"type": "string"}]}, '"x": tuple array'),
        ({"type": "object"}, '"x": object without "properties" accepts any keys'),
        (
            {"type": "object", "additionalProperties": {"type": "string"}},
            '"x": "additionalProperties" allows extra keys (a map)',
        ),
        (
            {"type": "object", "properties": {}, "additionalProperties": True},
            '"x": "additionalProperties" allows extra keys',
        ),
        (
            {"type": "object", "properties": {}, "patternProperties": {"^a": {}}},
            '"x": "patternProperties" allows extra keys',
        ),
        ({"description": "anything"}, '"x": no "type" (any value is allowed)'),
        (
            {"type": "array", "items": {"type": "object", "properties": {"m": {"type": "object"}}}},
            '"x[].m": object without "properties"',
        ),
        ({"enum": [{"a": 1}, "b"]}, '"x": "enum" with object or array values'),
        ({"anyOf": [{"type": "string"}, True]}, '"x.anyOf[1]": boolean schema true'),
    ],
)
def test_inexpressible_schema_exports_that_tool_non_strict(param: dict, reason: str) -> None:
    params = {"x": {**param, "required": True}, "y": {"type": "string"}}
    spec = tool("t", params=params)
    reasons = strict_incompatibilities(spec.input_schema)
    assert reasons and reasons[0].startswith(reason), reasons
    fn = definition(spec, "openai-strict")["function"]
    assert fn["strict"] is False
    # the real schema, not a rewrite that means something else
    assert fn["parameters"] == openai_parameters(schema_of(params))
    with pytest.raises(ValueError, match="not expressible in strict mode"):
        strict_schema(spec.input_schema)


def test_only_the_inexpressible_tool_loses_strict() -> None:
    ok = tool("ok")
    bad = tool("bad", params={"tags": {"type": "object", "additionalProperties": True}})
    out = definitions([ok, bad], "openai-strict")
    assert [d["function"]["strict"] for d in out] == [True, False]


def test_non_strict_fallback_adds_items_to_arrays_without_them() -> None:
    fn = strict_fn({"x": {"type": "array"}, "enum": {"type": ["array", "null"]}})
    assert fn["parameters"]["properties"] == {
        "x": {"type": "array", "items": {}},
        "enum": {"type": ["array", "null"], "items": {}},
    }


def test_openai_format_adds_items_only_where_missing() -> None:
    params = {
        "a": {"type": "array"},
        "t": {"type": "array", "prefixItems": [{"type": "array"}]},
        "k": {"type": "array", "items": {"type": "string"}},
        "m": {"type": "object", "additionalProperties": {"type": "array"}},
        "enum": {"type": "string", "enum": ["array"], "default": "array"},
    }
    params_out = definition(tool("t", params=params), "openai")["function"]["parameters"]
    assert params_out["properties"] == {
        "a": {"type": "array", "items": {}},
        "t": {"type": "array", "prefixItems": [{"type": "array", "items": {}}], "items": {}},
        "k": {"type": "array", "items": {"type": "string"}},
        "m": {"type": "object", "additionalProperties": {"type": "array", "items": {}}},
        "enum": {"type": "string", "enum": ["array"], "default": "array"},
    }


@pytest.mark.parametrize(
    ("param", "required_form", "optional_form"),
    [
        (
            {"enum": ["a", "b"]},
            {"type": "string", "enum": ["a", "b"]},
            {"type": ["string", "null"], "enum": ["a", "b", None]},
        ),
        (
            {"enum": [1, 2.5]},
            {"type": "number", "enum": [1, 2.5]},
            {"type": ["number", "null"], "enum": [1, 2.5, None]},
        ),
        (
            {"enum": ["a", 1, None]},
            {"type": ["string", "integer", "null"], "enum": ["a", 1, None]},
            {"type": ["string", "integer", "null"], "enum": ["a", 1, None]},
        ),
        (
            {"const": True},
            {"type": "boolean", "const": True},
            {"anyOf": [{"type": "boolean", "const": True}, {"type": "null"}]},
        ),
        (
            {"properties": {"q": {"type": "string"}}},
            {
                "type": "object",
                "properties": {"q": {"type": ["string", "null"]}},
                "required": ["q"],
                "additionalProperties": False,
            },
            {
                "type": ["object", "null"],
                "properties": {"q": {"type": ["string", "null"]}},
                "required": ["q"],
                "additionalProperties": False,
            },
        ),
    ],
)
def test_type_is_inferred_from_enum_const_and_properties(
    param: dict, required_form: dict, optional_form: dict
) -> None:
    props = strict_fn({"r": {**param, "required": True}, "o": param})["parameters"]["properties"]
    assert props == {"r": required_form, "o": optional_form}


def test_optional_one_of_with_a_type_accepts_null_and_keeps_its_choices() -> None:
    param = {"type": "string", "oneOf": [{"const": "a"}, {"const": "b", "description": "B"}]}
    fn = strict_fn({"x": param})
    assert fn["strict"] is True
    assert fn["parameters"]["properties"]["x"] == {
        "anyOf": [
            {"type": "string", "const": "a"},
            {"type": "string", "const": "b", "description": "B"},
            {"type": "null"},
        ]
    }
    v = jsonschema.Draft202012Validator(fn["parameters"])
    assert v.is_valid({"x": None}) and v.is_valid({"x": "b"})
    assert not v.is_valid({"x": "c"}) and not v.is_valid({"x": 1})


def test_keywords_next_to_any_of_go_into_each_branch() -> None:
    param = {
        "type": "object",
        "description": "Pick one",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}, {"type": "string"}],
    }
    x = strict_fn({"x": {**param, "required": True}})["parameters"]["properties"]["x"]
    obj = {"type": "object", "additionalProperties": False, "required": ["a", "b"]}
    assert x == {
        "description": "Pick one",
        "anyOf": [  # the string branch cannot overlap "type": "object": dropped
            {**obj, "properties": {"a": {"type": "string"}, "b": {"type": ["integer", "null"]}}},
            {**obj, "properties": {"a": {"type": ["string", "null"]}, "b": {"type": "integer"}}},
        ],
    }


def test_ref_with_siblings_becomes_a_wrapped_bare_ref() -> None:
    s = strict_schema(
        {
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/p", "description": "A point", "minimum": 1}},
            "required": ["p"],
            "$defs": {"p": {"type": "object", "properties": {"x": {"type": "number"}}}},
        }
    )
    assert s["properties"]["p"] == {"description": "A point", "anyOf": [{"$ref": "#/$defs/p"}]}


def test_root_any_of_is_inexpressible() -> None:
    schema = {"type": "object", "properties": {}, "anyOf": [{"required": []}]}
    assert strict_incompatibilities(schema) == [
        'the parameters object: "anyOf" at the root; strict mode needs one plain object'
    ]


def test_no_parameters_are_expressible() -> None:
    assert strict_incompatibilities(None) == strict_incompatibilities({}) == []
    assert strict_incompatibilities(MappingProxyType(READ_SCHEMA)) == []


# ------------------------------------------------------------- strip_strict_nulls


NESTED = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "mode": {"enum": ["a", "b"]},
        "maybe": {"enum": ["a", None]},
        "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"k": {"type": "string"}, "v": {"type": "integer"}},
                "required": ["k"],
            },
        },
        "at": {"$ref": "#/$defs/point"},
        "shape": {
            "anyOf": [
                {"type": "object", "properties": {"r": {"type": "number"}}},
                {
                    "type": "object",
                    "properties": {"w": {"type": "number"}, "h": {"type": "number"}},
                    "required": ["w"],
                },
            ]
        },
    },
    "required": ["path"],
    "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}}},
}


def test_strip_strict_nulls_recurses_through_items_refs_and_branches() -> None:
    args = {
        "path": None,  # required: kept, so validation reports it
        "mode": None,
        "maybe": None,  # the real schema accepts null: kept
        "either": None,
        "rows": [{"k": "a", "v": None}, {"k": "b", "v": 2}],
        "at": {"x": None},
        "shape": {"w": 1, "h": None},
    }
    before = json.dumps(args)
    assert strip_strict_nulls(MappingProxyType(NESTED), args) == {
        "path": None,
        "maybe": None,
        "either": None,
        "rows": [{"k": "a"}, {"k": "b", "v": 2}],
        "at": {},
        "shape": {"w": 1},
    }
    assert json.dumps(args) == before  # not modified in place


def test_strip_strict_nulls_round_trips_a_strict_call() -> None:
    strict = strict_schema(NESTED)
    call = {
        "path": "p",
        "mode": None,
        "maybe": None,
        "either": None,
        "rows": [{"k": "a", "v": None}],
        "at": {"x": None},
        "shape": {"r": None},
    }
    jsonschema.Draft202012Validator(strict).validate(call)
    fixed = strip_strict_nulls(NESTED, call)
    jsonschema.Draft202012Validator(NESTED).validate(fixed)
    assert fixed == {"path": "p", "maybe": None, "either": None, "rows": [{"k": "a"}],
                     "at": {}, "shape": {}}  # fmt: skip


@pytest.mark.parametrize("args", [None, "text", 3, ["a", None], {}])
def test_strip_strict_nulls_leaves_other_values_alone(args: Any) -> None:
    assert strip_strict_nulls(NESTED, args) == args


def test_strip_strict_nulls_with_an_unresolvable_ref_drops_the_null() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    assert strip_strict_nulls(schema, {"a": None, "b": None}) == {"b": None}
