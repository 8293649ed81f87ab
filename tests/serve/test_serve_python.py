"""Python tools served over MCP (issue 25 item 8): ``harness serve --python module:attr``
and ``harness.serve(h)``, driven by the official MCP client over stdio, through the
same pipeline as file tools (the project's hooks apply to Python tools)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from serve_helpers import tool_text

from harness.cli.main import cli

MODULE = '''
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import harness

h = harness.load(Path(__file__).parent)


@dataclass
class Point:
    x: float
    y: float = 0.0


@h.tool(name="geo.norm")
def norm(p: Point, scale: Annotated[float, "Multiplies the result"] = 1.0) -> Point:
    """The point scaled, as a point."""
    return Point(x=p.x * scale, y=p.y * scale)


@h.tool
def py_danger(target: str) -> str:
    """Blocked by the project's guard hook."""
    return "destroyed " + target


def make() -> harness.Harness:
    return h
'''

GUARD = """\
---
event: tool.pre
when: payload["name"] == "py_danger"
script: |
  def handle(event, payload):
      return block("py_danger is not allowed here")
---
"""

ECHO = """\
---
parameters:
  text: {type: string, required: true}
script: |
  def run(args):
      return args["text"]
---
Echo the text.
"""


def _project(root: Path) -> Path:
    (root / ".harness" / "hooks").mkdir(parents=True)
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / "harness.md").write_text("---\nruntime: {isolation: inprocess}\n---\nPython tools.\n")
    (root / ".harness" / "hooks" / "guard.md").write_text(GUARD)
    (root / ".harness" / "tools" / "echo.md").write_text(ECHO)
    (root / "my_tools.py").write_text(textwrap.dedent(MODULE))
    return root


@asynccontextmanager
async def _session(root: Path, argv: list[str]) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=argv[0],
        args=argv[1:],
        cwd=str(root),
        env={"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    with open(root / "serve-stderr.log", "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def _check(root: Path, argv: list[str]) -> None:
    async with _session(root, argv) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert {"geo.norm", "py_danger", "echo"} <= set(tools)
        norm = tools["geo.norm"]
        assert norm.description == "The point scaled, as a point."
        p = norm.input_schema["properties"]["p"]
        assert p["type"] == "object" and p["required"] == ["x"]
        assert norm.input_schema["properties"]["scale"]["description"] == "Multiplies the result"
        assert norm.output_schema is not None and norm.output_schema["title"] == "Point"
        done = await s.call_tool("geo.norm", {"p": {"x": 1.5, "y": 2}, "scale": 2})
        assert not done.is_error, tool_text(done)
        assert done.structured_content == {"x": 3.0, "y": 4.0}
        bad = await s.call_tool("geo.norm", {"p": {"y": 2}})
        assert bad.is_error and '$.p.x: "x" is a required property' in tool_text(bad)
        blocked = await s.call_tool("py_danger", {"target": "prod"})
        assert blocked.is_error
        assert "py_danger is not allowed here" in tool_text(blocked)
        echoed = await s.call_tool("echo", {"text": "hi"})
        assert tool_text(echoed) == "hi"


def test_cli_serves_the_python_tools_of_a_module(tmp_path: Path) -> None:
    root = _project(tmp_path / "proj")
    argv = [sys.executable, "-m", "harness.cli.main", "serve", "--python", "my_tools:h"]
    anyio.run(_check, root, argv)
    factory = [sys.executable, "-m", "harness.cli.main", "serve", "--python", "my_tools:make"]
    anyio.run(_check, root, factory)


def test_python_api_serves_a_harness(tmp_path: Path) -> None:
    root = _project(tmp_path / "proj")
    (root / "serve_it.py").write_text(
        "import harness\nimport my_tools\n\nharness.serve(my_tools.h)\n"
    )
    anyio.run(_check, root, [sys.executable, str(root / "serve_it.py")])


@pytest.mark.parametrize(
    ("target", "extra", "words"),
    [
        ("my_tools", (), "write MODULE:ATTRIBUTE"),
        ("no_such_module:h", (), "cannot import no_such_module"),
        ("my_tools:nope", (), "module my_tools has no attribute nope"),
        ("my_tools:Point", (), '"my_tools:Point" is type, not a harness.Harness'),
        ("my_tools:h", ("--watch",), "--watch reloads the tools from the files"),
    ],
)
def test_cli_says_what_is_wrong_with_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, extra: tuple[str, ...], words: str
) -> None:
    root = _project(tmp_path / "proj")
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("my_tools",):
        monkeypatch.delitem(sys.modules, name, raising=False)
    result = CliRunner().invoke(cli, ["serve", "--python", target, *extra])
    assert result.exit_code == 2, result.output
    assert words in result.output


def test_serving_a_non_harness_is_a_usage_error() -> None:
    import harness
    from harness.errors import UsageError

    with pytest.raises(UsageError, match="harness.serve needs a harness.Harness"):
        harness.serve(object())


def test_print_in_a_python_tool_never_reaches_the_protocol_stream(tmp_path: Path) -> None:
    """A Python tool's print() under a client that does not set PYTHONUNBUFFERED (the
    SDK's stdio client, Claude Desktop): the text goes to stderr, never after the
    replies on stdout (buffered, it was flushed onto fd 1 once the server put fd 1
    back at exit)."""
    root = _project(tmp_path)
    (root / "my_tools.py").write_text(
        textwrap.dedent(MODULE) + "\n\n@h.tool\ndef add(a: int, b: int) -> int:\n"
        '    """Add."""\n    print("adding", a, b)\n    return a + b\n'
    )
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 2, "b": 3}},
        },
    ]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    argv = [sys.executable, "-m", "harness.cli.main", "serve", "--python", "my_tools:h"]
    proc = subprocess.Popen(
        argv,
        cwd=root,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    for msg in lines:
        proc.stdin.write((json.dumps(msg) + "\n").encode())
    proc.stdin.flush()
    replies = [json.loads(proc.stdout.readline()) for _ in range(2)]  # initialize, call
    assert replies[1]["id"] == 2 and not replies[1]["result"].get("isError"), replies
    out, err = proc.communicate(timeout=120)
    assert out.strip() == b"", out  # nothing after the replies
    assert b"adding 2 3" in err
