"""A deferred upstream MCP server starts on the first tools/list off serve's event loop:
while it starts (slowly), other clients are answered."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import pytest
from serve_helpers import ERAS, era_client, http_server

SDK_SERVER = Path(__file__).parent.parent / "upstream" / "sdk_server.py"
START_DELAY_S = 3


def add_slow_upstream(project: Path) -> None:
    """A deferred upstream server (the SDK test server) that takes START_DELAY_S to start."""
    script = (
        f"import time, runpy, sys; time.sleep({START_DELAY_S}); "
        f"sys.argv = [{str(SDK_SERVER)!r}, 'stdio', 'deferred-{project.name}']; "
        f"runpy.run_path({str(SDK_SERVER)!r}, run_name='__main__')"
    )
    server = {"command": [sys.executable, "-c", script], "loading": "deferred", "sandbox": "off"}
    md = project / "harness.md"
    md.write_text(
        md.read_text().replace(
            "limits: {max_output_bytes: 2048}\n",
            f"limits: {{max_output_bytes: 2048}}\nmcp_servers: {json.dumps({'slow': server})}\n",
        )
    )


@pytest.mark.parametrize("mode", ERAS)
def test_other_clients_are_answered_while_a_deferred_upstream_starts(
    project: Path, mode: str
) -> None:
    add_slow_upstream(project)
    done: dict[str, float] = {}

    async def go() -> None:
        async with http_server(project) as url:

            async def lister() -> None:
                async with era_client(url, mode) as a:
                    names = [t.name for t in (await a.list_tools()).tools]
                    done["list"] = time.monotonic()
                    assert "slow.echo" in names, names
                    echoed = await a.call_tool("slow.echo", {"text": "up"})
                    assert echoed.structured_content == {"result": "up"}

            async def other() -> None:
                await anyio.sleep(0.5)  # the lister's tools/list is starting the server
                # initialize (legacy) or server/discover (2026-07-28): answered meanwhile
                async with era_client(url, mode) as b:
                    if mode == "legacy":
                        await b.send_ping()  # (the 2026-07-28 era has no ping)
                    done["other"] = time.monotonic()
                    # Its own listing waits for the server being started (a listing
                    # always holds the tools of every started server), then is whole.
                    names = [t.name for t in (await b.list_tools()).tools]
                    assert "slow.echo" in names and "echo" in names, names
                    result = await b.call_tool("echo", {"text": "after"})
                    assert result.structured_content == {"echo": "after"}

            async with anyio.create_task_group() as tg:
                tg.start_soon(lister)
                tg.start_soon(other)

    anyio.run(go)
    # The other client's initialize and ping came back while the upstream server was
    # still starting (it sleeps START_DELAY_S before it answers anything).
    assert done["other"] < done["list"], done
