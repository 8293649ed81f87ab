"""ai-harness bundles, inline hooks, parameter types, events and model blocks (COMPAT §1, §4)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from compat_samples import write

import harness
from harness.errors import LoadError

Make = Callable[..., harness.Harness]

BUNDLE = """
---
tools:
  - name: get_time
    description: The time
    parameters:
      count: {type: int, description: "How many", required: true}
      loud: {type: bool}
    script: |
      def run(args):
          log("get_time called")
          return {"count": args["count"], "loud": args.get("loud", False)}
hooks:
  - handler: audit_calls
    event: tool.pre
    priority: 5
    script: |
      def handle(event, payload):
          log("tool.pre for " + payload["name"])
          if payload.get("args", {}).get("count", 0) > 10:
              return block("too many")
          return allow()
---
A plugin bundle as ai-harness users write them.
"""


def problems(root: Path) -> list[tuple[str, int, str, str]]:
    return [(p.path, p.line, p.code, p.severity) for p in harness.check(root)]


def test_bundle_hooks_keyed_by_handler_load_and_run(origin: Make) -> None:
    h = origin({".harness/plugins/core.md": BUNDLE})
    assert [x.name for x in h.hooks] == ["audit_calls"]
    assert h.call("get_time", {"count": 3}).value == {"count": 3, "loud": False}
    r = h.call("get_time", {"count": 11})
    assert r.blocked_by == "audit_calls" and r.error == 'blocked by hook "audit_calls": too many'


def test_int_and_bool_load_as_integer_and_boolean_with_a_warning(tmp_path: Path) -> None:
    root = write(tmp_path, {".harness/plugins/core.md": BUNDLE})
    found = problems(root)
    assert (".harness/plugins/core.md", 6, "parameter-type-alias", "warning") in found
    assert (".harness/plugins/core.md", 7, "parameter-type-alias", "warning") in found
    assert not [p for p in found if p[3] == "error"]
    with harness.load(root) as h:
        schema = h.tools["get_time"].input_schema
        assert schema["properties"]["count"]["type"] == "integer"
        assert schema["properties"]["loud"]["type"] == "boolean"
        assert h.call("get_time", {"count": "3"}).is_error  # validated as an integer


def test_inline_hooks_keyed_by_handler(origin: Make) -> None:
    h = origin(
        {
            "harness.md": """
        ---
        runtime: {isolation: inprocess}
        hooks:
          - handler: no_rm
            event: tool.pre
            script: |
              def handle(event, payload):
                  if "rm" in payload.get("args", {}).get("command", ""):
                      return block("no rm")
                  return None
        tools:
          - name: sh
            parameters:
              command: {type: string, required: true}
            script: |
              def run(args):
                  return args["command"]
        ---
        Agent.
        """
        }
    )
    assert h.call("sh", {"command": "rm -rf x"}).blocked_by == "no_rm"


def test_a_nameless_bundle_entry_still_reports_its_other_problems(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            ".harness/plugins/p.md": """
        ---
        hooks:
          - event: tool.prre
            priority: high
            script: |
              def handle(event, payload):
                  return None
        ---
        p
        """
        },
    )
    codes = {p[2] for p in problems(root)}
    assert {"entry-name-missing", "event-unknown", "field-type"} <= codes


def test_handler_and_name_disagreeing_is_an_error(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            ".harness/plugins/p.md": """
        ---
        hooks:
          - name: a
            handler: b
            event: tool.pre
            script: |
              def handle(event, payload):
                  return None
        ---
        p
        """
        },
    )
    assert (".harness/plugins/p.md", 4, "entry-name-conflict", "error") in problems(root)


@pytest.mark.parametrize(
    "event",
    [
        "meta.register_tool",
        "turn.start",
        "turn.end",
        "completion.pre",
        "completion.post",
        "agent.stop",
        "error",
    ],
)
def test_ai_harness_event_names_validate(tmp_path: Path, event: str) -> None:
    root = write(
        tmp_path,
        {
            ".harness/hooks/h.md": f"""
        ---
        event: {event}
        script: |
          def handle(event, payload):
              return None
        ---
        h
        """
        },
    )
    assert not [p for p in problems(root) if p[3] == "error"]


@pytest.mark.parametrize("event", ["meta.register_hook", "meta.call_tool", "meta.register_agent"])
def test_meta_events_harness_never_fires_are_errors(tmp_path: Path, event: str) -> None:
    """ai-harness fires these; harness does not, so such a hook would never run (issue 23)."""
    root = write(
        tmp_path,
        {
            ".harness/hooks/h.md": f"""
        ---
        event: {event}
        script: |
          def handle(event, payload):
              return block("never")
        ---
        h
        """
        },
    )
    assert (".harness/hooks/h.md", 2, "event-never-fired", "error") in problems(root)


def test_delegation_events_are_unsupported_not_unknown(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            ".harness/hooks/h.md": """
        ---
        event: delegation.post_verify
        script: |
          def handle(event, payload):
              return None
        ---
        h
        """
        },
    )
    found = [p for p in harness.check(root) if p.code.startswith("event-")]
    assert [p.code for p in found] == ["event-unsupported"]
    assert "sub-agent" in found[0].message and "never fire" in found[0].message


def test_meta_register_tool_hooks_fire_on_tool_registration(origin: Make) -> None:
    h = origin(
        {
            "harness.md": "---\nruntime: {isolation: inprocess}\nmeta: {enabled: true}\n---\n",
            ".harness/hooks/meta_tool_guard.md": """
        ---
        event: meta.register_tool
        script: |
          def handle(event, payload):
              if payload["name"].startswith("evil") or payload.get("replace"):
                  return block("not allowed: " + payload["name"])
              return allow()
        ---
        Guard meta registrations.
        """,
            ".harness/tools/maker.md": """
        ---
        parameters:
          name: {type: string, required: true}
        script: |
          def run(args):
              return meta.tool_register(args["name"], "made", {}, "def run(a):\\n    return 1\\n")
        ---
        Make a tool.
        """,
        }
    )
    assert h.call("maker", {"name": "good"}).value == {"name": "good", "registered": True}
    r = h.call("maker", {"name": "evil_one"})
    assert r.is_error and 'blocked by hook "meta_tool_guard": not allowed: evil_one' in r.text


def test_copilot_provider_does_not_stop_list_schema_or_call(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from harness.cli.main import cli

    root = write(
        tmp_path,
        {
            "harness.md": """
        ---
        runtime: {isolation: inprocess}
        model:
          provider: copilot
          name: gpt-4o
          max_tokens: -5
        ---
        Agent.
        """,
            ".harness/tools/hi.md": "---\nscript: |\n  def run(args):\n      return 'hi'\n---\n"
            "Say hi.\n",
        },
    )
    found = harness.check(root)
    bad = [p for p in found if p.code == "model-invalid"]
    assert [p.severity for p in bad] == ["warning"]
    assert "max_tokens" in bad[0].message and "harness run refuses" in bad[0].message
    runner = CliRunner()
    for args in (["list"], ["schema"], ["call", "hi"], ["validate"]):
        res = runner.invoke(
            cli,
            [*args, "--root", str(root)]
            if args[0] != "call"
            else ["call", "hi", "--root", str(root)],
        )
        assert res.exit_code == 0, (args, res.output)
    res = runner.invoke(cli, ["run", "hello", "--root", str(root)])
    assert res.exit_code == 2 and "model block of harness.md is invalid" in res.output


def test_copilot_resolves_to_its_base_url_and_github_token() -> None:
    from harness.agent import resolve_settings
    from harness.config import ModelConfig

    s = resolve_settings(
        ModelConfig(provider="copilot", name="gpt-4o"), environ={"GITHUB_TOKEN": "ghp-test"}
    )
    assert (s.base_url, s.api_key_env, s.api_key) == (
        "https://api.githubcopilot.com",
        "GITHUB_TOKEN",
        "ghp-test",
    )


def test_load_refuses_a_project_with_real_errors_still(tmp_path: Path) -> None:
    root = write(tmp_path, {".harness/hooks/h.md": "---\nevent: tool.pre\n---\nh\n"})
    with pytest.raises(LoadError):
        harness.load(root)


def test_unsupported_ai_harness_artifacts_are_reported(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            ".harness/agents/reviewer.md": "---\ndescription: Reviews\n---\nYou review code.\n",
            ".harness/models/openai-models.md": "---\ntype: model\nmodels: []\n---\n",
            ".harness/compaction/default.md": "---\ntype: compaction\n---\nKeep it short.\n",
            ".harness/identity.md": "---\ntype: harness\n---\nYou are Ada.\n",
            ".harness/context/style.md": "Be terse.\n",
            ".harness/team.md": "---\ntype: plugin\n---\nContext for the team.\n",
        },
    )
    found = {p.path: p for p in harness.check(root) if p.code == "artifact-unsupported"}
    assert sorted(found) == [
        ".harness/agents/",
        ".harness/compaction/",
        ".harness/context/",
        ".harness/identity.md",
        ".harness/models/",
        ".harness/team.md",
    ]
    assert all(
        p.severity == "warning" and "harness does not read it" in p.message for p in found.values()
    )
    assert "sub-agent" in found[".harness/agents/"].message


def test_fenced_yaml_tools_in_a_body_are_reported(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "harness.md": """
        ---
        runtime: {isolation: inprocess}
        ---
        You are an agent.

        ```yaml
        tools:
          - name: forgotten
        hooks: []
        ```
        """,
            ".harness/plugins/p.md": "---\ntools: []\n---\n```yaml\ntools:\n- name: x\n```\n",
        },
    )
    found = [(p.path, p.line) for p in harness.check(root) if p.code == "body-yaml-ignored"]
    assert found == [("harness.md", 7), ("harness.md", 9)]  # the bundle has tools: already


def test_reading_a_key_the_event_never_carries_is_reported(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            ".harness/hooks/h.md": """
        ---
        event: tool.post
        script: |
          def handle(event, payload):
              cmd = payload.get("args", {}).get("command", "")
              return None
        ---
        h
        """,
            ".harness/hooks/ok.md": """
        ---
        event: tool.pre
        script: |
          def handle(event, payload):
              return None if payload.get("args") else block("no args")
        ---
        ok
        """,
        },
    )
    found = [
        (p.path, p.line, p.severity) for p in harness.check(root) if p.code == "payload-key-unknown"
    ]
    assert found == [(".harness/hooks/h.md", 5, "error")]


def test_list_and_schema_apply_tools_policy_and_the_call_checks(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from harness.cli.main import cli

    root = write(
        tmp_path,
        {
            "harness.md": """
        ---
        runtime: {isolation: inprocess}
        tools_policy: {deny: ["secret_*"]}
        ---
        Agent.
        """,
            ".harness/tools/secret_dump.md": "---\nscript: |\n  def run(args):\n      return 1\n"
            "---\nDump secrets.\n",
            ".harness/tools/read_file.md": "---\nscript: |\n  def run(args):\n      return 1\n---\n"
            "# read_file\n\nRead a file from disk.\n",
        },
    )
    runner = CliRunner()
    listed = runner.invoke(cli, ["list", "--root", str(root)])
    assert listed.exit_code == 0 and "secret_dump" not in listed.output
    assert "read_file  Read a file from disk." in listed.output
    schema = runner.invoke(cli, ["schema", "--root", str(root)])
    assert [d["function"]["name"] for d in json.loads(schema.output)] == ["read_file"]
    one = runner.invoke(cli, ["schema", "secret_dump", "--root", str(root)])
    assert one.exit_code == 1
    # a script error harness call refuses (exit 2) now stops list and schema too
    (root / ".harness/tools/broken.md").write_text(
        "---\nscript: |\n  def run(args):\n      return fs.reed('x')\n---\nBroken.\n"
    )
    for args in (["list"], ["schema"], ["call", "read_file"]):
        res = runner.invoke(cli, [*args, "--root", str(root)])
        assert res.exit_code == 2, (args, res.output)
        assert "fs.reed" in res.output


def test_the_published_bundle_schema_accepts_handler_entries() -> None:
    import json

    import jsonschema
    import yaml

    from harness.artifacts.published import frontmatter_schema

    front = yaml.safe_load(BUNDLE.split("---")[1])
    front["tools"] = []  # `type: int` stays outside the editor schema (a warning here)
    jsonschema.Draft202012Validator(frontmatter_schema("bundle")).validate(front)
    del front["hooks"][0]["handler"]
    errors = list(
        jsonschema.Draft202012Validator(
            json.loads(json.dumps(frontmatter_schema("bundle")))
        ).iter_errors(front)
    )
    assert errors  # neither name nor handler
