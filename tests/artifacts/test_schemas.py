"""The published JSON Schemas (harness/schemas) are valid 2020-12 and accept every good fixture."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema_rs
import pytest

import harness
from harness.artifacts.checks import UNKNOWN_KEY_CODES
from harness.artifacts.frontmatter import fatal, split
from harness.artifacts.published import frontmatter_schema
from harness.validation import check_project

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


# -- the schemas are derived from the checks' tables and agree with validate ----------------


@pytest.mark.parametrize("name", ["tool", "hook", "bundle", "harness"])
def test_published_schema_is_generated_from_the_tables(name: str) -> None:
    published = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    assert published == frontmatter_schema(name), (
        "regenerate: python -c 'from harness.artifacts.published import write_schemas; "
        "write_schemas()'"
    )


# Problem codes a frontmatter schema can express (with --strict, unknown keys are errors).
STRUCTURAL = frozenset(
    (
        *UNKNOWN_KEY_CODES,
        "field-type",
        "timeout-negative",
        "loading-invalid",
        "on-error-invalid",
        "annotations-invalid",
        "returns-invalid",
        "parameters-invalid",
        "parameter-invalid",
        "parameter-type-missing",
        "parameter-type-invalid",
        "parameter-required-invalid",
        "parameter-description-invalid",
        "parameters-schema-invalid",
        "event-missing",
        "event-unknown",
        "hook-script-missing",
        "config-invalid",
        "bundle-invalid",
        "entry-invalid",
        "entry-name-missing",
        "tool-name-invalid",
        "hook-name-invalid",
    )
)
# Fixtures whose verdict needs more than one file's frontmatter: the schemas cannot agree.
BEYOND_SCHEMA = {
    "schema_compile": "a $ref target and remote references need the resolver",
    "workspace_missing": "whether a directory exists",
}


def _validator_with_formats(name: str) -> jsonschema_rs.Validator:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    return jsonschema_rs.validator_for(schema, validate_formats=True)


def _cases() -> list[str]:
    return sorted(p.name for p in FIXTURES.iterdir() if p.name not in BEYOND_SCHEMA)


@pytest.mark.parametrize("case", _cases())
def test_schemas_and_validate_agree_on_every_fixture(case: str) -> None:
    root = FIXTURES / case
    problems = check_project(root, strict=True).problems
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root)
        data, _body, _lines, parse_problems = split(path.read_bytes(), rel)
        if fatal(parse_problems):
            continue  # nothing for a schema to look at
        kind = _kind(rel)
        structural = [
            p
            for p in problems
            if p.path == str(rel)
            and p.severity == "error"
            and p.code in STRUCTURAL
            # a file artifact's name is its file name, not part of the frontmatter
            and not (p.code.endswith("-name-invalid") and kind in ("tool", "hook"))
        ]
        errors = [e.message for e in _validator_with_formats(kind).iter_errors(data)]
        assert bool(errors) == bool(structural), (rel, errors, [p.render() for p in structural])


def test_schemas_and_validate_agree_on_patterns(tmp_path: Path) -> None:
    for pattern, ok in (("^[a-z]+$", True), ("(", False), ("\\p{L}+", True)):
        tool = tmp_path / ".harness" / "tools" / "t.md"
        tool.parent.mkdir(parents=True, exist_ok=True)
        text = (
            f"---\nparameters:\n  q:\n    type: string\n    pattern: {json.dumps(pattern)}\n---\n"
        )
        tool.write_text(text)
        data = split(text, "t.md")[0]
        assert _validator_with_formats("tool").is_valid(data) is ok
        codes = [p.code for p in check_project(tmp_path).problems]
        assert ("parameters-schema-invalid" not in codes) is ok, codes
