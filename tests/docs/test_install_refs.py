"""Every commit the docs point at is a commit of this repository that has what they use.

docs/ci.md's pre-commit example pins `rev:` to a commit (no release is tagged yet) and
docs/testing.md installs from a git URL at a commit: each SHA must exist here
(`git cat-file -e SHA^{commit}`), and a pre-commit `rev:` must be a commit whose
.pre-commit-hooks.yaml defines every hook id the example uses (issue 21).
"""

from __future__ import annotations

import re
import subprocess

import yaml
from docblocks import ROOT, all_blocks

REPO = "https://github.com/harness-md/harness"


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def pre_commit_examples() -> list[tuple[str, dict]]:
    found = []
    for block in all_blocks():
        if block.lang != "yaml":
            continue
        for doc in yaml.safe_load_all(block.text):
            if isinstance(doc, dict) and "repos" in doc:
                found += [(block.id, repo) for repo in doc["repos"] if repo["repo"] != "local"]
    return found


def test_the_pre_commit_example_pins_a_commit_of_this_repository_with_its_hooks() -> None:
    examples = pre_commit_examples()
    assert [where for where, _ in examples] and all(
        where.startswith("docs/ci.md:") for where, _ in examples
    ), examples
    for where, repo in examples:
        assert repo["repo"] == REPO, where
        rev = str(repo["rev"])
        assert re.fullmatch(r"[0-9a-f]{40}", rev), f"{where}: rev {rev!r} is not a full commit SHA"
        assert git("cat-file", "-e", f"{rev}^{{commit}}").returncode == 0, (
            f"{where}: rev {rev} is not a commit of this repository"
        )
        shown = git("show", f"{rev}:.pre-commit-hooks.yaml")
        assert shown.returncode == 0, shown.stderr
        defined = {hook["id"] for hook in yaml.safe_load(shown.stdout)}
        used = {hook["id"] for hook in repo["hooks"]}
        assert used == {"harness-validate", "harness-test"}, where
        assert used <= defined, f"{where}: {sorted(used - defined)} not defined at {rev}"


def test_every_git_url_in_the_docs_is_this_repository_at_one_of_its_commits() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    urls = [
        (page.name, m)
        for page in pages
        for m in re.finditer(r"git\+(\S+?)@([0-9A-Za-z._-]+)", page.read_text(encoding="utf-8"))
    ]
    assert urls, "expected the git install line of docs/ci.md and docs/testing.md"
    for page, m in urls:
        assert m.group(1) == REPO, (page, m.group(0))
        sha = m.group(2)
        assert re.fullmatch(r"[0-9a-f]{40}", sha), (page, m.group(0))
        assert git("cat-file", "-e", f"{sha}^{{commit}}").returncode == 0, (page, sha)


def test_one_repository_address_everywhere() -> None:
    files = [
        ROOT / "README.md",
        ROOT / "harness" / "starter" / "harness.md",
        *sorted((ROOT / "docs").glob("*.md")),
    ]
    for path in files:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"github\.com/([\w.-]+)/([\w.-]+)", text):
            if m.group(1) in ("actions", "modelcontextprotocol"):
                continue  # GitHub Actions and other projects' pages
            assert m.group(0) == "github.com/harness-md/harness", (path.name, m.group(0))
        assert "OWNER" not in text, path.name
