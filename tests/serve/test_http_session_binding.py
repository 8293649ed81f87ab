"""Issue 22 item 4: an HTTP session belongs to the identity that opened it.

With token B and A's ``Mcp-Session-Id`` a client used to reach A's session: its
spilled outputs (``read_output``) and its cache. A session id presented with another
identity's token is answered exactly like an id that never existed (no hint that it
does), and A's session keeps working.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
from serve_helpers import http_server, spilled_ref

TOKEN_A = "bind-A-0123456789abcdefghij"
TOKEN_B = "bind-B-0123456789abcdefghij"
ENV = {"BIND_TOKENS": f"{TOKEN_A},{TOKEN_B}"}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VERSION = "2025-06-18"

CACHE_TOOL = """\
---
parameters:
  value: {type: string}
script: |
  def run(args):
      if "value" in args:
          cache.set("secret", args["value"])
      return {"secret": cache.get("secret", "")}
---
Keeps a value in the session's cache; without one, returns what is there.
"""


def auth(token: str, sid: str | None = None) -> dict[str, str]:
    out = {**HEADERS, "Authorization": f"Bearer {token}", "Mcp-Protocol-Version": VERSION}
    if sid is not None:
        out["Mcp-Session-Id"] = sid
    return out


def rpc_body(res: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response (plain JSON or one SSE event)."""
    if res.headers.get("content-type", "").startswith("text/event-stream"):
        for line in res.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return dict(json.loads(line[5:]))
        raise AssertionError(f"no data event in {res.text!r}")
    return dict(res.json())


async def open_session(raw: httpx.AsyncClient, url: str, token: str) -> str:
    init = await raw.post(
        url,
        headers=auth(token),
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": VERSION,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
    )
    assert init.status_code == 200, init.text
    sid = init.headers["mcp-session-id"]
    done = await raw.post(
        url,
        headers=auth(token, sid),
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
    )
    assert done.status_code == 202
    return sid


def call(name: str, arguments: dict[str, Any], id: int = 7) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def text_of(message: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in message["result"]["content"])


def test_another_identity_cannot_use_a_session_id(project: Path) -> None:
    (project / ".harness" / "tools" / "keep.md").write_text(CACHE_TOOL)

    async def go() -> None:
        async with http_server(project, "--auth-token-env", "BIND_TOKENS", env=ENV) as url:
            async with httpx.AsyncClient(timeout=30) as raw:
                sid = await open_session(raw, url, TOKEN_A)
                big = rpc_body(
                    await raw.post(url, headers=auth(TOKEN_A, sid), json=call("big", {}))
                )
                ref, offset = spilled_ref(text_of(big))
                kept = await raw.post(
                    url, headers=auth(TOKEN_A, sid), json=call("keep", {"value": "A-only"})
                )
                assert "A-only" in text_of(rpc_body(kept))

                # B presents A's session id: the output ref and the cache stay A's.
                stolen_ref = await raw.post(
                    url,
                    headers=auth(TOKEN_B, sid),
                    json=call("read_output", {"ref": ref, "offset": offset}),
                )
                stolen_cache = await raw.post(
                    url, headers=auth(TOKEN_B, sid), json=call("keep", {})
                )
                assert "x" * 100 not in stolen_ref.text
                assert "A-only" not in stolen_cache.text
                # ... answered exactly as a session id that does not exist.
                unknown = await raw.post(
                    url, headers=auth(TOKEN_B, uuid.uuid4().hex), json=call("keep", {})
                )
                assert unknown.status_code == 404
                for res in (stolen_ref, stolen_cache):
                    assert (res.status_code, res.content) == (unknown.status_code, unknown.content)
                # B cannot end A's session, nor open its stream.
                gone = await raw.delete(url, headers=auth(TOKEN_B, sid))
                assert gone.status_code == 404
                async with raw.stream("GET", url, headers=auth(TOKEN_B, sid)) as stream:
                    assert stream.status_code == 404

                # A's session is intact and still A's.
                again = await raw.post(
                    url,
                    headers=auth(TOKEN_A, sid),
                    json=call("read_output", {"ref": ref, "offset": offset}, id=8),
                )
                assert "xxxx" in text_of(rpc_body(again))
                mine = await raw.post(url, headers=auth(TOKEN_A, sid), json=call("keep", {}, id=9))
                assert "A-only" in text_of(rpc_body(mine))

    anyio.run(go)
