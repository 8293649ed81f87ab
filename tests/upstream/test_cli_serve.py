"""The command line and `harness serve` with upstream servers (real processes)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anyio
from upstream_helpers import INPROCESS, TIME_SERVER, sdk, server_pids, write_project

BLOCK_SECRET = """---
event: tool.pre
when: payload["name"] == "sdk.secret"
script: |
  def handle(event, payload):
      return block("no secrets over the proxy")
---
"""


def harness_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_list_schema_and_call_include_upstream_tools(tmp_path: Path) -> None:
    write_project(tmp_path, {"time": {"command": [TIME_SERVER]}}, config=INPROCESS)
    listed = harness_cli("list", "--format", "json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = [t["name"] for t in json.loads(listed.stdout)["tools"]]
    assert {"time.convert_time", "time.get_current_time"} <= set(names)
    schema = harness_cli("schema", "time.get_current_time", "--format", "openai", cwd=tmp_path)
    assert schema.returncode == 0, schema.stderr
    assert json.loads(schema.stdout)["function"]["name"] == "time_get_current_time"
    call = harness_cli(
        "call", "time.get_current_time", "--arg", "timezone=UTC", "--format", "json", cwd=tmp_path
    )
    assert call.returncode == 0, call.stderr
    assert json.loads(call.stdout)["value"]["timezone"] == "UTC"
    bad = harness_cli("call", "time.get_current_time", "{}", cwd=tmp_path)
    assert bad.returncode == 1 and '"timezone" is a required property' in bad.stderr


def test_validate_is_offline_unless_connect(tmp_path: Path) -> None:
    tag = f"validate-{tmp_path.name}"
    write_project(
        tmp_path,
        {
            "sdk": sdk(tag, per_tool={"no_such_tool": {"timeout_ms": 5}}),
            "gone": {"command": ["no-such-mcp-server-xyz"]},
        },
    )
    offline = harness_cli("validate", cwd=tmp_path)
    assert offline.returncode == 0, offline.stdout
    online = harness_cli("validate", "--connect", cwd=tmp_path)
    assert online.returncode == 1
    out = online.stdout
    assert re.search(r'server "sdk": \d+ tools: sdk.add, sdk.big, sdk.connect, sdk.echo', out)
    assert (
        'harness.md:2:1: warning: server "sdk" per_tool names "no_such_tool", which the '
        "server does not offer"
    ) in out
    assert (
        'harness.md:2:1: error: upstream server "gone": program "no-such-mcp-server-xyz" '
        "is not on PATH"
    ) in out
    assert server_pids(tag) == []  # validate stops what it started
    report = json.loads(
        harness_cli("validate", "--connect", "--format", "json", cwd=tmp_path).stdout
    )
    assert report["ok"] is False and "sdk.echo" in report["servers"]["sdk"]
    assert "gone" not in report["servers"]
    assert {p["code"] for p in report["problems"]} == {"server-unreachable", "server-tool-unknown"}


def test_validate_reports_declaration_problems_with_lines(tmp_path: Path) -> None:
    servers = tmp_path / ".harness" / "servers"
    servers.mkdir(parents=True)
    (servers / "bad.md").write_text(
        "---\ncommand: [x]\nretry: {max_attempts: 0, retry_on: [transient, flaky]}\n"
        "loading: lazy\nenv: {A: '${HOME}'}\n---\nA broken declaration.\n"
    )
    out = harness_cli("validate", cwd=tmp_path).stdout
    assert (
        '.harness/servers/bad.md:3:9: error: server "bad" retry.max_attempts must be an '
        "integer from 1 to 10" in out
    )
    assert 'retry.retry_on has unknown failure class "flaky"' in out
    assert (
        '.harness/servers/bad.md:4:1: error: server "bad" loading must be one of eager, '
        "deferred, got 'lazy'" in out
    )
    assert 'env "A" has ${HOME}; the only substitution is ${env:NAME}' in out


async def _serve_session(root: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "harness.cli.main", "serve", "--root", str(root)]
    )
    async with Client(stdio_client(params), message_handler=on_message, mode="legacy") as c:
        names = [t.name for t in (await c.list_tools()).tools]
        assert "sdk.echo" in names and "sdk.newt" not in names
        r = await c.call_tool("sdk.echo", {"text": "through the proxy"})
        assert not r.is_error and r.structured_content == {"result": "through the proxy"}
        blocked = await c.call_tool("sdk.secret", {})
        assert blocked.is_error
        assert blocked.content[0].text == ('blocked by hook "no_secret": no secrets over the proxy')
        bad = await c.call_tool("sdk.add", {"a": "x", "b": 1})
        assert bad.is_error and '$.a: "x" is not of type "integer"' in bad.content[0].text
        changed = anyio.Event()
        await c.call_tool("sdk.grow", {"name": "newt"})
        with anyio.fail_after(15):
            await changed.wait()
        names = [t.name for t in (await c.list_tools()).tools]
        assert "sdk.newt" in names
        r = await c.call_tool("sdk.newt", {})
        assert r.structured_content == {"result": "I am newt"}


def test_serve_proxies_upstream_tools_and_list_changed(tmp_path: Path) -> None:
    tag = f"serve-{tmp_path.name}"
    write_project(tmp_path, {"sdk": sdk(tag)}, hooks={"no_secret": BLOCK_SECRET}, config=INPROCESS)
    anyio.run(_serve_session, tmp_path)
    assert server_pids(tag) == [] or anyio.run(_gone, tag)


async def _gone(tag: str) -> bool:
    with anyio.fail_after(10):
        while server_pids(tag):
            await anyio.sleep(0.1)
    return True
