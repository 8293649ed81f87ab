"""Property test: openai-strict output is always what strict mode demands.

For generated parameter sets: the strict schema is a valid Draft 2020-12 schema, every
object (nested too) has ``additionalProperties: false`` and ``required`` equal to all
its properties, only keywords strict mode accepts remain, and a call that leaves the
optional arguments ``null`` passes the strict schema and, after
``strip_strict_nulls``, the original one.
"""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.artifacts.export import STRICT_KEYWORDS, strict_schema, strip_strict_nulls

NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
DESC = st.one_of(st.none(), st.text(max_size=20))


def _with(base: dict[str, Any], desc: str | None, required: bool, extra: dict) -> dict:
    out = dict(base, **extra)
    if desc:
        out["description"] = desc
    if required:
        out["required"] = True
    return out


def scalar() -> st.SearchStrategy[dict[str, Any]]:
    string = st.fixed_dictionaries(
        {},
        optional={
            "enum": st.lists(
                st.text(alphabet="abcxyz", min_size=3, max_size=3),
                min_size=1,
                max_size=3,
                unique=True,
            ),
            "minLength": st.integers(0, 3),
            "maxLength": st.integers(3, 9),
            "pattern": st.just("^.*$"),
            "format": st.sampled_from(["date", "email", "color", "uri"]),
            "default": st.text(max_size=3),
        },
    ).map(lambda d: {"type": "string", **d})
    number = st.tuples(
        st.sampled_from(["number", "integer"]),
        st.fixed_dictionaries(
            {},
            optional={
                "minimum": st.integers(-5, 5),
                "multipleOf": st.just(1),
                "default": st.just(1),
            },
        ),
    ).map(lambda t: {"type": t[0], **t[1]})
    boolean = st.just({"type": "boolean"})
    return st.one_of(string, number, boolean)


def param(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A parameter schema in the nested JSON-Schema form (required as a list)."""
    obj = st.dictionaries(NAMES, st.tuples(children, st.booleans()), max_size=4).map(
        lambda props: {
            "type": "object",
            "properties": {k: v for k, (v, _) in props.items()},
            "required": [k for k, (_, r) in props.items() if r],
        }
    )
    arr = children.map(lambda items: {"type": "array", "items": items, "maxItems": 10})
    return st.one_of(obj, arr)


SCHEMAS = st.recursive(scalar(), param, max_leaves=12)
PARAM_SETS = st.dictionaries(NAMES, st.tuples(SCHEMAS, DESC, st.booleans()), max_size=6)


def build(params: dict[str, tuple[dict, str | None, bool]]) -> dict[str, Any]:
    props = {}
    required = []
    for name, (schema, desc, req) in params.items():
        props[name] = _with(schema, desc, False, {})
        if req:
            required.append(name)
    return {"type": "object", "properties": props, "required": required}


def walk(node: Any, visit) -> None:
    if isinstance(node, dict):
        visit(node)
        for key in ("properties", "$defs"):
            for sub in node.get(key, {}).values():
                walk(sub, visit)
        if isinstance(node.get("items"), dict):
            walk(node["items"], visit)
        for sub in node.get("anyOf", []):
            walk(sub, visit)


def is_object(node: dict) -> bool:
    t = node.get("type")
    return t == "object" or (isinstance(t, list) and "object" in t)


def minimal(schema: dict[str, Any]) -> Any:
    """A value valid against the original ``schema``; optional object keys sent as null."""
    t = schema["type"]
    if t == "string":
        return schema["enum"][0] if "enum" in schema else "x" * schema.get("minLength", 0)
    if t in ("number", "integer"):
        return schema.get("minimum", 0)
    if t == "boolean":
        return False
    if t == "array":
        return []
    req = set(schema.get("required", []))
    return {k: (minimal(v) if k in req else None) for k, v in schema["properties"].items()}


@settings(max_examples=150, deadline=None)
@given(PARAM_SETS)
def test_strict_schema_invariants(params: dict) -> None:
    original = build(params)
    strict = strict_schema(original)
    jsonschema.Draft202012Validator.check_schema(strict)

    def visit(node: dict) -> None:
        assert set(node) <= STRICT_KEYWORDS, set(node) - STRICT_KEYWORDS
        if is_object(node):
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])

    walk(strict, visit)
    assert strict["type"] == "object"

    call = minimal(original)
    jsonschema.Draft202012Validator(strict).validate(call)
    jsonschema.Draft202012Validator(original).validate(strip_strict_nulls(original, call))
