"""Nested objects the JSON Schema way (issue 25 item 3): ``required: [..]`` lists at any
depth, ``required: true`` as the flat shorthand on every property, an error for a list
naming a key that is not a property; the same schema in validate, at call time and in
every export format."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import harness
from harness.artifacts.export import definition, strict_incompatibilities
from harness.artifacts.params import build
from harness.validation import check_project

ISSUE = """
---
parameters:
  issue:
    type: object
    required: [title, body]
    properties:
      title: {type: string}
      body: {type: string}
      labels:
        type: array
        items:
          type: object
          properties:
            name: {type: string, required: true}
            color: {type: string}
  author:
    type: object
    required: true
    properties:
      login: {type: string, required: true}
      profile:
        type: object
        required: [url]
        properties:
          url: {type: string}
          bio: {type: string, required: false}
script: |
  def run(args):
      return args
---
File an issue.
"""


def _build(raw: object) -> tuple[Any, ...]:
    return build(raw, owner='tool "t"', path="t.md", pos=lambda p: (1, 1))


def _project(root: Path, text: str, name: str = "file_issue") -> Path:
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / "harness.md").write_text("---\nruntime: {isolation: inprocess}\n---\n")
    (root / ".harness" / "tools" / f"{name}.md").write_text(textwrap.dedent(text).lstrip())
    return root


def _issue_schema(tmp_path: Path) -> dict[str, Any]:
    project = check_project(_project(tmp_path, ISSUE))
    assert [p.render() for p in project.problems] == []
    return dict(project.tools["file_issue"].input_schema)


def test_lists_and_the_shorthand_become_json_schema_at_every_depth(tmp_path: Path) -> None:
    schema = _issue_schema(tmp_path)
    assert schema["required"] == ["author"]  # a list does not make "issue" itself required
    issue = schema["properties"]["issue"]
    assert issue["required"] == ["title", "body"]
    item = issue["properties"]["labels"]["items"]
    assert item["required"] == ["name"]
    assert "required" not in item["properties"]["name"]
    author = schema["properties"]["author"]
    assert author["required"] == ["login"]
    profile = author["properties"]["profile"]
    assert profile["required"] == ["url"]  # `bio: required: false` is dropped
    assert profile["properties"]["bio"] == {"type": "string"}
    jsonschema.Draft202012Validator.check_schema(schema)


def test_list_and_shorthand_merge_without_duplicates() -> None:
    _params, schema, problems = _build(
        {
            "o": {
                "type": "object",
                "required": ["a"],
                "properties": {
                    "a": {"type": "string", "required": True},
                    "b": {"type": "string", "required": True},
                },
            }
        }
    )
    assert problems == []
    assert schema["properties"]["o"]["required"] == ["a", "b"]


@pytest.mark.parametrize(
    ("yaml", "line", "code", "words"),
    [
        (  # a list naming a key that is not a property, at the top
            """
            issue:
              type: object
              required: [title, bodi]
              properties:
                title: {type: string}
                body: {type: string}
            """,
            5,
            "parameter-required-unknown",
            'parameter "issue" required names "bodi", which is not one of its properties '
            '("body", "title") (did you mean "body"?)',
        ),
        (  # ... and two levels down
            """
            issue:
              type: object
              properties:
                meta:
                  type: object
                  required:
                    - owner
                  properties:
                    own: {type: string}
            """,
            9,
            "parameter-required-unknown",
            'parameter "issue" at $.properties.meta required names "owner"',
        ),
        (  # the shorthand where there is no property to mark
            """
            tags:
              type: array
              items: {type: string, required: true}
            """,
            5,
            "parameter-required-invalid",
            "`required: true` only marks a property (an entry under `properties`)",
        ),
        (  # a list on a parameter that is not an object
            """
            name:
              type: string
              required: [x]
            """,
            5,
            "parameter-required-invalid",
            "is string, not an object: a `required` list names keys of an object; "
            "on a property write `required: true`",
        ),
        (  # neither a flag nor a list, one level down
            """
            o:
              type: object
              properties:
                a: {type: string, required: "yes"}
            """,
            6,
            "parameter-required-invalid",
            'required must be a list of property names (or true/false on a property), got "yes"',
        ),
    ],
)
def test_bad_required_is_an_error_at_its_line(
    tmp_path: Path, yaml: str, line: int, code: str, words: str
) -> None:
    params = textwrap.indent(textwrap.dedent(yaml).strip(), "  ")
    text = f"---\nparameters:\n{params}\nscript: |\n  def run(args):\n      return 1\n---\n"
    project = check_project(_project(tmp_path, text, "t"))
    errors = [p for p in project.problems if p.severity == "error"]
    assert len(errors) == 1, [p.render() for p in errors]
    (error,) = errors
    assert (error.path, error.line, error.code) == (".harness/tools/t.md", line, code), (
        error.render()
    )
    assert words in error.message


def test_required_names_of_a_branch_may_be_properties_of_its_object() -> None:
    _p, _s, problems = _build(
        {
            "o": {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
                "allOf": [{"properties": {"c": {"type": "integer"}}}, {"required": ["c"]}],
            },
            "m": {"type": "object", "additionalProperties": True, "required": ["anything"]},
        }
    )
    assert problems == []
    _p, _s, problems = _build(
        {"o": {"type": "object", "properties": {"a": {}}, "anyOf": [{"required": ["z"]}]}}
    )
    assert [p.code for p in problems] == ["parameter-required-unknown"]


# -- at call time -------------------------------------------------------------------------


def test_calls_are_checked_against_nested_required_keys(tmp_path: Path) -> None:
    h = harness.load(_project(tmp_path, ISSUE))
    try:
        ok = h.call(
            "file_issue",
            {
                "issue": {"title": "t", "body": "b", "labels": [{"name": "bug"}]},
                "author": {"login": "ann", "profile": {"url": "u"}},
            },
        )
        assert not ok.is_error, ok.text
        bad = h.call(
            "file_issue",
            {
                "issue": {"title": "t", "labels": [{"color": "red"}]},
                "author": {"login": "ann", "profile": {"bio": "b"}},
            },
        )
        assert bad.is_error
        for line in (
            '$.issue.body: "body" is a required property',
            '$.issue.labels[0].name: "name" is a required property',
            '$.author.profile.url: "url" is a required property',
        ):
            assert line in bad.text, bad.text
        missing = h.call("file_issue", {"issue": {"title": "t", "body": "b"}})
        assert '$.author: "author" is a required property' in missing.text
    finally:
        h.close()


# -- every export format -------------------------------------------------------------------


def test_every_format_carries_the_nested_required_lists(tmp_path: Path) -> None:
    tool = check_project(_project(tmp_path, ISSUE)).tools["file_issue"]
    openai = definition(tool, "openai")["function"]["parameters"]
    anthropic = definition(tool, "anthropic")["input_schema"]
    mcp = definition(tool, "mcp")["inputSchema"]
    for schema in (openai, anthropic, mcp):
        assert schema["properties"]["issue"]["required"] == ["title", "body"]
        assert schema["properties"]["author"]["properties"]["profile"]["required"] == ["url"]
        assert "required" not in json.dumps(schema["properties"]["author"]["properties"]["login"])


def test_openai_strict_requires_every_property_and_makes_optional_ones_nullable(
    tmp_path: Path,
) -> None:
    tool = check_project(_project(tmp_path, ISSUE)).tools["file_issue"]
    out = definition(tool, "openai-strict")["function"]
    assert out["strict"] is True
    schema = out["parameters"]
    issue = schema["properties"]["issue"]
    assert issue["required"] == ["title", "body", "labels"]
    assert issue["properties"]["title"] == {"type": "string"}
    assert issue["properties"]["labels"]["type"] == ["array", "null"]
    item = issue["properties"]["labels"]["items"]
    assert item["required"] == ["name", "color"]
    assert item["properties"]["name"] == {"type": "string"}
    assert item["properties"]["color"] == {"type": ["string", "null"]}
    profile = schema["properties"]["author"]["properties"]["profile"]
    assert profile["properties"]["url"] == {"type": "string"}
    assert profile["properties"]["bio"] == {"type": ["string", "null"]}
    assert schema["properties"]["issue"]["additionalProperties"] is False


ALL_OF = {
    "type": "object",
    "properties": {
        "o": {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "allOf": [
                {"properties": {"b": {"type": "integer", "minimum": 1}}, "required": ["b"]},
                {"required": ["a"]},
            ],
        }
    },
    "required": ["o"],
}


def test_openai_strict_keeps_what_allof_says() -> None:
    from harness.artifacts.model import Source, ToolSpec

    tool = ToolSpec(
        name="t", description="d", input_schema=ALL_OF, source=Source(path="t.md", layer="x")
    )
    out = definition(tool, "openai-strict")["function"]
    assert out["strict"] is True
    o = out["parameters"]["properties"]["o"]
    assert "allOf" not in o
    assert o["required"] == ["a", "b"]
    assert o["properties"] == {
        "a": {"type": "string"},
        "b": {"type": "integer", "minimum": 1},
    }
    # The rewrite means what the original does on the values a model may send.
    rewritten = jsonschema.Draft202012Validator(out["parameters"])
    original = jsonschema.Draft202012Validator(ALL_OF)
    for value in ({"o": {"a": "x", "b": 2}}, {"o": {"a": "x", "b": 0}}, {"o": {"a": None, "b": 1}}):
        assert rewritten.is_valid(value) == original.is_valid(value), value


def test_openai_strict_refuses_allof_it_cannot_merge() -> None:
    schema = {
        "type": "object",
        "properties": {"o": {"allOf": [{"type": "string", "maxLength": 3}, {"$ref": "#/$defs/x"}]}},
        "$defs": {"x": {"type": "string"}},
    }
    reasons = strict_incompatibilities(schema)
    assert any('"o"' in r and "allOf" in r for r in reasons), reasons
    conflict = {
        "type": "object",
        "properties": {"o": {"allOf": [{"type": "string"}, {"type": "integer"}]}},
    }
    assert any("allOf" in r for r in strict_incompatibilities(conflict))


def test_the_published_tool_schema_takes_both_spellings() -> None:
    import jsonschema_rs

    from harness.artifacts.frontmatter import split

    schemas = Path(harness.__file__).parent / "schemas"
    editor = jsonschema_rs.validator_for(json.loads((schemas / "tool.schema.json").read_text()))
    data = split(textwrap.dedent(ISSUE).lstrip(), "file_issue.md")[0]
    assert editor.is_valid(data), [e.message for e in editor.iter_errors(data)]
    bad = {"parameters": {"o": {"type": "object", "properties": {"a": {"required": "yes"}}}}}
    assert not editor.is_valid(bad)


def test_strict_nulls_for_left_out_nested_keys_are_dropped(tmp_path: Path) -> None:
    from harness.artifacts.export import strip_strict_nulls

    tool = check_project(_project(tmp_path, ISSUE)).tools["file_issue"]
    sent = {
        "issue": {"title": "t", "body": "b", "labels": [{"name": "x", "color": None}]},
        "author": {"login": "a", "profile": {"url": "u", "bio": None}},
    }
    assert strip_strict_nulls(tool.input_schema, sent) == {
        "issue": {"title": "t", "body": "b", "labels": [{"name": "x"}]},
        "author": {"login": "a", "profile": {"url": "u"}},
    }
    # A required key sent as null stays, and validation says so.
    kept = strip_strict_nulls(tool.input_schema, {"issue": {"title": None, "body": "b"}})
    assert kept == {"issue": {"title": None, "body": "b"}}
