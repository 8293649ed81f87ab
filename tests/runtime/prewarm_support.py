"""Shared by tests/runtime/conftest.py and test_prewarm.py."""

from __future__ import annotations

import dataclasses
import functools
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.config import Config, ExecConfig
from harness.runtime import prewarm, sandbox
from harness.runtime.builtins import proc
from harness.runtime.context import CallContext


@functools.lru_cache(maxsize=1)
def prepared_sandboxes_work() -> str | None:
    """None if a command can run in a prepared sandbox here, else why not (no dash, no
    usable bubblewrap, /proc/PID/root of the sandbox not readable as this user...)."""
    if prewarm.tools() is None:
        return "no dash under /usr: every command starts cold"
    if sandbox.status()[1] is None:
        return "bubblewrap unusable here"
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        ctx = CallContext(
            config=dataclasses.replace(
                Config(root=ws, workspace=ws), exec=ExecConfig(sandbox="required")
            )
        )
        used = []
        real = prewarm.start

        def start(*a: Any) -> bool:
            ok = real(*a)
            used.append(ok)
            return ok

        prewarm.start = start  # type: ignore[assignment]
        try:
            proc.run(ctx, "true")
            time.sleep(0.3)
            proc.run(ctx, "true")
        finally:
            prewarm.start = real  # type: ignore[assignment]
            prewarm.discard_all()
    return None if any(used) else "a prepared sandbox could not be verified here"
