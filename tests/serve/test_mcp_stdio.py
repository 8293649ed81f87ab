"""`harness serve` over stdio, driven by the official MCP client as a subprocess."""

from __future__ import annotations

from pathlib import Path

import anyio
from serve_helpers import Notifications, stdio_session, tool_text


def run(coro_fn, *args):  # noqa: ANN001, ANN202
    return anyio.run(coro_fn, *args)


def test_initialize_lists_tools_with_schemas_and_annotations(project: Path) -> None:
    async def go() -> None:
        async with stdio_session(project) as s:
            init = s.initialize_result
            assert init is not None
            assert init.instructions.startswith("You are testing the MCP server.")
            assert "untrusted" in init.instructions  # docs/spec.md §8.7
            assert init.capabilities.tools is not None and init.capabilities.tools.list_changed
            listed = await s.list_tools()
            tools = {t.name: t for t in listed.tools}
            # Deferred tools are hidden; tool_search is offered because some exist.
            # (read_output, the harness's own pager, may be listed as well.)
            assert set(tools) - {"read_output"} == {
                "add",
                "big",
                "big_typed",
                "danger",
                "echo",
                "slow",
                "tool_search",
            }
            echo = tools["echo"]
            assert echo.description == "Echo the text back."
            assert echo.input_schema == {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "Text to echo back."},
                    "times": {"type": "integer", "minimum": 1, "maximum": 3},
                },
                "required": ["text"],
            }
            assert echo.output_schema == {
                "type": "object",
                "properties": {"echo": {"type": "string"}},
                "required": ["echo"],
            }
            assert echo.annotations is not None
            assert echo.annotations.read_only_hint is True
            assert echo.annotations.idempotent_hint is True
            assert echo.annotations.title == "Echo"
            assert tools["danger"].annotations.destructive_hint is True
            # A non-object `returns` is wrapped, as MCP requires an object schema.
            assert tools["add"].output_schema == {
                "type": "object",
                "properties": {"result": {"type": "integer"}},
                "required": ["result"],
            }
            assert tools["tool_search"].annotations.read_only_hint is True

    run(go)


def test_calls_good_bad_blocked_timeout_unknown(project: Path) -> None:
    async def go() -> None:
        async with stdio_session(project) as s:
            await s.list_tools()
            good = await s.call_tool("echo", {"text": "hi", "times": 2})
            assert good.is_error is False
            assert good.structured_content == {"echo": "hihi"}
            assert tool_text(good) == '{"echo":"hihi"}'

            wrapped = await s.call_tool("add", {"a": 2, "b": 3})
            assert wrapped.is_error is False
            assert wrapped.structured_content == {"result": 5}
            assert tool_text(wrapped) == "5"

            # Bad arguments: an isError result naming every problem, not a protocol error.
            bad = await s.call_tool("echo", {"times": "2"})
            assert bad.is_error is True
            text = tool_text(bad)
            assert text.startswith('invalid arguments for tool "echo"')
            assert '"text" is a required property' in text
            assert "$.times" in text and '"2" is not of type "integer"' in text
            assert bad.structured_content is None

            blocked = await s.call_tool("danger", {"target": "everything"})
            assert blocked.is_error is True
            assert tool_text(blocked) == 'blocked by hook "guard": danger is not allowed here'

            slow = await s.call_tool("slow", {})
            assert slow.is_error is True
            assert tool_text(slow) == 'tool "slow" timed out after 300 ms'

            unknown = await s.call_tool("nope", {})
            assert unknown.is_error is True
            assert tool_text(unknown).startswith('unknown tool "nope"; available:')

            # The server is still healthy after all of that.
            again = await s.call_tool("echo", {"text": "ok"})
            assert again.structured_content == {"echo": "ok"}

    run(go)


def test_tool_search_surfaces_deferred_tools_for_the_session(project: Path) -> None:
    async def go() -> None:
        notes = Notifications()
        async with stdio_session(project, notes=notes) as s:
            before = {t.name for t in (await s.list_tools()).tools}
            assert "send_email" not in before
            found = await s.call_tool("tool_search", {"query": "send an email"})
            assert found.is_error is False
            names = [t["name"] for t in found.structured_content["tools"]]
            assert names[0] == "send_email"
            assert "resize_image" not in names
            await notes.wait_for("notifications/tools/list_changed")
            after = {t.name for t in (await s.list_tools()).tools}
            assert after == before | {"send_email"}
            sent = await s.call_tool("send_email", {"to": "a@example.com"})
            assert sent.structured_content == {"sent": True, "to": "a@example.com"}

            nothing = await s.call_tool("tool_search", {"query": "zzzz qqqq"})
            assert nothing.structured_content == {"query": "zzzz qqqq", "tools": []}

            empty = await s.call_tool("tool_search", {})
            assert empty.is_error is True
            assert '"query" is a required property' in tool_text(empty)

        # A new connection starts with the deferred tools hidden again.
        async with stdio_session(project) as s2:
            assert "send_email" not in {t.name for t in (await s2.list_tools()).tools}

    run(go)


def test_no_tool_search_without_deferred_tools(project: Path) -> None:
    for name in ("send_email", "resize_image"):
        (project / ".harness" / "tools" / f"{name}.md").unlink()

    async def go() -> None:
        async with stdio_session(project) as s:
            names = {t.name for t in (await s.list_tools()).tools}
            assert names - {"read_output"} == {"add", "big", "big_typed", "danger", "echo", "slow"}

    run(go)


def test_truncated_output_is_capped_and_pageable(project: Path) -> None:
    async def go() -> None:
        async with stdio_session(project) as s:
            big = await s.call_tool("big", {})
            assert big.is_error is False
            text = tool_text(big)
            assert "[output truncated at 2048 bytes]" in text
            assert len(text.encode()) <= 2048
            # Without an outputSchema the capped text is all the model gets.
            assert big.structured_content is None
            ref = text.split('call read_output(ref="')[1].split('"')[0]
            assert "read_output" in {t.name for t in (await s.list_tools()).tools}
            offset = int(text.split(f'read_output(ref="{ref}", offset=')[1].split(")")[0])
            page = await s.call_tool("read_output", {"ref": ref, "offset": offset, "limit": 100})
            assert page.is_error is False
            assert f"[read_output {ref}: bytes {offset}-{offset + 100} of " in tool_text(page)
            # With an outputSchema, structuredContent would carry the whole value past
            # the cap: an error result instead, whose text names the ref of the full value.
            typed = await s.call_tool("big_typed", {})
            assert typed.is_error is True and typed.structured_content is None
            assert "[output truncated at 2048 bytes]" in tool_text(typed)
            assert len(tool_text(typed).encode()) <= 2048

    run(go)


def test_fast_initialize_answer_equals_the_sdks(project: Path) -> None:
    """stdio answers initialize before importing the SDK (fast_start.py); the SDK's own
    answer to the replayed request is compared with it, for every protocol version."""
    import json
    import os
    import subprocess
    import sys

    from serve_helpers import serve_argv, stderr_log

    for requested in ("2024-11-05", "2025-06-18", "2025-11-25", "1999-01-01"):
        init = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "initialize",
            "params": {
                "protocolVersion": requested,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        lines = [
            init,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
        ]
        with open(stderr_log(project), "a") as err:
            done = subprocess.run(
                serve_argv(project),
                cwd=project,
                stderr=err,
                timeout=60,
                input="".join(json.dumps(m) + "\n" for m in lines).encode(),
                stdout=subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            )
        answers = [json.loads(x) for x in done.stdout.splitlines()]
        assert [a["id"] for a in answers] == [7, 8], answers  # one answer per request
        result = answers[0]["result"]
        assert result["protocolVersion"] == (
            requested if requested != "1999-01-01" else "2025-11-25"
        )
        assert result["capabilities"] == {"tools": {"listChanged": True}}
        assert "read_output" in {t["name"] for t in answers[1]["result"]["tools"]}
    log = stderr_log(project).read_text()
    assert "differed" not in log and "Traceback" not in log


def test_first_line_not_json_gets_the_sdks_error(project: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    from serve_helpers import serve_argv

    done = subprocess.run(
        serve_argv(project),
        cwd=project,
        timeout=60,
        capture_output=True,
        input=b'not json\n{"jsonrpc":"2.0","id":1,"method":"initialize","params":{'
        b'"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":'
        b'{"name":"t","version":"1"}}}\n',
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    answers = [json.loads(x) for x in done.stdout.splitlines()]
    assert answers[-1]["id"] == 1 and "result" in answers[-1]
