"""Property test: every ``openai-strict`` export follows OpenAI's strict-mode rules.

Generated parameter sets mix what strict mode can express (typed scalars, enum-only
and const-only schemas, ``oneOf`` of consts, nested objects, typed arrays, ``anyOf``)
with what it cannot (free-form objects, maps, arrays without ``items``, ``items: {}``,
tuples, untyped schemas). For each tool:

- ``"strict": true`` exports satisfy the documented rules (checked by
  :func:`assert_openai_strict`, written from the OpenAI docs, not from export.py), and
  lose nothing: every value valid for the original schema, sent the way a strict-mode
  model sends it (omitted optional arguments as ``null``), passes the strict schema,
  and ``strip_strict_nulls`` turns it back into the original value.
- ``"strict": false`` exports happen exactly when ``strict_incompatibilities`` gives a
  reason, and carry the original schema (``items: {}`` added where it was missing).
"""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import event, given, settings
from hypothesis import strategies as st

from harness.artifacts.export import (
    definition,
    openai_parameters,
    strict_incompatibilities,
    strip_strict_nulls,
)
from harness.artifacts.model import Source, ToolSpec

# OpenAI Structured Outputs "Supported schemas" (function calling with strict: true).
OPENAI_TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}
OPENAI_KEYWORDS = {
    "type", "description", "title", "enum", "const", "anyOf", "$ref", "$defs", "definitions",
    "properties", "required", "additionalProperties", "items",
    "pattern", "format",
    "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minItems", "maxItems",
}  # fmt: skip
OPENAI_FORMATS = {
    "date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"
}  # fmt: skip

NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
WORDS = st.text(alphabet="abcxyz", min_size=3, max_size=3)


def assert_openai_strict(schema: Any, at: str = "", root: bool = True) -> None:
    """OpenAI's strict-mode rules, for ``schema`` and every schema inside it."""
    assert isinstance(schema, dict), f"{at}: not a schema object"
    assert set(schema) <= OPENAI_KEYWORDS, f"{at}: unsupported {set(schema) - OPENAI_KEYWORDS}"
    if root:
        assert schema.get("type") == "object" and "anyOf" not in schema, "root: plain object"
    if "$ref" in schema:
        assert set(schema) == {"$ref"}, f"{at}: $ref with siblings"
        return
    assert "type" in schema or "anyOf" in schema, f"{at}: schema must have a 'type' key"
    if "anyOf" in schema:
        assert schema["anyOf"], f"{at}: empty anyOf"
        for i, branch in enumerate(schema["anyOf"]):
            assert_openai_strict(branch, f"{at}.anyOf[{i}]", False)
    types = schema.get("type")
    types = {types} if isinstance(types, str) else set(types or [])
    assert types <= OPENAI_TYPES, f"{at}: bad type {types}"
    if "format" in schema:
        assert schema["format"] in OPENAI_FORMATS, f"{at}: format {schema['format']}"
    for key in ("enum", "const"):
        values = schema.get("enum", []) if key == "enum" else [schema.get("const")]
        assert all(not isinstance(v, dict | list) for v in values), f"{at}: {key}"
    if "object" in types:
        assert schema.get("additionalProperties") is False, f"{at}: additionalProperties"
        assert isinstance(schema.get("properties"), dict), f"{at}: properties"
        assert schema.get("required") == list(schema["properties"]), f"{at}: required"
    for name, sub in schema.get("properties", {}).items():
        assert_openai_strict(sub, f"{at}.{name}", False)
    if "array" in types:
        assert isinstance(schema.get("items"), dict), f"{at}: array schema missing items"
    if "items" in schema:
        assert_openai_strict(schema["items"], f"{at}[]", False)
    for name, sub in schema.get("$defs", {}).items():
        assert_openai_strict(sub, f"$defs.{name}", False)


def assert_no_missing_items(schema: Any) -> None:
    """What OpenAI checks without strict mode: an array schema has ``items``."""
    if isinstance(schema, dict):
        t = schema.get("type")
        if t == "array" or (isinstance(t, list) and "array" in t):
            assert "items" in schema, "array schema missing items"
        for value in schema.values():
            assert_no_missing_items(value)
    elif isinstance(schema, list):
        for value in schema:
            assert_no_missing_items(value)


# ------------------------------------------------------------------ schema strategies
# Each strategy yields (schema, expressible, values) where values is a strategy of
# (original_value, strict_value): the same argument as a caller and as a strict-mode
# model sends it. ``values`` is None for schemas strict mode cannot express.

Gen = tuple[dict[str, Any], bool, Any]


def _pair(values: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, Any]]:
    return values.map(lambda v: (v, v))


def scalars(bad: bool) -> st.SearchStrategy[Gen]:
    def string(opts: dict[str, Any]) -> Gen:
        schema = {"type": "string", **opts}
        if "enum" in opts:
            return schema, True, _pair(st.sampled_from(opts["enum"]))
        low = opts.get("minLength", 0)
        return schema, True, _pair(st.text(alphabet="ab", min_size=low, max_size=low + 3))

    strings = st.fixed_dictionaries(
        {},
        optional={
            "enum": st.lists(WORDS, min_size=1, max_size=3, unique=True),
            "minLength": st.integers(0, 3),
            "pattern": st.just("^.*$"),
            "format": st.sampled_from(["date", "email", "color", "uri"]),
            "default": WORDS,
            "description": st.text(max_size=10),
        },
    ).map(string)
    numbers = st.tuples(st.sampled_from(["number", "integer"]), st.integers(-5, 5)).map(
        lambda t: (
            {"type": t[0], "minimum": t[1], "multipleOf": 1},
            True,
            _pair(st.integers(t[1], t[1] + 9)),
        )
    )
    booleans = st.just(({"type": "boolean"}, True, _pair(st.booleans())))
    enum_only = st.one_of(
        st.lists(WORDS, min_size=1, max_size=3, unique=True),
        st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True),
        st.tuples(WORDS, st.integers(0, 9)).map(list),
    ).map(lambda e: ({"enum": e}, True, _pair(st.sampled_from(e))))
    const_only = st.sampled_from(["a", 1, 2.5, True]).map(
        lambda c: ({"const": c}, True, _pair(st.just(c)))
    )
    one_of_consts = st.lists(WORDS, min_size=2, max_size=3, unique=True).map(
        lambda cs: (
            {"type": "string", "oneOf": [{"const": c, "description": c} for c in cs]},
            True,
            _pair(st.sampled_from(cs)),
        )
    )
    good = st.one_of(strings, numbers, booleans, enum_only, const_only, one_of_consts)
    if not bad:
        return good
    untyped = st.sampled_from([{}, {"description": "anything"}]).map(lambda s: (s, False, None))
    return st.one_of(good, untyped)


def compounds(children: st.SearchStrategy[Gen], bad: bool) -> st.SearchStrategy[Gen]:
    def obj(props: dict[str, tuple[Gen, bool]]) -> Gen:
        schema = {
            "type": "object",
            "properties": {k: g[0] for k, (g, _) in props.items()},
            "required": [k for k, (_, req) in props.items() if req],
        }
        ok = all(g[1] for g, _ in props.values())
        if not ok:
            return schema, False, None

        @st.composite
        def values(draw: Any) -> tuple[Any, Any]:
            original, strict = {}, {}
            for name, ((_, _, vals), req) in props.items():
                if req or draw(st.booleans()):
                    original[name], strict[name] = draw(vals)
                else:
                    strict[name] = None  # left out: a strict-mode model sends null
            return original, strict

        return schema, True, values()

    def arr(child: Gen) -> Gen:
        schema = {"type": "array", "items": child[0], "maxItems": 3}
        if not child[1]:
            return schema, False, None
        values = st.lists(child[2], max_size=3).map(
            lambda pairs: ([p[0] for p in pairs], [p[1] for p in pairs])
        )
        return schema, True, values

    def any_of(pair: tuple[Gen, Gen]) -> Gen:
        a, b = pair
        schema = {"anyOf": [a[0], b[0]]}
        if not (a[1] and b[1]):
            return schema, False, None
        return schema, True, st.one_of(a[2], b[2])

    objects = st.dictionaries(NAMES, st.tuples(children, st.booleans()), max_size=4).map(obj)
    good = st.one_of(objects, children.map(arr), st.tuples(children, children).map(any_of))
    if not bad:
        return good
    not_expressible = st.one_of(
        st.just({"type": "object"}),
        children.map(lambda g: {"type": "object", "additionalProperties": g[0]}),
        st.just({"type": "object", "additionalProperties": True, "properties": {}}),
        st.just({"type": "array"}),
        st.just({"type": "array", "items": {}}),
        children.map(lambda g: {"type": "array", "prefixItems": [g[0]]}),
    ).map(lambda s: (s, False, None))
    return st.one_of(good, not_expressible)


def param_sets(bad: bool) -> st.SearchStrategy[dict[str, tuple[Gen, bool]]]:
    schemas = st.recursive(scalars(bad), lambda c: compounds(c, bad), max_leaves=10)
    return st.dictionaries(NAMES, st.tuples(schemas, st.booleans()), max_size=5)


def tool_for(params: dict[str, tuple[Gen, bool]]) -> tuple[ToolSpec, dict[str, Any]]:
    schema = {
        "type": "object",
        "properties": {k: g[0] for k, (g, _) in params.items()},
        "required": [k for k, (_, req) in params.items() if req],
    }
    spec = ToolSpec(name="t", description="T.", input_schema=schema, source=Source(path="t.md"))
    return spec, schema


@settings(max_examples=200, deadline=None)
@given(param_sets(bad=False), st.data())
def test_strict_exports_follow_openai_rules_and_keep_meaning(params, data) -> None:
    spec, original = tool_for(params)
    assert strict_incompatibilities(original) == []
    fn = definition(spec, "openai-strict")["function"]
    assert fn["strict"] is True
    strict = fn["parameters"]
    jsonschema.Draft202012Validator.check_schema(strict)
    assert_openai_strict(strict)

    original_value: dict[str, Any] = {}
    strict_value: dict[str, Any] = {}
    for name, ((_, _, vals), req) in params.items():
        if req or data.draw(st.booleans()):
            original_value[name], strict_value[name] = data.draw(vals)
        else:
            strict_value[name] = None
    jsonschema.Draft202012Validator(original).validate(original_value)
    jsonschema.Draft202012Validator(strict).validate(strict_value)
    assert strip_strict_nulls(original, strict_value) == original_value


@settings(max_examples=150, deadline=None)
@given(param_sets(bad=True))
def test_inexpressible_tools_go_out_non_strict_with_their_schema(params) -> None:
    spec, original = tool_for(params)
    expressible = all(g[1] for g, _ in params.values())
    fn = definition(spec, "openai-strict")["function"]
    reasons = strict_incompatibilities(original)
    assert fn["strict"] is expressible is (not reasons), reasons
    event(f"strict: {fn['strict']}")
    if fn["strict"]:
        assert_openai_strict(fn["parameters"])
    else:
        assert fn["parameters"] == openai_parameters(original)
        jsonschema.Draft202012Validator.check_schema(fn["parameters"])
        assert_no_missing_items(fn["parameters"])
