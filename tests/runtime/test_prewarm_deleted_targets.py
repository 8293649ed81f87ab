"""A prepared sandbox never brings back a file the user deleted.

After a sandboxed command, the next sandbox is prepared in the background with the
same plan, masks included. bubblewrap creates a missing mount target on the host
(an empty 0444 file, through the workspace bind), so a ``.env`` deleted between the
plan and the set-up used to come back (29 times in 30 here). Now a plan whose targets
are gone is not prepared, and a file bubblewrap made for a target deleted during the
set-up is taken back (runtime/prewarm.py: ``_targets``, ``_undo_created``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.config import Config
from harness.runtime import prewarm
from harness.runtime.builtins.proc import run
from harness.runtime.context import CallContext


def make_ctx(ws: Path) -> CallContext:
    config = Config(root=ws, workspace=ws)
    config = dataclasses.replace(config, exec=dataclasses.replace(config.exec, sandbox="required"))
    return CallContext(config=config, log=lambda *a: None)


def settle() -> None:
    """Wait until no prepared sandbox is being started (set-up and its check done)."""
    with prewarm._cond:
        assert prewarm._cond.wait_for(
            lambda: not prewarm._pending and prewarm._starting == 0, timeout=30
        )


def test_a_deleted_secret_is_not_brought_back(tmp_path: Path) -> None:
    for i in range(12):
        ws = tmp_path / f"ws{i}"
        (ws / "deep" / "a").mkdir(parents=True)
        (ws / "harness.md").write_text("---\n---\n")
        secret = ws / "deep" / "a" / ".env"
        secret.write_text("TOPSECRET\n")
        ctx = make_ctx(ws)
        try:
            assert run(ctx, "true")["ok"]
            r = run(ctx, "cat", ["deep/a/.env"])
            assert "TOPSECRET" not in r["stdout"]
            secret.unlink()  # while the next sandbox is being prepared
            settle()
            assert not secret.exists(), f"round {i}: {secret.stat()}"
            # the next command plans afresh: nothing to mask, nothing made
            assert run(ctx, "ls", ["-a", "deep/a"])["stdout"].split() == [".", ".."]
            settle()
            assert not secret.exists()
        finally:
            prewarm.discard_all()
    assert prewarm.ENABLED  # the prepared path ran (HARNESS_PREWARM=0 would skip it)


def test_a_users_own_empty_file_is_kept(tmp_path: Path) -> None:
    """Only bubblewrap's file is taken back: an empty file the user makes after the
    deletion (mode 0644 here) stays, and a prepared sandbox does not mask it stale."""
    ws = tmp_path / "ws"
    (ws / "deep" / "a").mkdir(parents=True)
    (ws / "harness.md").write_text("---\n---\n")
    secret = ws / "deep" / "a" / ".env"
    secret.write_text("TOPSECRET\n")
    ctx = make_ctx(ws)
    try:
        assert run(ctx, "true")["ok"]
        settle()
        secret.unlink()
        secret.write_text("")
        secret.chmod(0o644)
        settle()
        r = run(ctx, "cat", ["deep/a/.env"])
        settle()
        assert secret.exists() and secret.stat().st_mode & 0o777 == 0o644
        assert r["stdout"] == ""
    finally:
        prewarm.discard_all()
