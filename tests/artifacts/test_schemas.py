"""The published JSON Schemas (harness/schemas) are valid 2020-12 and accept every good fixture."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema_rs
import pytest

import harness
from harness.artifacts.frontmatter import split

SCHEMAS = Path(harness.__file__).parent / "schemas"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "load"


def _validator(name: str) -> jsonschema_rs.Validator:
    return jsonschema_rs.validator_for(json.loads((SCHEMAS / f"{name}.schema.json").read_text()))


@pytest.mark.parametrize("name", ["tool", "hook", "bundle", "harness"])
def test_schema_is_valid_2020_12(name: str) -> None:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema_rs.meta.validate(schema)


def _kind(rel: Path) -> str:
    parts = rel.parts
    if parts[0] == "harness.md":
        return "harness"
    return {"tools": "tool", "hooks": "hook"}.get(parts[1], "bundle")


@pytest.mark.parametrize("case", ["good", "bom_crlf", "empty_frontmatter", "no_script"])
def test_good_fixtures_are_accepted(case: str) -> None:
    root = FIXTURES / case
    files = [p for p in root.rglob("*.md")]
    assert files
    for path in files:
        kind = _kind(path.relative_to(root))
        data = split(path.read_bytes(), path.name)[0]
        errors = [e.message for e in _validator(kind).iter_errors(data)]
        assert errors == [], (path, errors)


@pytest.mark.parametrize(
    "case,kind",
    [
        ("timeout_negative", "tool"),
        ("param_type_invalid", "tool"),
        ("field_types", "tool"),
        ("returns_invalid", "tool"),
        ("hook_no_event", "hook"),
        ("hook_unknown_event", "hook"),
        ("hook_fields", "hook"),
        ("unknown_key", "tool"),
    ],
)
def test_bad_fixtures_are_rejected(case: str, kind: str) -> None:
    (path,) = (FIXTURES / case).rglob("*.md")
    data = split(path.read_bytes(), path.name)[0]
    assert not _validator(kind).is_valid(data)


def test_bad_config_is_rejected() -> None:
    data = split((FIXTURES / "config_invalid" / "harness.md").read_bytes(), "harness.md")[0]
    assert not _validator("harness").is_valid(data)
