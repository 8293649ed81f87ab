"""Upstream servers cost nothing until used (issue 26 item 2): a local call, ``validate``
without ``--connect``, ``serve`` starting, and ``list``/``schema`` with a cached listing
start no server; ``--refresh`` and ``list_changed`` renew the cache.

Each server here is the SDK test server behind a launcher that appends a line to a log
file outside the project each time it starts: the count of lines is the count of
processes started (real processes, nothing mocked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
from upstream_helpers import INPROCESS, PYTHON, SDK_SERVER, write_project

import harness
from harness.upstream import listing_cache

LAUNCHER = """\
import runpy, sys
with open({log!r}, "a") as f:
    f.write("started\\n")
sys.argv = [{server!r}, "stdio", {tag!r}]
runpy.run_path({server!r}, run_name="__main__")
"""
HELLO = '---\nscript: |\n  def run(args):\n      return "hi " + args.get("who", "")\n---\nHi.\n'


def counted(tmp_path: Path, **settings: object) -> tuple[Path, Path]:
    """(project root, start log): a project declaring one counted server ``sdk`` and a
    local tool ``hello``."""
    log = tmp_path / "starts.log"
    launcher = tmp_path / "launch.py"
    launcher.write_text(LAUNCHER.format(log=str(log), server=SDK_SERVER, tag=tmp_path.name))
    root = tmp_path / "proj"
    decl = {"command": [PYTHON, str(launcher)], "sandbox": "off", **settings}
    write_project(root, {"sdk": decl}, config=INPROCESS)
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / ".harness" / "tools" / "hello.md").write_text(HELLO)
    return root, log


def starts(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.main", *args, "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def listed(root: Path, *extra: str) -> list[str]:
    out = cli(root, "list", "--format", "json", *extra)
    assert out.returncode == 0, out.stderr
    return [t["name"] for t in json.loads(out.stdout)["tools"]]


def cache_file(root: Path) -> Path:
    return root / ".harness" / "state" / "upstream" / "sdk.json"


def test_a_local_call_and_validate_start_no_server(tmp_path: Path) -> None:
    root, log = counted(tmp_path)
    call = cli(root, "call", "hello", "--arg", "who=you")
    assert call.returncode == 0 and call.stdout.strip() == "hi you", call.stderr
    assert cli(root, "validate").returncode == 0
    with harness.load(root) as h:
        assert h.call("hello", {}).text == "hi "
        assert "hello" in h.tools and "hello" in h.all_tools  # no cache yet: local only
        assert not [n for n in h.all_tools if n.startswith("sdk.")]
    assert starts(log) == 0
    assert not cache_file(root).exists()


def test_list_and_schema_use_the_cache_and_refresh_renews_it(tmp_path: Path) -> None:
    root, log = counted(tmp_path)
    assert "sdk.echo" in listed(root)  # cold: started once, listed, stopped, cached
    assert starts(log) == 1 and cache_file(root).exists()
    assert "sdk.echo" in listed(root) and starts(log) == 1
    schema = cli(root, "schema", "sdk.echo", "--format", "mcp")
    assert schema.returncode == 0, schema.stderr
    assert json.loads(schema.stdout)["inputSchema"]["required"] == ["text"]
    assert cli(root, "schema").returncode == 0 and starts(log) == 1
    with harness.load(root) as h:  # the Python API lists from the cache too
        assert "sdk.echo" in h.tools and starts(log) == 1
        assert h.call("sdk.echo", {"text": "up"}).value == {"result": "up"}  # starts it
        assert starts(log) == 2
    # --refresh starts the server and rewrites the entry (here: a stale one).
    data = json.loads(cache_file(root).read_text())
    data["tools"] = [t for t in data["tools"] if t["name"] != "echo"]
    cache_file(root).write_text(json.dumps(data))
    assert "sdk.echo" not in listed(root) and starts(log) == 2
    assert "sdk.echo" in listed(root, "--refresh") and starts(log) == 3
    assert "sdk.echo" in listed(root) and starts(log) == 3


def test_a_new_declaration_misses_the_cache(tmp_path: Path) -> None:
    root, log = counted(tmp_path)
    listed(root)
    assert starts(log) == 1
    write_project(
        root,
        {"sdk": {**_declared(root), "tools": {"deny": ["echo"]}}},
        config=INPROCESS,
    )
    names = listed(root)
    assert starts(log) == 2 and "sdk.echo" not in names and "sdk.add" in names


def _declared(root: Path) -> dict[str, object]:
    text = (root / "harness.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("mcp_servers:"))
    return json.loads(line.removeprefix("mcp_servers:"))["sdk"]


def test_list_changed_rewrites_the_cache(tmp_path: Path) -> None:
    root, log = counted(tmp_path)
    with harness.load(root) as h:
        assert not h.call("sdk.grow", {"name": "newt"}).is_error
        assert _wait(lambda: "newt" in cache_file(root).read_text())
    assert "sdk.newt" in listed(root) and starts(log) == 1


def test_a_failed_relisting_after_list_changed_drops_the_cache(tmp_path: Path) -> None:
    root, _log = counted(tmp_path)
    with harness.load(root) as h:
        assert not h.call("sdk.echo", {"text": "x"}).is_error
        up = h.upstream
        conn = up._conns["sdk"]
        assert cache_file(root).exists()

        async def broken(cursor: object = None) -> object:
            raise RuntimeError("listing broke")

        conn.client.list_tools = broken  # the server answers list_changed with junk
        up.loop.run(_fire(up, "sdk"))
        assert _wait(lambda: not cache_file(root).exists())


async def _fire(up: object, name: str) -> None:
    up._list_changed(name)  # type: ignore[attr-defined]


def _wait(cond: object, timeout: float = 20.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_serve_starts_no_server_until_a_call(tmp_path: Path) -> None:
    root, log = counted(tmp_path)
    listed(root)  # warm the cache
    assert starts(log) == 1

    async def session() -> None:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "harness.cli.main", "serve", "--root", str(root)],
        )
        async with Client(stdio_client(params), mode="legacy") as c:
            names = [t.name for t in (await c.list_tools()).tools]
            assert "sdk.echo" in names and "hello" in names
            assert starts(log) == 1  # listed from the cache
            res = await c.call_tool("hello", {})
            assert not res.is_error and starts(log) == 1
            res = await c.call_tool("sdk.echo", {"text": "now"})
            assert not res.is_error and starts(log) == 2

    anyio.run(session)


def test_serve_with_a_cold_cache_starts_the_server_on_listing(tmp_path: Path) -> None:
    root, log = counted(tmp_path)

    async def session() -> None:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "harness.cli.main", "serve", "--root", str(root)],
        )
        async with Client(stdio_client(params), mode="legacy") as c:
            await c.send_ping()
            assert starts(log) == 0  # starting serve starts nothing
            names = [t.name for t in (await c.list_tools()).tools]
            assert "sdk.echo" in names and starts(log) == 1

    anyio.run(session)
    assert cache_file(root).exists()


def test_the_cache_is_where_no_sandboxed_command_can_write(tmp_path: Path) -> None:
    """The workspace's own .harness/state (hidden from every sandboxed command), or,
    with a workspace below the root, a folder outside the workspace."""
    top = write_project(tmp_path / "top", {"sdk": {"command": ["x"]}})
    config = harness.load(top).project.config
    assert listing_cache.cache_dir(config) == config.workspace / ".harness/state/upstream"
    root = tmp_path / "root"
    (root / "ws").mkdir(parents=True)
    write_project(root, {"sdk": {"command": ["x"]}}, config='workspace: "ws"\n')
    config = harness.load(root).project.config
    folder = listing_cache.cache_dir(config)
    assert folder is not None and config.workspace not in folder.parents


def test_an_agent_run_offers_upstream_tools_from_the_cache(tmp_path: Path, monkeypatch) -> None:
    """``run_agent`` (``h.run``, ``harness run``) starts only the servers whose tools are
    not cached, so the model is offered every server's tools either way."""
    from harness.testing import FakeModelServer, Reply

    root, log = counted(tmp_path)
    md = root / "harness.md"
    md.write_text(
        md.read_text().replace(
            "---\nA test", "model: {provider: openai, name: m, api_key_env: LAZY_KEY}\n---\nA test"
        )
    )
    monkeypatch.setenv("LAZY_KEY", "k")
    for expected_starts in (1, 1):  # cold: started once to list; warm: not started
        with FakeModelServer("openai", [Reply(text="done")]) as model, harness.load(root) as h:
            assert h.run("hello", base_url=model.base_url).text == "done"
            offered = [t["function"]["name"] for t in model.requests[0].body["tools"]]
        assert "sdk_echo" in offered and "hello" in offered
        assert starts(log) == expected_starts
