"""close() never waits for scripts in flight; host-side hooks run under the same limits."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from core_samples import write_project

import harness
from harness import ToolCall

SLEEPER = """
---
script: |
  def run(args):
      return exec.run("sleep", ["20"], timeout_ms=25000)["exit_code"]
---
Sleeps.
"""


def process_project(tmp_path: Path, **kw: object) -> Path:
    root = write_project(tmp_path, **kw)  # type: ignore[arg-type]
    text = (root / "harness.md").read_text().replace("isolation: inprocess", "isolation: process")
    (root / "harness.md").write_text(text)
    return root


def test_close_does_not_wait_for_call_many_in_flight(tmp_path: Path) -> None:
    root = process_project(tmp_path, tools={"sleeper": SLEEPER}, config="exec: {sandbox: off}\n")
    h = harness.load(root)
    results: list[harness.ToolResult] = []
    t = threading.Thread(
        target=lambda: results.extend(
            h.call_many([ToolCall(id=str(i), name="sleeper") for i in range(2)])
        )
    )
    t.start()
    time.sleep(1.5)  # both calls are sleeping inside their workers
    start = time.monotonic()
    h.close()
    t.join(timeout=15)
    assert not t.is_alive()
    assert time.monotonic() - start < 10  # the sleeps had ~18 s left
    assert [r.is_error for r in results] == [True, True]
    assert all("closed" in (r.error or "") or "crashed" in (r.error or "") for r in results)


def test_registration_hooks_run_under_the_memory_limit(tmp_path: Path) -> None:
    root = process_project(
        tmp_path,
        tools={
            "register": """
        ---
        script: |
          def run(args):
              return meta.tool_register("double", "d", {}, "def run(args):\\n    return 2\\n")
        ---
        Registers.
    """
        },
        hooks={
            "bomb": """
        ---
        event: meta.tool_register
        script: |
          def handle(event, payload):
              s = "x" * (1500000000 + len(payload["name"]))
              return allow()
        ---
        A memory bomb.
    """
        },
        config="meta: {enabled: true}\n",
    )
    with harness.load(root) as h, h.session() as s:
        r = s.call("register", {})
        assert r.is_error
        assert 'hook "bomb" failed: exceeded its memory limit (512 MB)' in (r.error or "")
        assert s.call("double", {}).is_error  # not registered
