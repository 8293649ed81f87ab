"""`harness schema --format openai-strict` for tools strict mode cannot express."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from harness.cli.main import cli

MAP_TOOL = """---
parameters:
  labels:
    type: object
    additionalProperties: {type: string}
    description: Label name to value
  tags:
    type: array
script: |
  def run(args):
      return args
---
Tag things.
"""
ENUM_TOOL = """---
parameters:
  opts:
    type: object
    properties:
      mode: {enum: [fast, slow]}
  pick:
    type: string
    oneOf: [{const: a}, {const: b}]
script: |
  def run(args):
      return args
---
Pick a mode.
"""


def project(tmp_path: Path, monkeypatch) -> Path:
    tools = tmp_path / ".harness" / "tools"
    tools.mkdir(parents=True)
    (tools / "tag.md").write_text(MAP_TOOL)
    (tools / "pick.md").write_text(ENUM_TOOL)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_inexpressible_tool_is_exported_non_strict_with_a_note(
    runner: CliRunner, tmp_path, monkeypatch
) -> None:
    project(tmp_path, monkeypatch)
    r = runner.invoke(cli, ["schema", "--format", "openai-strict"])
    assert r.exit_code == 0, r.output
    by_name = {d["function"]["name"]: d["function"] for d in json.loads(r.stdout)}
    assert by_name["pick"]["strict"] is True
    assert by_name["pick"]["parameters"]["properties"] == {
        "opts": {
            "type": ["object", "null"],
            "properties": {"mode": {"type": ["string", "null"], "enum": ["fast", "slow", None]}},
            "required": ["mode"],
            "additionalProperties": False,
        },
        "pick": {
            "anyOf": [
                {"type": "string", "const": "a"},
                {"type": "string", "const": "b"},
                {"type": "null"},
            ]
        },
    }
    tag = by_name["tag"]
    assert tag["strict"] is False
    assert tag["parameters"] == {
        "type": "object",
        "properties": {
            "labels": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Label name to value",
            },
            "tags": {"type": "array", "items": {}},
        },
        "required": [],
    }
    assert r.stderr == (
        'note: tool "tag" is exported with "strict": false (not expressible in strict mode): '
        '"labels": "additionalProperties" allows extra keys (a map); strict mode only allows '
        'objects with fixed properties; "tags": array without "items"; strict mode needs a '
        "typed item schema\n"
    )


def test_note_for_one_tool_and_none_for_other_formats(
    runner: CliRunner, tmp_path, monkeypatch
) -> None:
    project(tmp_path, monkeypatch)
    r = runner.invoke(cli, ["schema", "tag", "--format", "openai-strict"])
    assert r.exit_code == 0
    assert json.loads(r.stdout)["function"]["strict"] is False
    assert r.stderr.startswith('note: tool "tag" is exported with "strict": false')
    r = runner.invoke(cli, ["schema", "pick", "--format", "openai-strict"])
    assert (r.exit_code, r.stderr) == (0, "")
    for fmt in ("openai", "anthropic", "mcp"):
        r = runner.invoke(cli, ["schema", "--format", fmt])
        assert (r.exit_code, r.stderr) == (0, "")
