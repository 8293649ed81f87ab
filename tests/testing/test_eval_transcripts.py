"""``harness eval`` keeps the transcript of a failing case (``--keep``: of every case)
next to the report (issue 25). Real agent loop against the fake model server."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from test_eval import EVALS, REPLIES, write_evals
from test_harness_test import project

from harness.cli.main import cli
from harness.testing import FakeModelServer  # noqa: E402


def _run(root: Path, *args: str) -> tuple[int, str, str]:
    with FakeModelServer("openai", list(REPLIES)) as server:
        r = CliRunner().invoke(
            cli,
            [
                "eval",
                "--root",
                str(root),
                "--model",
                "fake-1",
                "--base-url",
                server.base_url,
                *args,
            ],
            catch_exceptions=False,
        )
    return r.exit_code, r.stdout, r.stderr


def test_a_failing_case_keeps_its_transcript_next_to_the_report(tmp_path: Path) -> None:
    root = project(tmp_path, {})
    write_evals(root, EVALS)
    report = tmp_path / "out" / "evals.xml"
    code, _, err = _run(root, "--format", "junit", "-o", str(report))
    assert code == 1
    folder = tmp_path / "out" / "evals.transcripts"
    kept = sorted(p.name for p in folder.iterdir())
    assert kept == ["refuses-prod.json"]  # the passing case keeps none
    doc = json.loads((folder / "refuses-prod.json").read_text())
    assert doc["case"] == "refuses prod" and doc["passed"] is False
    assert doc["failures"] == [{"line": 18, "message": "tokens_under: used 30 tokens, not under 5"}]
    assert doc["turns"] == ["Deploy to prod"]
    assert [r["tool"] for r in doc["results"]] == ["deploy"]
    assert doc["results"][0]["arguments"] == {"target": "prod"}
    assert doc["results"][0]["is_error"] is True
    assert any(m.get("role") == "user" for m in doc["messages"])
    assert f"transcript: {folder / 'refuses-prod.json'}" in err


def test_keep_keeps_every_transcript(tmp_path: Path) -> None:
    root = project(tmp_path, {})
    write_evals(root, EVALS)
    code, _, err = _run(root, "--keep")
    assert code == 1
    folder = root / ".harness" / "state" / "evals"
    assert sorted(p.name for p in folder.iterdir()) == [
        "deploys-to-staging.json",
        "refuses-prod.json",
    ]
    doc = json.loads((folder / "deploys-to-staging.json").read_text())
    assert doc["passed"] is True and doc["response"] == "Deployed."
