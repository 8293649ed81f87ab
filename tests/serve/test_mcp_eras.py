"""Both MCP protocol eras (handshake 2025 and per-request 2026-07-28) over both
transports, driven by the SDK's stock ``mcp.Client`` (which validates
``structuredContent`` against each tool's ``outputSchema``)."""

from __future__ import annotations

import json
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from serve_helpers import (
    ERAS,
    MODERN,
    Notifications,
    add_sleeper,
    era_client,
    http_server,
    processes_with,
    spilled_ref,
    tool_text,
)

LIST_CHANGED = "notifications/tools/list_changed"
TRANSPORTS = ("stdio", "http")


@asynccontextmanager
async def connect(
    project: Path, transport: str, mode: str, *extra: str, notes: Notifications | None = None
):  # noqa: ANN201
    if transport == "stdio":
        # stdio: extra server options are not needed by these tests
        async with era_client(project, mode, notes) as client:
            yield client
    else:
        async with http_server(project, *extra) as url:
            async with era_client(url, mode, notes) as client:
                yield client


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", ERAS)
def test_spilled_output_pages_in_both_eras(project: Path, transport: str, mode: str) -> None:
    async def go() -> None:
        async with connect(project, transport, mode) as c:
            big = await c.call_tool("big", {})
            assert big.is_error is False and big.structured_content is None
            text = tool_text(big)
            assert len(text.encode()) <= 2048
            ref, offset = spilled_ref(text)
            # Unguessable: 128 random bits, not a counter.
            assert ref.startswith("out-") and len(ref) >= 20 and not ref[4:].isdigit()
            full = text[:offset]
            while True:
                page = await c.call_tool("read_output", {"ref": ref, "offset": offset})
                assert page.is_error is False, tool_text(page)
                body = tool_text(page)
                assert len(body.encode()) <= 2048
                content, footer = body.rsplit("\n[read_output ", 1)
                full += content
                if "end of output" in footer:
                    break
                offset = int(footer.split("offset=")[1].split(")")[0])
            assert json.loads(full) == {"data": "x" * 5000, "typed": False}

            wrong = await c.call_tool("read_output", {"ref": "out-1"})
            assert wrong.is_error is True
            assert 'unknown output ref "out-1"' in tool_text(wrong)

    anyio.run(go)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", ERAS)
def test_structured_content_never_exceeds_the_cap(project: Path, transport: str, mode: str) -> None:
    async def go() -> None:
        async with connect(project, transport, mode) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert tools["big_typed"].output_schema is not None
            assert "read_output" in tools
            # The stock client validates structuredContent against the outputSchema:
            # the capped result must pass that check (an error result is not validated).
            typed = await c.call_tool("big_typed", {})
            assert typed.is_error is True and typed.structured_content is None
            text = tool_text(typed)
            assert len(text.encode()) <= 2048 and "[output truncated at 2048 bytes]" in text
            ref, offset = spilled_ref(text)
            rest = await c.call_tool("read_output", {"ref": ref, "offset": offset})
            assert rest.is_error is False and "yyyy" in tool_text(rest)
            # Small typed results still carry their structuredContent.
            echo = await c.call_tool("echo", {"text": "hi"})
            assert echo.structured_content == {"echo": "hi"}

    anyio.run(go)


def test_structured_form_over_the_cap_while_the_text_fits(project: Path) -> None:
    """The wrapped form ({"result": ...}) is bigger than the text: still capped."""
    (project / ".harness" / "tools" / "edge.md").write_text(
        "---\nreturns: {type: string}\nscript: |\n  def run(args):\n"
        '      return "z" * 2040\n---\nA string just under the cap.\n'
    )

    async def go() -> None:
        async with era_client(project, MODERN) as c:
            res = await c.call_tool("edge", {})
            assert res.is_error is True and res.structured_content is None
            text = tool_text(res)
            assert len(text.encode()) <= 2048
            ref, _ = spilled_ref(text)
            page = await c.call_tool("read_output", {"ref": ref, "limit": 3000})
            assert "z" * 1000 in tool_text(page)

    anyio.run(go)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_legacy_capabilities_are_truthful_and_no_spurious_notification(
    project: Path, transport: str
) -> None:
    for name in ("send_email", "resize_image"):  # nothing can change the listing now
        (project / ".harness" / "tools" / f"{name}.md").unlink()

    async def go() -> None:
        notes = Notifications()
        async with connect(project, transport, "legacy", notes=notes) as c:
            assert c.server_capabilities.tools.list_changed is False
            big = await c.call_tool("big", {})
            assert "read_output" in tool_text(big)
            await anyio.sleep(0.3)
            assert notes.count(LIST_CHANGED) == 0

    anyio.run(go)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_listed_changes_reach_legacy_clients(project: Path, transport: str) -> None:
    async def go() -> None:
        notes = Notifications()
        async with connect(project, transport, "legacy", notes=notes) as c:
            assert c.server_capabilities.tools.list_changed is True  # tool_search surfaces
            before = notes.count(LIST_CHANGED)
            await c.call_tool("big", {})  # a spill changes nothing in the listing
            found = await c.call_tool("tool_search", {"query": "send an email"})
            assert found.is_error is False
            await notes.wait_for(LIST_CHANGED, before)
            assert notes.count(LIST_CHANGED) == before + 1
            assert "send_email" in {t.name for t in (await c.list_tools()).tools}

    anyio.run(go)


async def _first_event(c: Any, edit: Any) -> Any:
    async with c.listen(tools_list_changed=True) as sub:
        assert sub.honored.tools_list_changed is True
        edit()
        with anyio.fail_after(20):
            async for event in sub:
                return event
    return None


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_watch_reaches_modern_clients_through_subscriptions_listen(
    project: Path, transport: str
) -> None:
    echo = project / ".harness" / "tools" / "echo.md"

    def edit() -> None:
        echo.write_text(echo.read_text().replace("Echo the text back.", "Echo (v2)."))

    async def go() -> None:
        if transport == "stdio":
            from mcp import Client, StdioServerParameters
            from serve_helpers import serve_argv

            argv = serve_argv(project, "--watch", "--watch-interval", "0.1")
            import os
            import sys

            params = StdioServerParameters(
                command=argv[0],
                args=argv[1:],
                cwd=str(project),
                env={"PYTHONPATH": os.pathsep.join(sys.path)},
            )
            async with Client(params, mode="auto") as c:
                assert c.protocol_version == MODERN
                await _check_modern_watch(c, edit)
        else:
            async with http_server(project, "--watch", "--watch-interval", "0.1") as url:
                async with era_client(url, MODERN) as c:
                    await _check_modern_watch(c, edit)

    anyio.run(go)


async def _check_modern_watch(c: Any, edit: Any) -> None:
    assert c.server_capabilities.tools.list_changed is True
    big = await c.call_tool("big", {})
    ref, offset = spilled_ref(tool_text(big))
    event = await _first_event(c, edit)
    assert type(event).__name__ == "ToolsListChanged"
    tools = {t.name: t for t in (await c.list_tools()).tools}
    assert tools["echo"].description == "Echo (v2)."
    # The ref made before the reload is still readable after it.
    page = await c.call_tool("read_output", {"ref": ref, "offset": offset})
    assert page.is_error is False, tool_text(page)


def _audit_events(project: Path) -> list[dict[str, Any]]:
    path = project / ".harness" / "state" / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", ERAS)
def test_cancelled_sleep_leaves_no_process(project: Path, transport: str, mode: str) -> None:
    add_sleeper(project)
    # A sleep duration no other test process uses (str hashes differ per process, so
    # under pytest -n two parameters running at once could have shared a hash marker).
    marker = f"{uuid.uuid4().int % 10**6 + 1000}.{len(mode)}17"

    async def go() -> None:
        async with connect(project, transport, mode) as c:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await c.call_tool("sleeper", {"marker": marker})

                tg.start_soon(call)
                with anyio.fail_after(20):
                    while not processes_with(f"sleep {marker}"):
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
            with anyio.fail_after(10):
                while processes_with(f"sleep {marker}"):
                    await anyio.sleep(0.05)
            # The server is still healthy.
            ok = await c.call_tool("echo", {"text": "after"})
            assert ok.structured_content == {"echo": "after"}
        with anyio.fail_after(10):
            while not any(e.get("event") == "tool.cancelled" for e in _audit_events(project)):
                await anyio.sleep(0.05)
        cancelled = [e for e in _audit_events(project) if e.get("event") == "tool.cancelled"]
        assert cancelled[0]["tool"] == "sleeper"

    anyio.run(go)


def test_disconnect_stops_the_call_in_a_worker(project: Path) -> None:
    """Process isolation: the worker and the command's process group are killed."""
    add_sleeper(project)
    md = project / "harness.md"
    md.write_text(
        md.read_text().replace("runtime: {isolation: inprocess}", "runtime: {isolation: process}")
    )
    marker = "1777.25"

    async def go() -> None:
        async with http_server(project) as url:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    async with era_client(url, MODERN) as c:
                        await c.call_tool("sleeper", {"marker": marker})

                tg.start_soon(call)
                with anyio.fail_after(30):
                    while not processes_with(f"sleep {marker}"):
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()  # the client goes away mid-call
            with anyio.fail_after(10):
                while processes_with(f"sleep {marker}"):
                    await anyio.sleep(0.05)

    anyio.run(go)


@pytest.mark.parametrize("mode", ERAS)
def test_cancelled_starlark_loop_stops(project: Path, mode: str) -> None:
    """A busy Starlark run (no command) ends when its call is cancelled, long before
    its own timeout."""
    add_sleeper(project)  # for the audit trail
    (project / ".harness" / "tools" / "spin.md").write_text(
        "---\ntimeout_ms: 120000\nscript: |\n  def run(args):\n      n = 0\n"
        "      for i in range(2000000000):\n          n += i\n      return n\n---\nSpins.\n"
    )

    async def go() -> None:
        async with era_client(project, mode) as c:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await c.call_tool("spin", {})

                tg.start_soon(call)
                with anyio.fail_after(30):  # the call has started running
                    while not any(
                        e.get("event") == "tool.validate" and e.get("tool") == "spin"
                        for e in _audit_events(project)
                    ):
                        await anyio.sleep(0.05)
                await anyio.sleep(0.5)
                tg.cancel_scope.cancel()
            with anyio.fail_after(20):
                while not any(
                    e.get("event") == "tool.execute" and e.get("tool") == "spin"
                    for e in _audit_events(project)
                ):
                    await anyio.sleep(0.05)
            ok = await c.call_tool("echo", {"text": "after"})
            assert ok.structured_content == {"echo": "after"}
        done = [
            e
            for e in _audit_events(project)
            if e.get("event") == "tool.execute" and e.get("tool") == "spin"
        ]
        assert done[0]["ok"] is False and done[0]["duration_ms"] < 15000
        assert any(
            e.get("event") == "tool.cancelled" and e.get("tool") == "spin"
            for e in _audit_events(project)
        )

    anyio.run(go)
