"""Two `harness serve --transport http` replicas sharing one Redis (state.backend: redis):
a ref spilled through one is read through the other, and cache values and metrics are
shared."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from serve_helpers import ERAS, era_client, http_server, spilled_ref, tool_text

TOKEN = "replica-token-0123456789abcdef"

COUNTER = """\
---
parameters:
  step: {type: integer, required: true}
returns:
  type: object
  properties:
    total: {type: integer}
    calls: {type: integer}
    seen: {type: boolean}
script: |
  def run(args):
      seen = cache.has("total")
      total = cache.get("total", 0) + args["step"]
      cache.set("total", total)
      return {"total": total, "calls": metrics.incr("counter.calls"), "seen": seen}
---
Adds step to a running total kept in the cache.
"""


def use_redis(project: Path, url: str) -> None:
    md = project / "harness.md"
    md.write_text(
        md.read_text().replace(
            "limits: {max_output_bytes: 2048}\n",
            f'limits: {{max_output_bytes: 2048}}\nstate: {{backend: redis, url: "{url}", '
            f'namespace: "{project.name}-{id(project)}"}}\n',
        )
    )
    (project / ".harness" / "tools" / "counter.md").write_text(COUNTER)


@pytest.mark.parametrize("mode", ERAS)
def test_two_replicas_share_refs_and_cache(project: Path, redis_url: str, mode: str) -> None:
    use_redis(project, redis_url)
    env = {"REPLICA_TOKEN": TOKEN}
    auth = {"Authorization": f"Bearer {TOKEN}"}

    async def go() -> None:
        async with (
            http_server(project, "--auth-token-env", "REPLICA_TOKEN", env=env) as one,
            http_server(project, "--auth-token-env", "REPLICA_TOKEN", env=env) as two,
        ):
            assert one != two
            async with era_client(one, mode, headers=auth) as a:
                big = await a.call_tool("big", {})
                ref, offset = spilled_ref(tool_text(big))
                first = await a.call_tool("counter", {"step": 2})
                assert first.structured_content == {"total": 2, "calls": 1, "seen": False}
            async with era_client(two, mode, headers=auth) as b:
                page = await b.call_tool("read_output", {"ref": ref, "offset": offset})
                assert page.is_error is False, tool_text(page)
                assert "xxxx" in tool_text(page)
                second = await b.call_tool("counter", {"step": 3})
                assert second.structured_content == {"total": 5, "calls": 2, "seen": True}

    anyio.run(go)


def test_replica_refuses_to_start_without_its_redis(project: Path) -> None:
    import os
    import subprocess
    import sys

    from serve_helpers import serve_argv

    use_redis(project, "redis://127.0.0.1:1/0")
    done = subprocess.run(
        serve_argv(project, "--transport", "http", "--port", "0"),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 1
    assert "cannot reach Redis at redis://127.0.0.1:1/0" in done.stderr
    assert "Traceback" not in done.stderr
