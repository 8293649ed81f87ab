"""`harness run` drives a model with upstream tools (the fake model server of tests/agent)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from upstream_helpers import TIME_SERVER, write_project

from harness.cli.main import cli
from harness.testing import FakeModelServer, Reply, ToolUse

MODEL = (
    "model:\n  provider: openai\n  name: fake-model\n  api_key_env: UP_E2E_KEY\n"
    "runtime: {isolation: inprocess}\n"
)


def test_run_calls_an_upstream_tool(tmp_path: Path) -> None:
    write_project(tmp_path, {"time": {"command": [TIME_SERVER]}}, config=MODEL)
    replies = [
        Reply(
            tools=[
                ToolUse("time_get_current_time", {"timezone": "UTC"}, id="t1"),
                ToolUse("time_get_current_time", {}, id="t2"),
            ]
        ),
        Reply(text="It is now."),
    ]
    with FakeModelServer("openai", replies) as server:
        res = CliRunner().invoke(
            cli,
            ["run", "What time is it?", "--root", str(tmp_path), "--base-url", server.base_url],
            env={"UP_E2E_KEY": "k"},
        )
    assert res.exit_code == 0, res.output
    first, second = (r.body for r in server.requests)
    names = [t["function"]["name"] for t in first["tools"]]
    assert {"time_get_current_time", "time_convert_time"} <= set(names)
    results = {m["tool_call_id"]: m["content"] for m in second["messages"] if m["role"] == "tool"}
    assert json.loads(results["t1"])["timezone"] == "UTC"
    assert results["t2"] == (
        'invalid arguments for tool "time.get_current_time": $.timezone: '
        '"timezone" is a required property'
    )
