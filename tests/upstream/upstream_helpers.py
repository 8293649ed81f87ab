"""Helpers: projects declaring real upstream MCP servers (the SDK server beside this
file, and mcp-server-time installed from PyPI with the dev extras)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SDK_SERVER = str(Path(__file__).with_name("sdk_server.py"))
PYTHON = sys.executable
TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))
GIT_SERVER = str(Path(sys.executable).with_name("mcp-server-git"))


def sdk_command() -> list[str]:
    return [PYTHON, SDK_SERVER]


def write_project(
    root: Path, servers: dict[str, dict], *, hooks: dict[str, str] | None = None, config: str = ""
) -> Path:
    """harness.md with ``mcp_servers:`` (JSON is YAML) and optional hook files."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "harness.md").write_text(
        f"---\nmcp_servers: {json.dumps(servers)}\n{config}---\nA test project.\n"
    )
    for name, text in (hooks or {}).items():
        folder = root / ".harness" / "hooks"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.md").write_text(text)
    return root


def server_pids(tag: str) -> list[int]:
    """Host pids of the SDK server processes started with ``tag`` (bwrap and env excluded)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode("utf-8", "replace") for a in argv if a]
        if not words or Path(words[0]).name in ("bwrap", "env"):
            continue
        if SDK_SERVER in words and tag in words:
            out.append(int(entry.name))
    return out


def sdk(tag: object, **settings: object) -> dict[str, object]:
    """The declaration of the SDK server, its processes tagged with ``tag``."""
    return {"command": [PYTHON, SDK_SERVER, "stdio", str(tag)], **settings}


INPROCESS = "runtime: {isolation: inprocess}\n"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_http_server(marker: Path) -> tuple[object, str]:
    """The SDK server over streamable HTTP on a free loopback port: (process, URL)."""
    import socket
    import subprocess
    import time

    port = free_port()
    proc = subprocess.Popen(
        [PYTHON, SDK_SERVER, "http", str(port), str(marker)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode()) from None  # type: ignore[union-attr]
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the HTTP MCP server did not start")
