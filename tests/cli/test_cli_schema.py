"""`harness schema` end to end on real fixture projects (CliRunner)."""

from __future__ import annotations

import json

import jsonschema
import mcp.types
import pytest
from click.testing import CliRunner

from harness.cli.main import cli

READ_FILE_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File to read, relative to the workspace"},
        "limit": {
            "type": "integer",
            "description": "Maximum number of bytes",
            "minimum": 1,
            "default": 65536,
        },
    },
    "required": ["path"],
}
READ_FILE_DESC = "Read a text file from the workspace.\n\nReturns the file content as a string."


def schema(runner: CliRunner, *args: str):
    r = runner.invoke(cli, ["schema", "--root", "valid", *args])
    return r, (json.loads(r.stdout) if r.exit_code == 0 else None)


def test_all_tools_openai_default(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r, data = schema(runner)
    assert r.exit_code == 0, r.output
    # enabled, not deferred, sorted by name; dots replaced for OpenAI
    assert [d["function"]["name"] for d in data] == ["git_status", "read_file"]
    assert data[1] == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": READ_FILE_DESC,
            "parameters": READ_FILE_SCHEMA,
        },
    }
    assert r.stdout == json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def test_one_tool_anthropic(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r, data = schema(runner, "read_file", "--format", "anthropic")
    assert r.exit_code == 0, r.output
    assert data == {
        "name": "read_file",
        "description": READ_FILE_DESC,
        "input_schema": READ_FILE_SCHEMA,
    }


def test_one_tool_openai_strict(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r, data = schema(runner, "read_file", "--format", "openai-strict")
    assert r.exit_code == 0, r.output
    assert data == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": READ_FILE_DESC,
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "File to read, relative to the workspace",
                    },
                    "limit": {
                        "type": ["integer", "null"],
                        "description": "Maximum number of bytes (default: 65536)",
                        "minimum": 1,
                    },
                },
                "required": ["path", "limit"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
    jsonschema.Draft202012Validator.check_schema(data["function"]["parameters"])


def test_mcp_keeps_dotted_name_and_maps_annotations(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r, data = schema(runner, "--format", "mcp")
    assert r.exit_code == 0, r.output
    assert [d["name"] for d in data] == ["git.status", "read_file"]
    git = data[0]
    assert git == {
        "name": "git.status",
        "description": "Show the working tree status.",
        "inputSchema": {
            "type": "object",
            "properties": {"short": {"type": "boolean"}},
            "required": [],
        },
        "outputSchema": {
            "type": "object",
            "properties": {"clean": {"type": "boolean"}, "output": {"type": "string"}},
        },
        "annotations": {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    }
    assert data[1]["title"] == "Read a file"
    assert data[1]["annotations"] == {"title": "Read a file", "readOnlyHint": True}
    for d in data:
        mcp.types.Tool.model_validate(d)


def test_tool_by_provider_name_and_deferred_tool_by_name(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r, data = schema(runner, "git_status")
    assert r.exit_code == 0 and data["function"]["name"] == "git_status"
    r, data = schema(runner, "search_docs", "--format", "anthropic")
    assert r.exit_code == 0 and data["name"] == "search_docs"


def test_unknown_tool_exit_1_with_suggestion(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r, _ = schema(runner, "read_fil")
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr == (
        'Error: unknown tool "read_fil"; available: git.status, old_tool, read_file, '
        'search_docs; did you mean "read_file"?\n'
    )
    r, _ = schema(runner, "zzz")
    assert r.exit_code == 1
    assert r.stderr == (
        'Error: unknown tool "zzz"; available: git.status, old_tool, read_file, search_docs\n'
    )


def test_disabled_tool_exit_1(runner: CliRunner, project_copy) -> None:
    project_copy("valid")
    r, _ = schema(runner, "old_tool")
    assert r.exit_code == 1
    assert r.stderr == (
        'Error: tool "old_tool" is disabled (enabled: false in .harness/tools/old_tool.md); '
        "disabled tools are never exported\n"
    )


@pytest.mark.parametrize("fmt", ["gemini", "OPENAI"])
def test_bad_format_is_usage_error(runner: CliRunner, project_copy, fmt: str) -> None:
    project_copy("valid")
    r, _ = schema(runner, "--format", fmt)
    assert r.exit_code == 2
    assert "Invalid value for '--format'" in r.stderr


def test_broken_project_exit_2(runner: CliRunner, project_copy) -> None:
    project_copy("broken")
    r = runner.invoke(cli, ["schema", "--root", "broken"])
    assert r.exit_code == 2
    assert r.stdout == ""
    assert "parse tool nodelim.md: missing --- frontmatter delimiter on line 1" in r.stderr


def test_name_collision_after_dot_replacement_exit_2(
    runner: CliRunner, tmp_path, monkeypatch
) -> None:
    tools = tmp_path / ".harness" / "tools"
    tools.mkdir(parents=True)
    body = "---\nscript: |\n  def run(args):\n      return 1\n---\nX.\n"
    (tools / "a.b.md").write_text(body)
    (tools / "a_b.md").write_text(body)
    monkeypatch.chdir(tmp_path)
    for fmt in ("openai", "mcp"):  # validate refuses the collision, whatever the format
        r = runner.invoke(cli, ["schema", "--format", fmt])
        assert r.exit_code == 2
        assert r.stdout == ""
        assert 'both export as "a_b"' in r.stderr


def test_harness_errors_map_to_their_exit_code(
    runner: CliRunner, project_copy, monkeypatch
) -> None:
    """One boundary: a LoadError raised inside a command prints its errors and exits 2."""
    from harness.artifacts.model import Problem
    from harness.cli import schema_cmd
    from harness.errors import LoadError

    def boom(root):
        raise LoadError(
            [
                Problem(path="a.md", line=3, column=2, code="x-bad", message="bad thing"),
                Problem(path="b.md", severity="warning", code="x-warn", message="meh"),
            ]
        )

    monkeypatch.setattr(schema_cmd, "load_or_exit", boom)
    project_copy("valid")
    r = runner.invoke(cli, ["schema", "--root", "valid"])
    assert (r.exit_code, r.stdout, r.stderr) == (2, "", "a.md:3:2: error: bad thing [x-bad]\n")
