"""`harness serve --watch`: reload on change, list_changed, keep the last good set."""

from __future__ import annotations

from pathlib import Path

import anyio
from serve_helpers import Notifications, stderr_log, stdio_session, tool_text, wait_for_log

LIST_CHANGED = "notifications/tools/list_changed"


def test_edit_add_break_and_fix_under_watch(project: Path) -> None:
    tools = project / ".harness" / "tools"
    echo = tools / "echo.md"

    async def go() -> None:
        notes = Notifications()
        async with stdio_session(project, "--watch", "--watch-interval", "0.1", notes=notes) as s:
            await s.list_tools()

            # 1. Edit a description: list_changed, and the listing shows the edit.
            echo.write_text(echo.read_text().replace("Echo the text back.", "Repeat the text."))
            await notes.wait_for(LIST_CHANGED, 0)
            listed = {t.name: t for t in (await s.list_tools()).tools}
            assert listed["echo"].description == "Repeat the text."

            # 2. A new file appears: list_changed again, the tool is listed and callable.
            (tools / "shout.md").write_text(
                "---\nparameters:\n  text: {type: string, required: true}\nscript: |\n"
                '  def run(args):\n      return args["text"].upper()\n---\nShout.\n'
            )
            await notes.wait_for(LIST_CHANGED, 1)
            assert "shout" in {t.name for t in (await s.list_tools()).tools}
            shout = await s.call_tool("shout", {"text": "hey"})
            assert tool_text(shout) == "HEY"

            # 3. Break an artifact: the problems are logged, the last good set stays.
            start = len(stderr_log(project).read_text())
            echo.write_text("---\nparameters: [oops\n---\nbroken\n")
            await wait_for_log(stderr_log(project), "reload failed", start)
            # The problems follow, one log line each (a read may fall between two lines).
            log = await wait_for_log(stderr_log(project), "echo.md", start)
            assert log.index("reload failed") < log.index("echo.md")
            listed = {t.name: t for t in (await s.list_tools()).tools}
            assert listed["echo"].description == "Repeat the text."
            ok = await s.call_tool("echo", {"text": "still"})
            assert ok.structured_content == {"echo": "still"}
            assert notes.count(LIST_CHANGED) == 2

            # 4. Fix it: reloaded and announced.
            echo.write_text(
                echo.read_text().replace("broken", "x").replace("parameters: [oops\n", "")
            )
            await notes.wait_for(LIST_CHANGED, 2)
            listed = {t.name: t for t in (await s.list_tools()).tools}
            assert listed["echo"].description == "x"
            assert listed["echo"].input_schema == {
                "type": "object",
                "properties": {},
                "required": [],
            }
            await anyio.sleep(0)

    anyio.run(go)
