"""Second attack review: a sandboxed command cannot unmask a secret by flooding the
workspace. Planting more than ``MASK_MAX`` sensitive-named files, or more than
``MASK_SCAN_MAX_ENTRIES`` entries, used to push a secret the previous command could not
read out of the masks. Entries harness has seen keep their place: they are masked
first, in the order harness first saw them, even when a later scan overflows."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.config import Config
from harness.runtime import sandbox
from harness.runtime.builtins.proc import run
from harness.runtime.context import CallContext

_bwrap, _flags, _why = sandbox.status()
# bubblewrap is a dependency: tests/conftest.py fails the run when it is unusable.
pytestmark = [pytest.mark.usefixtures("start_mode")]


def make_ctx(ws: Path) -> CallContext:
    config = Config(root=ws, workspace=ws)
    config = dataclasses.replace(config, exec=dataclasses.replace(config.exec, sandbox="required"))
    return CallContext(config=config, log=lambda *a: None)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "deep" / "a").mkdir(parents=True)
    (ws / "harness.md").write_text("---\n---\n")
    (ws / "deep" / "a" / ".env").write_text("TOPSECRET\n")
    return ws


def test_planting_many_sensitive_files_does_not_unmask_a_secret(ws: Path) -> None:
    assert run(make_ctx(ws), "cat", ["deep/a/.env"])["stdout"] == ""
    flood = run(
        make_ctx(ws),
        "sh",
        ["-c", f"for i in $(seq {sandbox.MASK_MAX + 6}); do touch x$i.pem; done"],
    )
    assert flood["ok"], flood["stderr"]
    r = run(make_ctx(ws), "cat", ["deep/a/.env"])
    assert "TOPSECRET" not in r["stdout"] and not r["ok"]


def test_flooding_past_the_scan_bound_does_not_unmask_a_secret(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "MASK_SCAN_MAX_ENTRIES", 30)
    assert run(make_ctx(ws), "cat", ["deep/a/.env"])["stdout"] == ""
    flood = run(make_ctx(ws), "sh", ["-c", "for i in $(seq 40); do touch f$i; done"])
    assert flood["ok"], flood["stderr"]
    r = run(make_ctx(ws), "cat", ["deep/a/.env"])
    assert "TOPSECRET" not in r["stdout"] and not r["ok"]


def test_a_secret_removed_meanwhile_is_not_masked_any_more(ws: Path) -> None:
    assert run(make_ctx(ws), "cat", ["deep/a/.env"])["stdout"] == ""
    (ws / "deep" / "a" / ".env").unlink()
    masks = sandbox.sensitive_masks(str(ws))
    assert "deep/a/.env" not in masks.files
