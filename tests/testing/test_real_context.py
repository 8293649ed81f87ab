"""Real project context in case copies (``include: [.git, .venv]``, issue 25).

A real project in tmp_path: a package, pytest tests, a virtualenv holding pytest,
git history. ``run_tests`` and ``summarize_diff`` run for real (in the sandbox when
bubblewrap works), and no case can change the real ``.git`` or ``.venv``.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
import textwrap
import venv
from importlib.metadata import distribution
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import cli

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}
PYTEST_DISTS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")


_TEMPLATES: dict[str, Path] = {}


def make_venv(root: Path) -> None:
    """A virtualenv at root/.venv with pytest, without network: pytest's files are
    copied from this interpreter's (what `.venv/bin/pip install pytest` would put).
    Made once per process, then copied (its python is a link to the base interpreter)."""
    template = _TEMPLATES.get("venv")
    if template is not None and template.is_dir():
        shutil.copytree(template, root / ".venv", symlinks=True)
        return
    _build_venv(root)
    keep = Path(tempfile.mkdtemp(prefix="harness-venv-template-")) / ".venv"
    shutil.copytree(root / ".venv", keep, symlinks=True)
    _TEMPLATES["venv"] = keep
    atexit.register(shutil.rmtree, keep.parent, True)


def _build_venv(root: Path) -> None:
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root / ".venv")
    site = next((root / ".venv" / "lib").glob("python3*/site-packages"))
    for name in PYTEST_DISTS:
        dist = distribution(name)
        for f in dist.files or ():
            src = Path(str(dist.locate_file(f)))
            if f.parts[0] in ("..", "bin") or not src.is_file():
                continue
            (site / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, site / f)


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, env=GIT_ENV, check=True, capture_output=True)


TOOLS = {
    "run_tests": """\
        ---
        parameters:
          path: {type: string, description: "Test file or folder (default tests)."}
        script: |
          def run(args):
              r = exec.run(".venv/bin/python", ["-m", "pytest", "-q", "-p", "no:cacheprovider",
                                                args.get("path", "tests")], timeout_ms = 60000)
              return {"ok": r["ok"], "passed": " passed" in r["stdout"], "err": r["stderr"]}
        ---
        Run the project's tests with its own interpreter.
        """,
    "summarize_diff": """\
        ---
        parameters:
          base: {type: string, description: "Compare with this commit (default HEAD~1)."}
        script: |
          def run(args):
              r = exec.run("git", ["diff", "--stat", args.get("base", "HEAD~1")])
              if not r["ok"]:
                  fail(r["stderr"])
              return {"stat": r["stdout"].strip().split("\\n")[-1]}
        ---
        Summarize what changed since a commit.
        """,
    "vandal": """\
        ---
        script: |
          def run(args):
              a = exec.run("git", ["commit", "--allow-empty", "-q", "-m", "from a case"])
              b = exec.run("sh", ["-c", "echo x > .git/HEAD; touch .venv/hacked"])
              c = exec.run("git", ["log", "--oneline"])
              return {"commit": a["ok"], "log": c["stdout"]}
        ---
        """,
}

TESTS = """\
    ---
    include: [.git, .venv]
    real: [exec]
    config: {exec: {env: [PATH, GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME,
                          GIT_COMMITTER_EMAIL]}}
    env: {GIT_AUTHOR_NAME: T, GIT_AUTHOR_EMAIL: t@example.com, GIT_COMMITTER_NAME: T,
          GIT_COMMITTER_EMAIL: t@example.com}
    cases:
      - name: the project's tests pass with its own interpreter
        call: run_tests
        expect: {value: {ok: true, passed: true, err: ""}}
      - name: a failing test fails
        files:
          tests/test_broken.py: "def test_broken():\\n    assert 1 == 2\\n"
        call: run_tests
        args: {path: tests/test_broken.py}
        expect: {value: {ok: false}}
      - name: the diff of the last commit
        call: summarize_diff
        expect: {value: {stat: " 1 file changed, 1 insertion(+), 1 deletion(-)"}}
      - name: vandal, a case cannot change the real .git or .venv
        call: vandal
        expect: {ok: true}
    ---
    """


def project(tmp_path: Path, tests: str, mode: str) -> Path:
    root = tmp_path / "proj"
    (root / "calc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "harness.md").write_text(f"---\nruntime: {{isolation: {mode}}}\n---\n")
    (root / "calc" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (root / ".gitignore").write_text(".venv/\n.harness/state/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    (root / "calc" / "__init__.py").write_text("def add(a, b):\n    return b + a\n")
    git(root, "commit", "-q", "-am", "second")
    make_venv(root)
    for folder, items in (("tools", TOOLS), ("tests", {"project": tests})):
        d = root / ".harness" / folder
        d.mkdir(parents=True, exist_ok=True)
        for name, text in items.items():
            (d / f"{name}.md").write_text(textwrap.dedent(text))
    return root


def digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        h.update(str(p.relative_to(path)).encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_run_tests_and_summarize_diff_run_for_real_and_the_real_repo_stays(
    tmp_path: Path, mode: str
) -> None:
    root = project(tmp_path, TESTS, mode)
    before = (digest(root / ".git"), digest(root / ".venv"))
    result = CliRunner().invoke(cli, ["test", "--root", str(root), "-j", "2"])
    assert result.exit_code == 0, result.output
    assert "4 cases: 4 passed" in result.output
    assert (digest(root / ".git"), digest(root / ".venv")) == before
    assert not (root / ".venv" / "hacked").exists()


def test_without_include_the_copies_leave_git_and_venv_out(tmp_path: Path) -> None:
    root = project(
        tmp_path, TESTS.replace("include: [.git, .venv]", "x-include: none"), "inprocess"
    )
    result = CliRunner().invoke(cli, ["test", "--root", str(root)])
    assert result.exit_code == 1
    assert "not found" in result.output and "Not a git repository" in result.output.replace(
        "not a git repository", "Not a git repository"
    )


def test_include_problems_are_clear(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        TESTS.replace("[.git, .venv]", "[.git, ../up, .harness, node_modules]"),
        "inprocess",
    )
    result = CliRunner().invoke(cli, ["validate", "--root", str(root)])
    assert result.exit_code == 1
    assert ".harness/tests/project.md:2" in result.output
    assert 'include: "../up" must be a relative path' in result.output
    assert 'include: ".harness" cannot be included' in result.output
    # A path that does not exist: each case says so.
    (root / ".harness" / "tests" / "project.md").write_text(
        textwrap.dedent(TESTS).replace("[.git, .venv]", "[node_modules]")
    )
    result = CliRunner().invoke(cli, ["test", "--root", str(root)])
    assert 'include: "node_modules" does not exist' in result.output


def test_a_worktree_git_file_is_refused(tmp_path: Path) -> None:
    root = project(tmp_path, TESTS, "inprocess")
    git(root, "worktree", "add", "-q", str(tmp_path / "wt"))
    wt = tmp_path / "wt"
    shutil.copytree(root / ".harness", wt / ".harness")
    shutil.copy(root / "harness.md", wt / "harness.md")
    os.symlink(root / ".venv", wt / ".venv")
    result = CliRunner().invoke(cli, ["test", "--root", str(wt), "-k", "diff"])
    assert result.exit_code == 1
    assert "a file pointing at a git directory elsewhere" in result.output


def test_an_include_behind_a_symlink_never_touches_the_real_repository(tmp_path: Path) -> None:
    root = project(tmp_path, TESTS, "inprocess")
    # Without a sandbox nothing but the copy protects the real repository.
    (root / "harness.md").write_text("---\nexec: {sandbox: off}\n---\n")
    # .git a link to the real repository elsewhere: the case gets a copy, not the link.
    elsewhere = tmp_path / "real-git"
    shutil.move(root / ".git", elsewhere)
    os.symlink(elsewhere, root / ".git")
    # A folder linked out of the project cannot carry an include either.
    outside = tmp_path / "outside"
    (outside / ".git").mkdir(parents=True)
    os.symlink(outside, root / "linked")
    before = digest(elsewhere)
    result = CliRunner().invoke(cli, ["test", "--root", str(root), "-k", "vandal"])
    assert result.exit_code == 0, result.output
    assert digest(elsewhere) == before, result.output
    tests = root / ".harness" / "tests" / "project.md"
    tests.write_text(tests.read_text().replace("[.git, .venv]", "[linked/.git]"))
    result = CliRunner().invoke(cli, ["test", "--root", str(root), "-k", "diff"])
    assert 'include: "linked/.git" leads outside the project through a symlink' in result.output
    assert (outside / ".git").is_dir()
