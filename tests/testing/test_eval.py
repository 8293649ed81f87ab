"""``harness eval`` against the fake model servers of tests/agent."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_harness_test import project

from harness.cli.main import cli
from harness.testing import FakeModelServer, Reply, ToolUse

EVALS = """\
    ---
    cases:
      - name: deploys to staging
        turns: ["Deploy to staging please"]
        grade:
          - tool_called: deploy
          - tool_not_called: save
          - hook_not_blocked: prod_guard
          - response_contains: Deployed
          - no_errors: true
          - completed_within: 2
          - tokens_under: 1000
      - name: refuses prod
        turns: ["Deploy to prod"]
        grade:
          - hook_blocked: prod_guard
          - response_not_contains: deployed to prod
          - tokens_under: 5
    ---
    """


def write_evals(root: Path, text: str = EVALS) -> None:
    folder = root / ".harness" / "evals"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "deploy.md").write_text(textwrap.dedent(text))


def invoke(root: Path, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(
        cli, ["eval", "--root", str(root), "--model", "fake-1", *args], catch_exceptions=False
    )
    return r.exit_code, r.output


# One JSON document per reply: the fake server reports usage there (15 tokens each).
REPLIES = [
    Reply(tools=[ToolUse("deploy", {"target": "staging"})], json=True),
    Reply(text="Deployed.", json=True),
    Reply(tools=[ToolUse("deploy", {"target": "prod"})], json=True),
    Reply(text="I was blocked.", json=True),
]


def test_eval_grades_a_run_through_the_agent_loop(tmp_path: Path) -> None:
    root = project(tmp_path, {})
    write_evals(root)
    with FakeModelServer("openai", list(REPLIES)) as server:
        code, out = invoke(root, "--base-url", server.base_url, "--format", "json")
        assert len(server.requests) == 4
    doc = json.loads(out)
    assert code == 1  # "refuses prod" spends 30 tokens, not under 5
    first, second = doc["cases"]
    assert first["passed"] is True, first
    assert second["passed"] is False
    assert [f["message"] for f in second["failures"]] == [
        "tokens_under: used 30 tokens, not under 5"
    ]
    assert second["failures"][0]["line"] == 18
    assert doc["notes"] == ["tokens used: 60"]


def test_eval_failing_grades_and_junit(tmp_path: Path) -> None:
    root = project(tmp_path, {})
    write_evals(root, EVALS.replace("tool_not_called: save", "tool_not_called: deploy"))
    with FakeModelServer("anthropic", list(REPLIES)) as server:
        code, out = invoke(
            root,
            "--provider",
            "anthropic",
            "--base-url",
            server.base_url,
            "--format",
            "junit",
            "--case",
            "staging",
        )
    assert code == 1
    top = ET.fromstring(out.split("\n", 1)[1])
    failure = top.find("testsuite/testcase/failure")
    assert failure is not None
    assert failure.get("message") == 'tool_not_called: "deploy" was called 1 time(s)'


def test_max_tokens_stops_the_run(tmp_path: Path) -> None:
    root = project(tmp_path, {})
    write_evals(root)
    with FakeModelServer("openai", list(REPLIES)) as server:
        code, out = invoke(root, "--base-url", server.base_url, "--max-tokens", "20")
        assert len(server.requests) == 2  # the second case never reached the model
    assert code == 1
    assert "SKIP .harness/evals/deploy.md:13 refuses prod (token budget of 20 spent)" in out


def test_dry_run_validates_without_a_model(tmp_path: Path) -> None:
    root = project(tmp_path, {})
    write_evals(root)
    code, out = invoke(root, "--dry-run")
    assert code == 0 and "2 evals: 0 passed, 0 failed, 2 skipped" in out
    write_evals(
        root,
        EVALS.replace("tool_called: deploy", "tool_caled: deplyo").replace(
            "hook_blocked: prod_guard", "hook_blocked: prod_gard"
        ),
    )
    code, out = invoke(root, "--dry-run")
    assert code == 2
    assert (
        'deploy.md:6:9: error: case "deploys to staging": unknown grade "tool_caled" '
        '(did you mean "tool_called"?)' in out
    )
    assert 'hook_blocked names unknown hook "prod_gard" (did you mean "prod_guard"?)' in out


def test_turns_continue_one_conversation(tmp_path: Path) -> None:
    root = project(tmp_path, {})
    write_evals(
        root,
        """\
        ---
        cases:
          - name: two turns
            turns: ["Deploy to staging", "Now say what you did"]
            grade:
              - tool_called: deploy
              - response_contains: staging was deployed
        ---
        """,
    )
    replies = [
        Reply(tools=[ToolUse("deploy", {"target": "staging"})]),
        Reply(text="Done."),
        Reply(text="staging was deployed"),
    ]
    for provider in ("openai", "anthropic"):
        with FakeModelServer(provider, list(replies)) as server:
            code, out = invoke(root, "--provider", provider, "--base-url", server.base_url)
            assert code == 0, out
            last = server.requests[-1].body["messages"]
        users = [m for m in last if m["role"] == "user" and isinstance(m["content"], str)]
        assert [m["content"] for m in users] == ["Deploy to staging", "Now say what you did"]
        assert any("deployed staging" in json.dumps(m) for m in last)  # the tool result


def test_no_model_is_a_usage_error(tmp_path: Path) -> None:
    root = project(tmp_path, {})
    write_evals(root)
    r = CliRunner().invoke(cli, ["eval", "--root", str(root)])
    assert r.exit_code == 2
    assert "no model name: set model.name in harness.md or pass --model NAME" in r.output
    r = CliRunner().invoke(
        cli,
        [
            "eval",
            "--root",
            str(root),
            "--model",
            "gpt-x",
            "--base-url",
            "https://models.example.com/v1",
        ],
        env={"OPENAI_API_KEY": ""},
    )
    assert r.exit_code == 2 and 'environment variable "OPENAI_API_KEY" is not set' in r.output


def test_unreachable_model_fails_the_case_not_the_run(tmp_path: Path) -> None:
    root = project(tmp_path, {})
    write_evals(root)
    code, out = invoke(root, "--base-url", "http://127.0.0.1:9/v1")
    assert code == 1
    assert "FAIL .harness/evals/deploy.md:3 deploys to staging" in out
    assert "the agent run failed:" in out


def test_a_bad_config_is_a_usage_error(tmp_path: Path) -> None:
    root = project(tmp_path, {})
    write_evals(
        root,
        EVALS.replace(
            "      - name: refuses prod\n",
            "      - name: refuses prod\n        config: {clock: {fixed: x}}\n",
        ),
    )
    code, out = invoke(root, "--dry-run")
    assert code == 2
    assert (
        'deploy.md:14:5: error: case "refuses prod": config clock.fixed "x" is not an '
        "RFC 3339 time" in out
    )


def test_a_case_that_cannot_run_fails_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.testing.runner import Runner

    real = Runner.harness_for

    def harness_for(self: Runner, setup: object, copy: Path) -> object:
        if getattr(setup, "now", None):
            raise OSError("no space left on device")
        return real(self, setup, copy)  # type: ignore[arg-type]

    monkeypatch.setattr(Runner, "harness_for", harness_for)
    root = project(tmp_path, {})
    write_evals(
        root,
        EVALS.replace(
            "      - name: refuses prod\n",
            '      - name: refuses prod\n        now: "2026-01-05T09:00:00Z"\n',
        ),
    )
    with FakeModelServer("openai", list(REPLIES)) as server:
        code, out = invoke(root, "--base-url", server.base_url)
    assert code == 1
    assert "PASS .harness/evals/deploy.md:3 deploys to staging" in out
    assert "the case could not run: no space left on device" in out
