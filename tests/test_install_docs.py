"""One distribution name, one install line, one release tag (issue 14, item 6)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from click.testing import CliRunner

import harness
from harness.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
INSTALL = "pip install 'harness-md[mcp]'"
DOCS = ("README.md", "docs/getting-started.md", "docs/ci.md")


def test_the_distribution_is_harness_md_and_the_command_harness() -> None:
    assert PYPROJECT["name"] == harness.DISTRIBUTION == "harness-md"
    assert PYPROJECT["version"] == "0.2.0"
    assert PYPROJECT["scripts"] == {"harness": "harness.cli.main:main"}


def test_readme_getting_started_and_ci_give_the_same_install_line() -> None:
    for rel in DOCS:
        assert INSTALL in (ROOT / rel).read_text(encoding="utf-8"), rel


def test_no_doc_installs_the_unrelated_harness_distribution() -> None:
    # "harness" on the package index is someone else's project.
    bad = re.compile(r"pip install +(?:-U +)?['\"]?harness(?:\[|['\"]|\s|$)")
    for path in [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "harness").rglob("*.py")),
    ]:
        text = path.read_text(encoding="utf-8")
        assert not bad.search(text), (path, bad.search(text))


def test_the_pre_commit_example_uses_the_release_tag() -> None:
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    assert f"rev: v{PYPROJECT['version']}" in text


def test_version_reports_the_installed_distribution() -> None:
    result = CliRunner().invoke(cli, ["--version"], prog_name="harness")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"harness, version {PYPROJECT['version']}"
