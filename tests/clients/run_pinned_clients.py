"""Check `harness serve` with the clients whose releases pin mcp 1.x (not in CI).

The OpenAI Agents SDK and langchain-mcp-adapters require ``mcp<2``, so they cannot share
the project's environment (mcp 2.x). This script builds their own virtualenv (once, in
~/.cache/harness/mcp1-clients; pinned versions), starts `harness serve --transport http`
with a bearer token on a temporary copy of the serve tests' project, and runs
mcp1_clients.py inside that virtualenv over stdio and HTTP. It prints the findings and
exits 1 if a check fails. A fresh build downloads ~60 packages (about 50 s here), which
is why it is a script run by hand, not a test (see docs/mcp-clients.md).

    .venv/bin/python tests/clients/run_pinned_clients.py
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PINS = ["openai-agents==0.24.0", "langchain-mcp-adapters==0.3.2", "mcp==1.30.0"]
VENV = Path.home() / ".cache" / "harness" / "mcp1-clients"


def client_python() -> str:
    python = VENV / "bin" / "python"
    stamp = VENV / "pins.txt"
    if not (python.exists() and stamp.exists() and stamp.read_text() == "\n".join(PINS)):
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PINS], check=True)
        stamp.write_text("\n".join(PINS))
    return str(python)


def main() -> int:
    sys.path.insert(0, str(HERE.parent / "serve"))
    from serve_helpers import free_port, write_project

    python = client_python()
    with tempfile.TemporaryDirectory() as tmp:
        root = write_project(Path(tmp) / "proj")
        argv = [sys.executable, "-m", "harness.cli.main", "serve", "--root", str(root)]
        port, token = free_port(), "pinned-clients-token-0123456789"
        server = subprocess.Popen(
            [*argv, "--transport", "http", "--port", str(port), "--auth-token-env", "PINNED_TOKEN"],
            cwd=root,
            env={**os.environ, "PINNED_TOKEN": token},
            stderr=subprocess.DEVNULL,
        )
        try:
            for _ in range(600):
                try:
                    socket.create_connection(("127.0.0.1", port), 1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            cfg = {
                "stdio": argv,
                "cwd": str(root),
                "url": f"http://127.0.0.1:{port}/mcp",
                "token": token,
                "env": {"PATH": os.environ.get("PATH", "")},
            }
            done = subprocess.run(
                [python, str(HERE / "mcp1_clients.py"), json.dumps(cfg)],
                capture_output=True,
                text=True,
                timeout=300,
            )
        finally:
            server.terminate()
            server.wait(timeout=10)
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        return 1
    found = json.loads(done.stdout)
    print(json.dumps(found, indent=2))
    ok = True
    for client in ("openai-agents", "langchain-mcp-adapters"):
        for transport in ("stdio", "http"):
            r = found[client].get(transport, {})
            echoed = str(r.get("echo", "")).replace('\\"', '"')
            good = (
                "echo" in r.get("tools", ())
                and '{"echo":"hi"}' in echoed
                and r.get("big_truncated")
            )
            # Expected: langchain's default stdio session is a new server per call, so a
            # ref spilled by one call is gone in the next (memory state backend).
            paging = r.get("page_ok") or (client, transport) == ("langchain-mcp-adapters", "stdio")
            print(
                f"{client:<24} {transport:<5} list+call {'ok' if good else 'FAILED'}, "
                f"read_output {'ok' if r.get('page_ok') else 'not available'}"
            )
            ok = ok and bool(good) and bool(paging)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
