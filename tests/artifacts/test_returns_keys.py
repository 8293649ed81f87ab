"""validate checks the keys of ``returns`` as it checks parameters (issue 14, item 3)."""

from __future__ import annotations

from pathlib import Path

import harness
from harness.artifacts.export import mcp_output_schema
from harness.starter import files as starter_files
from harness.validation import check_project


def problems(root: Path, tool: str) -> list[tuple[int, int, str, str, str]]:
    (root / ".harness" / "tools").mkdir(parents=True, exist_ok=True)
    (root / ".harness" / "tools" / "t.md").write_text(tool)
    project = check_project(root)
    return [(p.line, p.column, p.severity, p.code, p.message) for p in project.problems]


TRAP = """---
returns:
  type: object
  properties:
    content: {type: string, description: The selected lines, joined with newlines.}
script: |
  def run(args):
      return {"content": ""}
---
A tool whose returns schema fell into the flow-mapping comma trap.
"""


def test_a_comma_inside_a_flow_mapping_is_explained(tmp_path: Path) -> None:
    found = problems(tmp_path, TRAP)
    assert found == [
        (
            5,
            62,
            "warning",
            "schema-flow-comma",
            'tool "t" returns at $.properties.content: "joined with newlines." looks '
            "like a piece of a sentence, not a keyword: inside a YAML flow mapping "
            "{...} an unquoted comma ends the value and the rest of the text becomes "
            'keys with no value (so "description" is only "The selected lines"); '
            'quote the text ("...") or write the mapping in block style, one key per '
            "line",
        )
    ]


def test_unknown_keys_in_returns_get_a_did_you_mean(tmp_path: Path) -> None:
    tool = """---
returns:
  type: object
  propertys: {}
  properties:
    items:
      type: array
      items: {type: string, descrption: one entry}
script: |
  def run(args):
      return {"items": []}
---
A tool.
"""
    found = problems(tmp_path, tool)
    assert [(line, code, message) for line, _, _, code, message in found] == [
        (
            4,
            "returns-unknown-key",
            'tool "t" returns has unknown key "propertys" (did you mean '
            '"properties"?); it is passed through to the JSON Schema but no validator uses it',
        ),
        (
            8,
            "returns-unknown-key",
            'tool "t" returns at $.properties.items.items has unknown key '
            '"descrption" (did you mean "description"?); it is passed through to the JSON Schema '
            "but no validator uses it",
        ),
    ]


def test_nested_parameter_schemas_are_checked_too(tmp_path: Path) -> None:
    tool = """---
parameters:
  options:
    type: object
    properties:
      depth: {type: integer, minimun: 1}
      note: {type: string, description: Free text, for people.}
script: |
  def run(args):
      return 1
---
A tool.
"""
    found = problems(tmp_path, tool)
    assert [(line, code) for line, _, _, code, _ in found] == [
        (6, "parameter-unknown-key"),
        (7, "schema-flow-comma"),
    ]
    assert found[0][4] == (
        'tool "t" parameter "options" at $.properties.depth has unknown key '
        '"minimun" (did you mean "minimum"?); it is passed through to the '
        "JSON Schema but no validator uses it"
    )
    assert found[1][4].startswith(
        'tool "t" parameter "options" at $.properties.note: "for '
        'people." looks like a piece of a sentence'
    )


def test_the_starter_pack_validates_without_a_warning(tmp_path: Path) -> None:
    for rel, text in starter_files().items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    project = check_project(tmp_path)
    assert [p.render() for p in project.problems] == []
    with harness.load(tmp_path) as h:
        schema = mcp_output_schema(h.project.tools["read_file"].returns)
    assert schema is not None
    content = schema["properties"]["content"]
    assert content == {
        "type": "string",
        "description": "The selected lines, joined with newlines, without line numbers.",
    }


def test_the_repositorys_own_tools_validate_without_a_warning() -> None:
    root = Path(__file__).resolve().parents[2]
    project = check_project(root)
    assert [p.render() for p in project.problems] == []
