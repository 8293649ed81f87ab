"""docs/cli.md documents every command and option; ``--arg`` typing (issue 14, item 4)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from harness.cli.main import cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def sections() -> dict[str, tuple[str, str]]:
    """command name -> (heading, section text) of each "## `harness NAME ..." section."""
    text = DOC.read_text(encoding="utf-8")
    out: dict[str, tuple[str, str]] = {}
    for part in re.split(r"^(?=## )", text, flags=re.MULTILINE):
        m = re.match(r"## `harness ([a-z-]+)(.*?)`\n", part)
        if m:
            out[m.group(1)] = (m.group(0), part)
    return out


def test_every_command_has_a_section_and_no_section_is_stale() -> None:
    documented = sections()
    assert sorted(documented) == sorted(cli.commands), (
        "docs/cli.md sections and the click commands differ"
    )


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_argument_option_and_choice_is_documented(name: str) -> None:
    heading, body = sections()[name]
    command = cli.commands[name]
    for param in command.params:
        if isinstance(param, click.Argument):
            metavar = param.human_readable_name.upper()
            assert re.search(rf"\b{re.escape(metavar)}\b", heading), (name, metavar)
            continue
        for flag in (*param.opts, *param.secondary_opts):
            assert flag in heading, (name, flag, "missing from the heading")
            assert body.count(flag) >= 1
        if isinstance(param.type, click.Choice):
            for choice in param.type.choices:
                assert re.search(rf"\b{re.escape(str(choice))}\b", body), (name, param.name, choice)
    # Nothing in the heading that the command does not have.
    flags = {
        f
        for p in command.params
        if isinstance(p, click.Option)
        for f in (*p.opts, *p.secondary_opts)
    }
    for flag in re.findall(r"--[a-z][a-z-]*", heading):
        assert flag in flags, (name, flag, "documented but not an option")


def test_the_group_options_are_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    for param in cli.params:
        for flag in param.opts:
            assert flag in text, flag
    assert "--help" in text and "`-h`" in text


# -- --arg typing follows the parameter's schema -----------------------------------

TOOL = """---
parameters:
  msg: {type: string}
  n: {type: integer}
  tags: {type: array, items: {type: string}}
script: |
  def run(args):
      return args
---
Echo.
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".harness" / "tools").mkdir(parents=True)
    (tmp_path / ".harness" / "tools" / "echo.md").write_text(TOOL)
    (tmp_path / "harness.md").write_text("---\nruntime: {isolation: inprocess}\n---\n")
    return tmp_path


def call(project: Path, *args: str) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(
        cli, ["call", "echo", *args, "--root", str(project), "--format", "json"]
    )
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize(
    ("arg", "value"),
    [
        ("msg=hello", "hello"),
        ("msg=42", "42"),
        ('msg="quoted"', "quoted"),  # JSON quotes are not kept literally
        ('msg="a', '"a'),  # not a JSON string: the text as it is
        ("msg=true", "true"),
        ("n=5", 5),
        ('tags=["a","b"]', ["a", "b"]),
        ("other=[1]", [1]),  # undeclared: JSON when it parses
    ],
)
def test_arg_values_are_typed_by_the_schema(project: Path, arg: str, value: object) -> None:
    code, out = call(project, "--arg", arg)
    assert code == 0, out
    key = arg.split("=", 1)[0]
    assert out["value"] == {key: value}


def test_a_string_for_an_integer_is_reported_in_json_wording(project: Path) -> None:
    code, out = call(project, "--arg", "n=five")
    assert code == 1
    assert out["error"] == 'invalid arguments for tool "echo": $.n: "five" is not of type "integer"'


def test_the_help_says_how_values_are_typed() -> None:
    result = CliRunner().invoke(cli, ["call", "--help"], terminal_width=200)
    text = " ".join(result.output.split())
    assert "For a string parameter VALUE is the text itself" in text
    assert "parsed as JSON" in text


def test_json_output_carries_the_notes(project: Path) -> None:
    code, out = call(project, "--arg", "mgs=hi")
    assert code == 0
    assert out["notes"] == [
        'unknown argument "mgs" (did you mean "msg"?) for tool "echo"; its '
        'parameters are "msg", "n", "tags"'
    ]
