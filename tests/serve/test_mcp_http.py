"""`harness serve --transport http`: the same contract over streamable HTTP on loopback."""

from __future__ import annotations

from pathlib import Path

import anyio
from serve_helpers import Notifications, http_server, http_session, tool_text

LIST_CHANGED = "notifications/tools/list_changed"


def test_http_list_call_errors_and_watch(project: Path) -> None:
    async def go() -> None:
        async with http_server(project, "--watch", "--watch-interval", "0.1") as url:
            notes = Notifications()
            async with http_session(url, notes) as s:
                init = s.initialize_result
                assert init.instructions.startswith("You are testing the MCP server.")
                tools = {t.name: t for t in (await s.list_tools()).tools}
                assert {"add", "danger", "echo", "slow", "tool_search"} <= set(tools)
                assert "send_email" not in tools
                assert tools["echo"].output_schema["properties"] == {"echo": {"type": "string"}}
                assert tools["echo"].annotations.read_only_hint is True

                good = await s.call_tool("echo", {"text": "hi"})
                assert good.is_error is False and good.structured_content == {"echo": "hi"}

                bad = await s.call_tool("add", {"a": 1})
                assert bad.is_error is True
                assert tool_text(bad) == (
                    'invalid arguments for tool "add": $.b: "b" is a required property'
                )

                blocked = await s.call_tool("danger", {"target": "x"})
                assert blocked.is_error is True
                assert tool_text(blocked) == 'blocked by hook "guard": danger is not allowed here'

                found = await s.call_tool("tool_search", {"query": "resize a picture"})
                assert found.structured_content["tools"][0]["name"] == "resize_image"
                await notes.wait_for(LIST_CHANGED, 0)
                assert "resize_image" in {t.name for t in (await s.list_tools()).tools}

                # Two connections are two sessions: the other one did not search.
                async with http_session(url) as other:
                    assert "resize_image" not in {t.name for t in (await other.list_tools()).tools}

                echo = project / ".harness" / "tools" / "echo.md"
                echo.write_text(echo.read_text().replace("Echo the text back.", "Echo (v2)."))
                await notes.wait_for(LIST_CHANGED, 1)
                tools = {t.name: t for t in (await s.list_tools()).tools}
                assert tools["echo"].description == "Echo (v2)."
                # The search result survives the reload for this session.
                assert "resize_image" in tools
                await anyio.sleep(0)

    anyio.run(go)
