"""`harness run` and `Harness.run` end to end: a real project with real Starlark tools,
the real pipeline, and the fake model servers speaking each provider's wire format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import harness
from harness.agent import AgentResult
from harness.cli.main import cli
from harness.testing import FakeModelServer, Reply, ToolUse

KEY = "sk-e2e-not-a-real-key"

ADD = """---
parameters:
  a: {type: integer, required: true}
  b: {type: integer, required: true}
script: |
  def run(args):
      return args["a"] + args["b"]
---
Add two integers.
"""

UPPER = """---
parameters:
  text: {type: string, required: true}
script: |
  def run(args):
      return args["text"].upper()
---
Upper-case a text.
"""


def make_project(
    root: Path, provider: str, *, rounds: int = 4, isolation: str = "inprocess", extra: str = ""
) -> Path:
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / ".harness" / "tools" / "add.md").write_text(ADD)
    (root / ".harness" / "tools" / "text.upper.md").write_text(UPPER)
    (root / "harness.md").write_text(
        f"---\nmodel:\n  provider: {provider}\n  name: fake-model\n  api_key_env: E2E_KEY\n"
        f"limits:\n  max_tool_calls_per_turn: {rounds}\n"
        f"runtime:\n  isolation: {isolation}\n{extra}---\nYou help with arithmetic.\n"
    )
    return root


def invoke(root: Path, server: FakeModelServer, *args: str) -> Any:
    return CliRunner().invoke(
        cli,
        [
            "run",
            "What is 2 + 3, and shout hi?",
            "--root",
            str(root),
            "--base-url",
            server.base_url,
            *args,
        ],
        env={"E2E_KEY": KEY},
    )


def result_blocks(provider: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    if provider == "openai":
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
    return [(b["tool_use_id"], b.get("content", "")) for b in body["messages"][-1]["content"]]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_cli_run_streams_text_and_runs_real_tools(provider: str, tmp_path: Path) -> None:
    root = make_project(tmp_path, provider, isolation="process")
    replies = [
        Reply(
            text="Working on it.",
            chunk=3,
            tools=[
                ToolUse("add", {"a": 2, "b": 3}, id="k1"),
                ToolUse("text_upper", {"text": "hi"}, id="k2"),
                ToolUse("add", {"a": "two"}, id="k3"),
            ],
        ),
        Reply(text="5 and HI.", chunk=2),
    ]
    with FakeModelServer(provider, replies) as server:
        res = invoke(root, server)
    assert res.exit_code == 0, res.output
    assert res.stdout == "Working on it.\n5 and HI.\n"
    assert "[tool] add" in res.stderr and "[tool] text.upper" in res.stderr
    first, second = (r.body for r in server.requests)
    h = harness.load(root)
    try:
        assert first["tools"] == h.definitions(format=provider)  # the provider's own export
        assert "You help with arithmetic." in (
            first["messages"][0]["content"] if provider == "openai" else first["system"]
        )
    finally:
        h.close()
    blocks = result_blocks(provider, second)
    assert [b[0] for b in blocks] == ["k1", "k2", "k3"]
    assert blocks[0][1] == "5" and blocks[1][1] == "HI"
    assert blocks[2][1].startswith('invalid arguments for tool "add"')  # pipeline validation
    headers = server.requests[0].headers
    assert KEY in headers.get("authorization", "") + headers.get("x-api-key", "")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_cli_run_round_limit_exits_1(provider: str, tmp_path: Path) -> None:
    root = make_project(tmp_path, provider, rounds=2)
    with FakeModelServer(
        provider, [Reply(tools=[ToolUse("add", {"a": 1, "b": 1})])], repeat_last=True
    ) as server:
        res = invoke(root, server)
    assert res.exit_code == 1
    assert "limits.max_tool_calls_per_turn" in res.stderr and "after 2 rounds" in res.stderr
    assert len(server.requests) == 3


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("status", [500, 401])
def test_cli_run_provider_error_exits_1(provider: str, status: int, tmp_path: Path) -> None:
    root = make_project(tmp_path, provider)
    with FakeModelServer(provider, [Reply(status=status, error="nope, scripted")]) as server:
        res = invoke(root, server)
    assert res.exit_code == 1
    assert f"HTTP {status}" in res.stderr and "nope, scripted" in res.stderr
    assert res.stdout == ""


def test_cli_run_flags_override_harness_md(tmp_path: Path) -> None:
    root = make_project(tmp_path, "anthropic")  # harness.md says anthropic
    with FakeModelServer("openai", [Reply(text="hi")]) as server:
        res = invoke(
            root,
            server,
            "--provider",
            "openai",
            "--model",
            "other-model",
            "--api-key-env",
            "NOT_SET_ANYWHERE",
        )
    assert res.exit_code == 0, res.output
    assert server.requests[0].body["model"] == "other-model"
    assert "authorization" not in server.requests[0].headers  # local server, variable unset


def test_cli_run_max_rounds_flag(tmp_path: Path) -> None:
    root = make_project(tmp_path, "openai", rounds=5)
    with FakeModelServer(
        "openai", [Reply(tools=[ToolUse("add", {"a": 1, "b": 1})])], repeat_last=True
    ) as server:
        res = invoke(root, server, "--max-rounds", "1")
    assert res.exit_code == 1 and "after 1 rounds" in res.stderr
    assert len(server.requests) == 2


def test_cli_run_usage_errors_exit_2(tmp_path: Path) -> None:
    root = make_project(tmp_path, "openai")
    runner = CliRunner()
    # A remote URL and no key in the named variable.
    res = runner.invoke(
        cli,
        ["run", "hi", "--root", str(root), "--base-url", "https://models.example.invalid/v1"],
        env={},
    )
    assert res.exit_code == 2 and 'environment variable "E2E_KEY" is not set' in res.stderr
    # No model name anywhere.
    (root / "harness.md").write_text("---\nruntime: {isolation: inprocess}\n---\nHi.\n")
    res = runner.invoke(
        cli, ["run", "hi", "--root", str(root), "--base-url", "http://127.0.0.1:9/v1"]
    )
    assert res.exit_code == 2 and "no model name" in res.stderr
    # A broken tool: load errors, exit 2, no request made.
    (root / ".harness" / "tools" / "bad.md").write_text("no frontmatter\n")
    res = runner.invoke(
        cli,
        ["run", "hi", "--root", str(root), "--model", "m", "--base-url", "http://127.0.0.1:9/v1"],
    )
    assert res.exit_code == 2 and "bad.md" in res.stderr
    # Bad flag value.
    res = runner.invoke(cli, ["run", "hi", "--root", str(root), "--provider", "gemini"])
    assert res.exit_code == 2


def test_harness_run_python_api_with_audit(tmp_path: Path) -> None:
    root = make_project(tmp_path, "anthropic", extra="audit:\n  path: .harness/state/audit.jsonl\n")
    replies = [Reply(tools=[ToolUse("add", {"a": 20, "b": 22}, id="p1")]), Reply(text="42")]
    seen: list[str] = []
    with FakeModelServer("anthropic", replies) as server, harness.load(root) as h:
        result = h.run(
            "What is 20 + 22?", base_url=server.base_url, on_text=seen.append, environ={}
        )
    assert isinstance(result, AgentResult)
    assert result.text == "42" and seen == ["42"] and result.rounds == 1
    assert [(r.call_id, r.value) for r in result.results] == [("p1", 42)]
    events = [
        json.loads(line) for line in (root / ".harness/state/audit.jsonl").read_text().splitlines()
    ]
    names = [e["event"] for e in events]
    assert names.count("model.request") == 2 and names.count("model.response") == 2
    assert names.index("model.response") < names.index("tool.result") < len(names) - 1
    assert len({e["session"] for e in events}) == 1
    transcripts = list((root / ".harness/state/sessions").glob("*.jsonl"))
    assert len(transcripts) == 1 and transcripts[0].stem == events[0]["session"]


def test_cli_run_reads_the_prompt_from_stdin(tmp_path: Path) -> None:
    root = make_project(tmp_path, "openai")
    with FakeModelServer("openai", [Reply(text="ok")]) as server:
        res = CliRunner().invoke(
            cli,
            ["run", "-", "--root", str(root), "--base-url", server.base_url],
            input="prompt from stdin\n",
        )
        empty = CliRunner().invoke(
            cli, ["run", "-", "--root", str(root), "--base-url", server.base_url], input="  \n"
        )
    assert res.exit_code == 0 and res.stdout == "ok\n"
    assert server.requests[0].body["messages"][-1]["content"] == "prompt from stdin\n"
    assert empty.exit_code == 2 and "PROMPT is empty" in empty.stderr
    assert len(server.requests) == 1


def test_harness_run_as_a_real_process(tmp_path: Path) -> None:
    root = make_project(tmp_path, "anthropic", isolation="process")
    replies = [
        Reply(text="Let me see. ", chunk=4, tools=[ToolUse("add", {"a": 40, "b": 2})]),
        Reply(text="The answer is 42.", chunk=3),
    ]
    exe = Path(sys.executable).parent / "harness"
    with FakeModelServer("anthropic", replies) as server:
        proc = subprocess.run(
            [str(exe), "run", "add 40 and 2", "--root", str(root), "--base-url", server.base_url],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": os.environ.get("PATH", "")},
        )  # no key
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Let me see. \nThe answer is 42.\n"
    assert '[tool] add {"a": 40, "b": 2} -> ok: 42' in proc.stderr
    [block] = server.requests[1].body["messages"][-1]["content"]
    assert block == {
        "type": "tool_result",
        "tool_use_id": "toolu_001",
        "is_error": False,
        "content": "42",
    }


EMAIL = """---
loading: deferred
parameters:
  to: {type: string, required: true, description: the recipient address}
script: |
  def run(args):
      return "sent to " + args["to"]
---
Send an email message to a recipient.
"""


def _tool_names(provider: str, body: dict[str, Any]) -> list[str]:
    if provider == "openai":
        return [t["function"]["name"] for t in body["tools"]]
    return [t["name"] for t in body["tools"]]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_agent_finds_a_deferred_tool_with_tool_search(provider: str, tmp_path: Path) -> None:
    root = make_project(tmp_path, provider)
    (root / ".harness" / "tools" / "send_email.md").write_text(EMAIL)
    replies = [
        Reply(tools=[ToolUse("tool_search", {"query": "send email"}, id="s1")]),
        Reply(tools=[ToolUse("send_email", {"to": "ada@example.org"}, id="s2")]),
        Reply(text="Sent."),
    ]
    with FakeModelServer(provider, replies) as server, harness.load(root) as h:
        result = h.run("Mail Ada.", base_url=server.base_url, environ={"E2E_KEY": KEY})
    first, second, third = (_tool_names(provider, r.body) for r in server.requests)
    assert "tool_search" in first and "send_email" not in first
    assert "send_email" in second and "send_email" in third
    assert [(r.call_id, r.is_error) for r in result.results] == [("s1", False), ("s2", False)]
    assert result.results[1].value == "sent to ada@example.org"
    assert result.text == "Sent."
