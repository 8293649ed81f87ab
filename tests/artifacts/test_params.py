"""parameters -> JSON Schema (docs/spec.md §3)."""

from __future__ import annotations

import json

from harness.artifacts.params import build, schema_errors


def _build(raw: object) -> tuple:
    return build(raw, owner='tool "t"', path="t.md", pos=lambda p: (1, 1))


def test_order_required_and_passthrough() -> None:
    params, schema, problems = _build(
        {
            "zeta": {"type": "string", "required": True, "description": ""},
            "alpha": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 1,
                "required": False,
            },
            "mid": {"type": "number", "description": "m", "required": True, "enum": [1, 2]},
        }
    )
    assert problems == []
    assert json.dumps(schema) == json.dumps(
        {
            "type": "object",
            "properties": {
                "zeta": {"type": "string"},
                "alpha": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
                "mid": {"type": "number", "description": "m", "enum": [1, 2]},
            },
            "required": ["zeta", "mid"],
        }
    )
    assert [p.name for p in params] == ["zeta", "alpha", "mid"]
    assert params[0].required and not params[1].required
    assert "required" not in params[2].schema


def test_empty_and_invalid_parameters() -> None:
    assert _build(None)[1] == {"type": "object", "properties": {}, "required": []}
    assert [p.code for p in _build(["a"])[2]] == ["parameters-invalid"]
    codes = [
        p.code
        for p in _build(
            {
                "a": "string",
                "b": {"type": ["string", "null"]},
                "c": {"type": "string", "requird": True},
            }
        )[2]
    ]
    assert codes == ["parameter-invalid", "parameter-type-invalid", "parameter-unknown-key"]
    assert "write `a: {type: string}`" in _build({"a": "string"})[2][0].message


def test_schema_errors_use_a_compiled_metaschema() -> None:
    assert list(schema_errors({"type": "object", "properties": {"a": {"type": "string"}}})) == []
    (error,) = list(schema_errors({"properties": {"a": {"maxLength": -1}}}))
    assert error[0] == ("properties", "a", "maxLength")
    assert list(schema_errors(True)) == []
    assert list(schema_errors([1]))
