"""A ``tool.post`` hook that rewrites a typed tool's text (``modify({"content": ...})``)
over ``harness serve`` (issue 23): the redacted text goes out as the call's content, not
an error with a false "[output truncated ...]" notice, and no structured content claims
the typed value the hook replaced. Driven by the official MCP client."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
from serve_helpers import stdio_session, tool_text

REDACT = """\
---
event: tool.post
when: payload["name"] == "echo"
script: |
  def handle(event, payload):
      return modify({"content": payload["content"].replace("ghp_", "[X]")})
---
Redacts token prefixes in echo's text.
"""


def test_a_text_rewrite_of_a_typed_result_goes_out_as_content(project: Path) -> None:
    (project / ".harness" / "hooks" / "redact.md").write_text(REDACT)

    async def go() -> None:
        async with stdio_session(project) as s:
            # The raw request: an SDK client that checks outputSchema would refuse a
            # typed tool's result without structured content before we could look at it.
            request = types.CallToolRequest(
                params=types.CallToolRequestParams(name="echo", arguments={"text": "token ghp_abc"})
            )
            result = await s.send_request(request, types.CallToolResult)
            assert result.is_error is False, tool_text(result)
            text = tool_text(result)
            assert "[X]abc" in text and "ghp_" not in text, text
            assert "truncated" not in text, text
            assert result.structured_content is None
            # A typed tool no hook rewrites still carries its structured content.
            plain = await s.call_tool("add", {"a": 2, "b": 3})
            assert plain.is_error is False and plain.structured_content == {"result": 5}

    anyio.run(go)
