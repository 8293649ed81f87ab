"""Arguments before tool.pre: defaults, unknown names, JSON wording (issue 14, item 2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from core_samples import write_project

import harness
from harness.validation import check_project

MakeHarness = Callable[..., harness.Harness]

TAGGED = """
---
parameters:
  name: {type: string, required: true}
  tag: {type: string, default: latest}
  limit: {type: integer, default: 200}
  labels: {type: array, items: {type: string}, default: [a, b]}
  options:
    type: object
    properties:
      depth: {type: integer, default: 3}
      mode: {type: string}
script: |
  def run(args):
      return {"tag": args["tag"], "limit": args["limit"], "labels": args["labels"],
              "options": args.get("options"), "keys": sorted(args.keys())}
---
A tool with defaults.
"""
SEES_TAG = """
---
event: tool.pre
script: |
  def handle(event, payload):
      if payload["arguments"]["tag"] != "latest":
          return block("hook saw tag " + payload["arguments"]["tag"])
      return allow()
---
Blocks unless the hook sees the default tag.
"""


def test_defaults_are_filled_before_the_hooks_and_the_script(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"tagged": TAGGED}, hooks={"sees_tag": SEES_TAG})
    r = h.call("tagged", {"name": "x"})
    assert not r.is_error, r
    assert r.value["tag"] == "latest" and r.value["limit"] == 200
    assert r.value["labels"] == ["a", "b"]
    assert r.value["options"] is None  # no object given: nothing to fill inside
    assert r.notes == ()
    # A given value wins; inside a given object, missing properties get their default.
    r = h.call("tagged", {"name": "x", "limit": 5, "options": {"mode": "m"}})
    assert r.value["limit"] == 5 and r.value["options"] == {"mode": "m", "depth": 3}
    assert h.call("tagged", {"name": "x", "tag": "v1"}).blocked_by == "sees_tag"


def test_a_default_is_never_shared_between_calls(make_harness: MakeHarness) -> None:
    no_script = TAGGED[: TAGGED.index("script: |")] + "---\nA tool bound to Python.\n"
    h = make_harness(tools={"tagged": no_script})

    def grab(args: dict[str, object]) -> object:
        labels = args["labels"]
        assert isinstance(labels, list)
        labels.append("mutated")  # a handler changing its argument in place
        return labels

    h.bind("tagged", grab)
    assert h.call("tagged", {"name": "x"}).value == ["a", "b", "mutated"]
    assert h.call("tagged", {"name": "x"}).value == ["a", "b", "mutated"]
    assert h.call("tagged", {"name": "x"}).value == ["a", "b", "mutated"]


def test_unknown_names_run_and_say_what_was_meant(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"tagged": TAGGED})
    r = h.call("tagged", {"name": "x", "limt": 3})
    assert not r.is_error, r
    assert r.value["limit"] == 200  # the misspelt value had no effect
    note = (
        'unknown argument "limt" (did you mean "limit"?) for tool "tagged"; its '
        'parameters are "labels", "limit", "name", "options", "tag"'
    )
    assert r.notes == (note,)
    assert r.text.endswith(f"\n[note: {note}]")


def test_an_unknown_name_is_named_when_a_required_one_is_missing(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"tagged": TAGGED})
    r = h.call("tagged", {"nmae": "x"})
    assert r.is_error
    assert r.error == 'invalid arguments for tool "tagged": $.name: "name" is a required property'
    assert r.notes and '"nmae" (did you mean "name"?)' in r.notes[0]
    assert r.text.endswith("]") and '"nmae" (did you mean "name"?)' in r.text


@pytest.mark.parametrize("where", ["project", "tool"])
def test_strict_refuses_unknown_names(tmp_path: Path, where: str) -> None:
    tool = (
        TAGGED.replace("parameters:", "arguments: strict\nparameters:", 1)
        if where == "tool"
        else TAGGED
    )
    write_project(
        tmp_path, tools={"tagged": tool}, config="arguments: strict\n" if where == "project" else ""
    )
    with harness.load(tmp_path) as h:
        assert h.project.ok, h.project.problems
        r = h.call("tagged", {"name": "x", "limt": 3})
        assert r.is_error and r.value is None
        assert r.error == (
            'invalid arguments for tool "tagged": unknown argument "limt" (did '
            'you mean "limit"?) for tool "tagged"; its parameters are "labels", '
            '"limit", "name", "options", "tag" (`arguments: strict` refuses '
            "undeclared names)"
        )
        assert not h.call("tagged", {"name": "x"}).is_error


def test_a_tool_can_relax_a_strict_project(tmp_path: Path) -> None:
    tool = TAGGED.replace("parameters:", "arguments: note\nparameters:", 1)
    write_project(tmp_path, tools={"tagged": tool}, config="arguments: strict\n")
    with harness.load(tmp_path) as h:
        r = h.call("tagged", {"name": "x", "limt": 3})
        assert not r.is_error and r.notes


def test_a_bad_arguments_setting_is_a_validate_problem(tmp_path: Path) -> None:
    tool = TAGGED.replace("parameters:", "arguments: strikt\nparameters:", 1)
    write_project(tmp_path, tools={"tagged": tool}, config="arguments: lax\n")
    project = check_project(tmp_path)
    messages = [p.message for p in project.problems if p.severity == "error"]
    assert 'config arguments must be one of note, strict; got "lax"' in messages
    assert (
        'tool "tagged" arguments must be one of note, strict; got "strikt" (did you mean '
        '"strict"?)' in messages
    )


def test_a_python_tool_with_kwargs_has_no_unknown_names(make_harness: MakeHarness) -> None:
    h = make_harness()

    @h.tool
    def anything(a: int = 1, **kwargs: object) -> object:
        """Takes any keyword."""
        return {"a": a, "more": sorted(kwargs)}

    @h.tool
    def closed(a: int = 1) -> object:
        """Takes only a."""
        return a

    r = h.call("anything", {"x": 1})
    assert r.value == {"a": 1, "more": ["x"]} and r.notes == ()
    r = h.call("closed", {"b": 1})
    assert r.value == 1 and r.notes and '"b"' in r.notes[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"name": None}, '$.name: null is not of type "string"'),
        ({"name": "x", "limit": "5"}, '$.limit: "5" is not of type "integer"'),
        ({"name": "x", "limit": True}, '$.limit: true is not of type "integer"'),
        ({"name": "x", "labels": [1]}, '$.labels[0]: 1 is not of type "string"'),
        ({"name": "x", "options": {"depth": 1.5}}, '$.options.depth: 1.5 is not of type "integer"'),
    ],
)
def test_validation_messages_use_json_wording(
    make_harness: MakeHarness, args: dict[str, object], message: str
) -> None:
    h = make_harness(tools={"tagged": TAGGED})
    r = h.call("tagged", args)
    assert r.is_error
    assert r.error == f'invalid arguments for tool "tagged": {message}'


def test_json_wording_of_other_keywords(make_harness: MakeHarness) -> None:
    tool = """
    ---
    parameters:
      mode: {type: string, enum: [fast, slow]}
      n: {type: integer, minimum: 1, maximum: 9}
      word: {type: string, pattern: "^[a-z]+$", maxLength: 4}
    script: |
      def run(args):
          return "ok"
    ---
    Checks.
    """
    h = make_harness(tools={"checked": tool})
    err = h.call("checked", {"mode": "quick", "n": 0, "word": "ABCDEF"}).error
    assert err == (
        'invalid arguments for tool "checked": $.mode: "quick" is not one of '
        '["fast", "slow"]; $.n: 0 is less than the minimum of 1; '
        '$.word: "ABCDEF" does not match "^[a-z]+$"; $.word: "ABCDEF" is too long'
    )
