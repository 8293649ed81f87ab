"""``start_mode``: run a module's exec.run tests both ways a sandbox can start.

- ``cold``: prepared sandboxes off; every command starts its own bubblewrap.
- ``warm``: before each command, the same plan runs ``true`` once, which prepares a
  sandbox; the command then runs in that prepared sandbox (runtime/prewarm.py). The
  security tests must hold either way.

A module opts in with ``pytestmark = pytest.mark.usefixtures("start_mode")`` and
calls ``run`` through its module global (the fixture replaces it). In ``warm`` mode
every sandboxed command that returns must have run in a prepared sandbox, unless
the test is marked ``cold_ok`` (it changes the workspace under the prepared one on
purpose, which must make the command start cold).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest
from prewarm_support import prepared_sandboxes_work

from harness.runtime import prewarm
from harness.runtime.builtins import proc


def _wait_until_prepared(timeout: float = 10.0) -> None:
    """Until no sandbox is being started and each prepared one is set up (its stub has
    printed its byte), or ``timeout``; the call under test then reports what it found."""
    from harness.runtime.wire import readable

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with prewarm._lock:
            waiting = [p for q in prewarm._ready.values() for p in q]
            if not prewarm._pending and all(
                readable(p.proc.stdout.fileno(), 0) for p in waiting if p.proc.stdout is not None
            ):
                return
        time.sleep(0.005)


@pytest.fixture(params=["cold", "warm"])
def start_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    prewarm.discard_all()
    if request.param == "cold":
        monkeypatch.setattr(prewarm, "ENABLED", False)
        yield "cold"
        return
    why = prepared_sandboxes_work()
    if why is not None:
        pytest.skip(why)
    real = proc.run
    real_popen = proc.subprocess.Popen
    state = {"in_call": False, "cold": False}
    missed: list[str] = []

    class Recording(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, argv: Any, *a: Any, **kw: Any) -> None:
            if state["in_call"] and "--die-with-parent" in argv and "harness-stub" not in argv:
                state["cold"] = True  # a sandboxed command started its own bubblewrap
            super().__init__(argv, *a, **kw)

    def warm_run(ctx: Any, cmd: Any, args: Any = (), *a: Any, **kw: Any) -> Any:
        # Prepares a sandbox for this plan (allowed_commands is not part of a plan).
        config = ctx.config
        primer = dataclasses.replace(
            ctx,
            config=dataclasses.replace(
                config, exec=dataclasses.replace(config.exec, allowed_commands=())
            ),
        )
        try:
            real(primer, "true")
        except Exception:  # noqa: BLE001 - the call under test reports it
            pass
        # The sandbox is prepared in the background; prewarm.take waits only 0.1 s for
        # one being started, and prewarm.start up to 2 s for its set-up: on a busy
        # machine (other test processes) that can take longer, and the command would
        # start cold. Wait until it is set up, as test_prewarm.prime does.
        _wait_until_prepared()
        state["in_call"], state["cold"] = True, False
        try:
            return real(ctx, cmd, args, *a, **kw)
        finally:
            state["in_call"] = False
            if state["cold"]:
                missed.append(f"{cmd} {args}")

    monkeypatch.setattr(proc.subprocess, "Popen", Recording)
    monkeypatch.setattr(request.module, "run", warm_run)
    yield "warm"
    prewarm.discard_all()
    if request.node.get_closest_marker("cold_ok") is None:
        assert not missed, f"started cold, not in the prepared sandbox: {missed}"
