"""A small project served over MCP by the tests in this folder, and client helpers."""

from __future__ import annotations

import os
import socket
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

HARNESS_MD = """\
---
runtime: {isolation: inprocess}
limits: {max_output_bytes: 2048}
---
You are testing the MCP server.
"""

TOOLS = {
    "echo": """\
---
parameters:
  text: {type: string, description: Text to echo back., required: true}
  times: {type: integer, minimum: 1, maximum: 3}
annotations: {title: Echo, read_only: true, idempotent: true}
returns:
  type: object
  properties:
    echo: {type: string}
  required: [echo]
script: |
  def run(args):
      return {"echo": args["text"] * args.get("times", 1)}
---
Echo the text back.
""",
    "add": """\
---
parameters:
  a: {type: integer, required: true}
  b: {type: integer, required: true}
returns: {type: integer}
script: |
  def run(args):
      return args["a"] + args["b"]
---
Add two integers.
""",
    "danger": """\
---
parameters:
  target: {type: string, required: true}
annotations: {destructive: true}
script: |
  def run(args):
      return "destroyed " + args["target"]
---
Destroy something (blocked by the guard hook).
""",
    "slow": """\
---
timeout_ms: 300
script: |
  def run(args):
      n = 0
      for i in range(1000000000):
          n += i
      return n
---
Never finishes in time.
""",
    "big": """\
---
parameters:
  typed: {type: boolean}
script: |
  def run(args):
      return {"data": "x" * 5000, "typed": args.get("typed", False)}
---
Returns more than max_output_bytes.
""",
    "big_typed": """\
---
returns:
  type: object
  properties:
    data: {type: string}
script: |
  def run(args):
      return {"data": "y" * 5000}
---
Returns more than max_output_bytes, with an output schema.
""",
    "send_email": """\
---
loading: deferred
parameters:
  to: {type: string, description: Recipient email address., required: true}
  subject: {type: string, description: Subject line of the message.}
script: |
  def run(args):
      return {"sent": True, "to": args["to"]}
---
Send an email message to a recipient.
""",
    "resize_image": """\
---
loading: deferred
parameters:
  path: {type: string, description: Image file to resize., required: true}
  width: {type: integer, description: New width in pixels.}
script: |
  def run(args):
      return {"resized": args["path"]}
---
Resize a picture (PNG or JPEG) to a new width.
""",
}

HOOKS = {
    "guard": """\
---
event: tool.pre
when: payload["name"] == "danger"
script: |
  def handle(event, payload):
      return block("danger is not allowed here")
---
Blocks the danger tool.
""",
}


def write_project(root: Path) -> Path:
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / ".harness" / "hooks").mkdir(parents=True)
    (root / "harness.md").write_text(HARNESS_MD)
    for name, text in TOOLS.items():
        (root / ".harness" / "tools" / f"{name}.md").write_text(textwrap.dedent(text))
    for name, text in HOOKS.items():
        (root / ".harness" / "hooks" / f"{name}.md").write_text(textwrap.dedent(text))
    return root


def serve_argv(root: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli.main", "serve", "--root", str(root), *extra]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Notifications:
    """Collects server notifications; ``wait_for`` blocks until one of a kind arrives."""

    def __init__(self) -> None:
        self.received: list[Any] = []
        self._event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        self.received.append(message)
        self._event.set()
        self._event = anyio.Event()

    def count(self, method: str) -> int:
        return sum(1 for m in self.received if getattr(m, "method", None) == method)

    async def wait_for(self, method: str, already: int = 0, timeout: float = 30) -> None:
        with anyio.fail_after(timeout):
            while self.count(method) <= already:
                await self._event.wait()


@asynccontextmanager
async def stdio_session(
    root: Path, *extra: str, notes: Notifications | None = None
) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    argv = serve_argv(root, *extra)
    params = StdioServerParameters(
        command=argv[0], args=argv[1:], cwd=str(root), env={"PYTHONPATH": os.pathsep.join(sys.path)}
    )
    errlog = open(root.parent / "serve-stderr.log", "a")  # noqa: SIM115
    try:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, message_handler=notes) as session:
                await session.initialize()
                yield session
    finally:
        errlog.close()


def tool_text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def wait_for_log(path: Path, needle: str, start: int = 0, timeout: float = 30) -> str:
    """Wait until the server's stderr log (from offset ``start``) contains ``needle``."""
    with anyio.fail_after(timeout):
        while True:
            text = path.read_text()[start:] if path.exists() else ""
            if needle in text:
                return text
            await anyio.sleep(0.05)


def stderr_log(root: Path) -> Path:
    return root.parent / "serve-stderr.log"


# The bearer token of every test server started without a token of its own: HTTP
# serving needs one by default (issue 22 item 9), and the clients here send it.
TEST_TOKEN = "serve-test-token-0123456789abcdef"
TEST_AUTH = {"Authorization": f"Bearer {TEST_TOKEN}"}


@asynccontextmanager
async def http_server(
    root: Path, *extra: str, host: str = "127.0.0.1", env: dict[str, str] | None = None
) -> AsyncIterator[str]:
    """Start ``harness serve --transport http`` on a free port; yield its loopback URL.

    Without ``--auth-token-env`` (or ``--no-auth``) in ``extra`` it requires
    :data:`TEST_TOKEN`, which :func:`era_client` and :func:`http_session` send."""
    import subprocess

    if "--auth-token-env" not in extra and "--no-auth" not in extra:
        extra = ("--auth-token-env", "HARNESS_TEST_TOKEN", *extra)
        env = {"HARNESS_TEST_TOKEN": TEST_TOKEN, **(env or {})}
    port = free_port()
    log = stderr_log(root)
    start = len(log.read_text()) if log.exists() else 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})}
    with open(log, "a") as errlog:
        proc = subprocess.Popen(
            serve_argv(root, "--transport", "http", "--port", str(port), "--host", host, *extra),
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errlog,
        )
    try:
        await wait_for_log(log, f":{port}/mcp", start)
        with anyio.fail_after(30):
            while True:
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                except OSError:
                    if proc.poll() is not None:
                        raise RuntimeError(f"server exited: {log.read_text()}") from None
                    await anyio.sleep(0.05)
                    continue
                await stream.aclose()
                break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        assert out == b"", f"the HTTP server wrote to stdout: {out!r}"


@asynccontextmanager
async def http_session(url: str, notes: Notifications | None = None) -> AsyncIterator[Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers=TEST_AUTH, timeout=httpx2.Timeout(30, read=300))
    async with streamable_http_client(url, http_client=http) as (read, write):
        async with ClientSession(read, write, message_handler=notes) as session:
            await session.initialize()
            yield session


MODERN = "2026-07-28"
ERAS = ("legacy", MODERN)

SLEEPER = """\
---
parameters:
  marker: {type: string, required: true}
timeout_ms: 60000
script: |
  def run(args):
      return exec.run("sleep", [args["marker"]], timeout_ms = 60000)
---
Sleeps for as many seconds as the marker says.
"""


def add_sleeper(root: Path) -> None:
    """A tool running `sleep MARKER` without a sandbox, and an audit trail."""
    (root / ".harness" / "tools" / "sleeper.md").write_text(SLEEPER)
    md = (
        (root / "harness.md")
        .read_text()
        .replace(
            "limits: {max_output_bytes: 2048}\n",
            'limits: {max_output_bytes: 2048}\nexec: {sandbox: "off"}\n'
            "audit: {path: .harness/state/audit.jsonl}\n",
        )
    )
    (root / "harness.md").write_text(md)


@asynccontextmanager
async def era_client(
    target: Any,
    mode: str,
    notes: Notifications | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Any]:
    """The SDK's stock ``mcp.Client`` in the given protocol era.

    ``target`` is a project root (stdio: the client starts ``harness serve``) or the URL
    of a running HTTP server, reached with ``headers`` (default: :data:`TEST_AUTH`)."""
    from mcp import Client, StdioServerParameters

    if isinstance(target, Path):
        argv = serve_argv(target)
        server: Any = StdioServerParameters(
            command=argv[0],
            args=argv[1:],
            cwd=str(target),
            env={"PYTHONPATH": os.pathsep.join(sys.path)},
        )
    else:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        server = streamable_http_client(
            target,
            http_client=httpx2.AsyncClient(
                headers=TEST_AUTH if headers is None else headers,
                timeout=httpx2.Timeout(30, read=300),
            ),
        )
    # The modern era as the newest clients reach it: "auto" probes server/discover
    # and adopts 2026-07-28 (a pinned version would skip the server's capabilities).
    async with Client(
        server, mode="auto" if mode == MODERN else mode, message_handler=notes
    ) as client:
        assert (client.protocol_version == MODERN) == (mode == MODERN)
        yield client


def spilled_ref(text: str) -> tuple[str, int]:
    ref = text.split('call read_output(ref="')[1].split('"')[0]
    offset = int(text.split(f'read_output(ref="{ref}", offset=')[1].split(")")[0])
    return ref, offset


def processes_with(marker: str) -> list[int]:
    """Pids whose command line contains ``marker`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmd and "pytest" not in cmd:
            found.append(int(entry))
    return found
