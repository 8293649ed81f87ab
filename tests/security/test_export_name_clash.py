"""Issue 10 item 7: a registered tool name that collides on export.

``meta.tool_register("run.command", …)`` beside ``run_command`` used to be accepted;
the next ``definitions()`` raised (both export as ``run_command`` for OpenAI and
Anthropic) and the agent loop died. The registration is refused with an error result
and the loop keeps going. Real project, real Starlark, real pipeline; the model is the
fake server of tests/agent speaking each provider's wire format.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import harness
from harness.testing import FakeModelServer, Reply, ToolUse

REGISTRAR = """\
---
parameters:
  name: {type: string, required: true}
script: |
  def run(args):
      return meta.tool_register(args["name"], "Made at run time.", {},
                                "def run(args):\\n    return 'made'\\n")
---
Registers a tool.
"""
RUN_COMMAND = """\
---
script: |
  def run(args):
      return "ran"
---
Runs a command (a stand-in).
"""


def project(root: Path, provider: str) -> Path:
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / ".harness" / "tools" / "register.md").write_text(REGISTRAR)
    (root / ".harness" / "tools" / "run_command.md").write_text(RUN_COMMAND)
    (root / "harness.md").write_text(
        f"---\nmodel:\n  provider: {provider}\n  name: fake-model\n  api_key_env: CLASH_KEY\n"
        "runtime: {isolation: inprocess}\nmeta: {enabled: true}\n"
        "limits: {max_tool_calls_per_turn: 5}\n---\nYou test.\n"
    )
    return root


def _contents(provider: str, body: dict) -> list[str]:
    if provider == "openai":
        return [m["content"] for m in body["messages"] if m["role"] == "tool"]
    return [
        b.get("content", "")
        for b in body["messages"][-1]["content"]
        if b.get("type") == "tool_result"
    ]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_agent_loop_survives_a_clashing_registration(
    provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLASH_KEY", "sk-not-real")
    root = project(tmp_path, provider)
    replies = [
        Reply(tools=[ToolUse("register", {"name": "run.command"}, id="r1")]),
        Reply(tools=[ToolUse("register", {"name": "made.here"}, id="r2")]),
        Reply(tools=[ToolUse("made_here", {}, id="r3"), ToolUse("run_command", {}, id="r4")]),
        Reply(text="done"),
    ]
    with FakeModelServer(provider, replies) as server, harness.load(root) as h:
        result = h.run("register tools", base_url=server.base_url)
    assert result.text == "done" and result.rounds == 3
    first = result.results[0]
    assert first.is_error
    assert 'tool "run.command" would export as "run_command"' in (first.error or "")
    assert 'existing tool "run_command"' in (first.error or "")
    assert not result.results[1].is_error
    assert [r.text for r in result.results[2:]] == ["made", "ran"]
    # Every request carried definitions with unique names, and the clash never appeared.
    for request in server.requests:
        tools = request.body.get("tools", [])
        names = [t["function"]["name"] if provider == "openai" else t["name"] for t in tools]
        assert len(names) == len(set(names)), names
    assert "would export as" in _contents(provider, server.requests[1].body)[0]


def test_register_refuses_every_export_clash(tmp_path: Path) -> None:
    root = project(tmp_path, "openai")
    with harness.load(root) as h, h.session() as s:
        clash = s.call("register", {"name": "run.command"})
        assert clash.is_error and "choose another name" in (clash.error or "")
        assert not s.call("register", {"name": "a.b"}).is_error
        again = s.call("register", {"name": "a_b"})  # clashes with the registered a.b
        assert again.is_error and 'existing tool "a.b"' in (again.error or ""), again.error
        for fmt in ("openai", "anthropic", "mcp"):
            s.definitions(fmt)  # never raises
        assert sorted(s.registered_tools) == ["a.b"]
        # Defence in depth: a session tool added through the Python API that clashes is
        # left out of the session's tools, so definitions() still never raises.
        s.register_tool(replace(h.all_tools["run_command"], name="run.command"))
        names = [d["function"]["name"] for d in s.definitions("openai")]
        assert names.count("run_command") == 1 and "run.command" not in s.tools
