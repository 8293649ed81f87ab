"""This repository's own .harness/tests/ cover every starter tool and both starter hooks,
and `harness init` writes the same test file into a new project, where it passes."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from harness.cli.main import cli
from harness.starter import files
from harness.testing.coverage import measure
from harness.testing.runner import Runner

REPO = Path(__file__).resolve().parents[2]


def test_repository_test_files_pass_and_cover_everything() -> None:
    with Runner(REPO) as runner:
        found, problems = runner.collect()
        assert not problems
        result = runner.run(found, jobs=2)
        failures = [f.render() for r in result.results for f in r.failures]
        assert result.ok, "\n".join(failures)
        cov = measure(runner.project, result.results)
    assert cov.complete, cov.lines()


def test_init_writes_a_passing_test_file(tmp_path: Path) -> None:
    assert ".harness/tests/starter.md" in files()
    result = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / ".harness/tests/starter.md").read_text() == (
        REPO / ".harness/tests/starter.md"
    ).read_text()
    result = CliRunner().invoke(cli, ["test", "--root", str(tmp_path), "--coverage"])
    assert result.exit_code == 0, result.output
    assert "Coverage: every tool and hook has a case" in result.output
