"""One distribution name and install lines that work (issue 14 item 6, issue 21 item 3).

Every line that installs harness in the docs is one that works today, from a clone
(`pip install -e '.[EXTRA]'`), from a built wheel (`dist/harness_md-VERSION-...whl`) or
from a git URL at a commit (tests/docs/test_install_refs.py checks the commit), or it
says "once released" (`pip install 'harness-md[mcp]'`).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from click.testing import CliRunner

import harness
from harness.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
RELEASED = re.compile(r"pip install '(harness-md\[[a-z,]+\](?:==[0-9.]+)?)'")
FROM_CLONE = re.compile(r"pip install (?:-c \S+ )?-e '\.\[[a-z,]+\]'")
WHEEL = f"dist/harness_md-{PYPROJECT['version']}-py3-none-any.whl"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_distribution_is_harness_md_and_the_command_harness() -> None:
    assert PYPROJECT["name"] == harness.DISTRIBUTION == "harness-md"
    assert PYPROJECT["version"] == "0.2.0"
    assert PYPROJECT["scripts"] == {"harness": "harness.cli.main:main"}


def test_every_install_line_works_today_or_says_once_released() -> None:
    seen = set()
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        lines = text.splitlines()
        for number, line in enumerate(lines):
            if "harness-md" in line and "pip install" in line and "git+" not in line:
                near = " ".join(lines[max(0, number - 2) : number + 3]).lower()
                assert RELEASED.search(line) and "once" in near and "released" in near, (
                    f"{page.name}:{number + 1}: an install from the package index must say "
                    f"'once released': {line}"
                )
                seen.add("released")
            if FROM_CLONE.search(line):
                seen.add("clone")
            if WHEEL in line:
                seen.add("wheel")
            assert not re.search(r"harness_md-[0-9.]+-py3", line) or WHEEL in line, (
                f"{page.name}:{number + 1}: the wheel of version {PYPROJECT['version']}"
            )
    assert seen == {"released", "clone", "wheel"}, seen


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


def test_version_reports_the_installed_distribution() -> None:
    result = CliRunner().invoke(cli, ["--version"], prog_name="harness")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"harness, version {PYPROJECT['version']}"
