"""``harness.testing`` exports the fake model servers as a public API (issue 25 item 8):
a user's own agent test drives ``Harness.run`` with a Python tool through either wire
format, and the exported name the model sends back (``math_div``) reaches the tool."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness
import harness.testing
from harness.testing import FakeModelServer, Reply, ToolUse


def test_the_public_names() -> None:
    assert {"FakeModelServer", "Reply", "Request", "ToolUse"} <= set(harness.testing.__all__)
    with pytest.raises(ValueError, match='provider must be "openai" or "anthropic"'):
        FakeModelServer("gemini", [])
    with pytest.raises(RuntimeError, match="start the server first"):
        _ = FakeModelServer("openai", []).port


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_agent_test_with_a_python_tool(tmp_path: Path, provider: str) -> None:
    (tmp_path / "harness.md").write_text("---\nruntime: {isolation: inprocess}\n---\nMath.\n")
    replies = [Reply(tools=[ToolUse("math_div", {"a": 6, "b": 3})]), Reply(text="2")]
    with FakeModelServer(provider, replies) as server, harness.load(tmp_path) as h:

        @h.tool(name="math.div")
        def div(a: float, b: float) -> float:
            """Divide a by b."""
            return a / b

        result = h.run(
            "6 / 3?", provider=provider, model="fake-model", base_url=server.base_url, environ={}
        )
    assert result.text == "2"
    assert [(r.name, r.value) for r in result.results] == [("math.div", 2.0)]
    sent = server.requests[0].body["tools"]
    names = [t["function"]["name"] if provider == "openai" else t["name"] for t in sent]
    assert "math_div" in names
