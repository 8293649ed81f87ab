"""The editor schemas of test and eval files: generated, valid, and agreeing with the
parsers on the repository's own files and on a broken one."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema_rs
import pytest

import harness
from harness.artifacts.frontmatter import split
from harness.testing.schema import schema_of_evals, schema_of_tests

SCHEMAS = Path(harness.__file__).parent / "schemas"
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("name", "make"), [("test", schema_of_tests), ("eval", schema_of_evals)])
def test_published_schema_is_generated_and_valid(name: str, make: object) -> None:
    published = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    assert published == make(), (  # type: ignore[operator]
        "regenerate: python -c 'from harness.testing.schema import write_schemas; write_schemas()'"
    )
    jsonschema_rs.meta.validate(published)


def frontmatter(path: Path) -> dict[str, object]:
    data, _body, _lines, problems = split(path.read_bytes(), path.name, "test")
    assert not problems
    return data


def test_the_repository_test_file_is_accepted() -> None:
    v = jsonschema_rs.validator_for(schema_of_tests())
    data = frontmatter(REPO / ".harness" / "tests" / "starter.md")
    assert v.is_valid(data), [e.message for e in v.iter_errors(data)]


def test_broken_files_are_rejected() -> None:
    v = jsonschema_rs.validator_for(schema_of_tests())
    assert not v.is_valid({"cases": [{"call": "x", "expect": {"okay": True}}]})
    assert not v.is_valid({"cases": [{"call": "x", "hook": "y"}]})
    assert not v.is_valid({"cases": [{"hook": "y", "expect": {"decision": "maybe"}}]})
    assert v.is_valid(
        {
            "cases": [
                {
                    "steps": [
                        {
                            "call": "x",
                            "expect": {
                                "files": {
                                    "a": {"absent": True},
                                    "b": {"contains": "t"},
                                    "c": "text",
                                }
                            },
                        }
                    ]
                }
            ]
        }
    )
    e = jsonschema_rs.validator_for(schema_of_evals())
    assert e.is_valid(
        {"cases": [{"turns": ["hi"], "grade": [{"tool_called": "x"}, {"tokens_under": 5}]}]}
    )
    assert not e.is_valid({"cases": [{"turns": ["hi"], "grade": [{"tool_caled": "x"}]}]})
    assert not e.is_valid({"cases": [{"turns": [], "grade": [{"no_errors": True}]}]})


def test_the_schema_agrees_with_the_parser_on_fakes() -> None:
    from harness.testing.spec import parse

    v = jsonschema_rs.validator_for(schema_of_tests())
    good = {
        "include": [".git", ".venv"],
        "real": ["exec"],
        "fakes": {"http": [{"url": "https://a.example/*", "method": "GET", "json": {"a": 1}}]},
        "cases": [
            {
                "call": "t",
                "fakes": {"exec": [{"program": "git", "args": ["diff", "**"], "stdout": "x"}]},
            }
        ],
    }
    assert v.is_valid(good), [e.message for e in v.iter_errors(good)]
    assert not parse("---\n" + json.dumps(good) + "\n---\n", "t.md").problems
    for bad in (
        {"fakes": {"exec": [{"program": "git", "stdot": "x"}]}},
        {"fakes": {"exec": [{"args": ["x"]}]}},
        {"fakes": {"http": [{"url": "https://a.example/", "method": "FETCH"}]}},
        {"fakes": {"ftp": []}},
        {"real": ["disk"]},
    ):
        data = {**bad, "cases": [{"call": "t"}]}
        assert not v.is_valid(data), bad
        assert parse("---\n" + json.dumps(data) + "\n---\n", "t.md").problems, bad
