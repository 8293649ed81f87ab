"""Issue 22 item 12: a ``harness test`` case never writes outside its copy.

``config: {audit: {path: ...}}`` in a case wrote the audit trail wherever it pointed (an
absolute path, ``..``, or a symbolic link in the workspace leading out). Every
path-valued setting a case can change is checked against the case's copy: validate
refuses what it can see in the file (as it refuses ``workspace``), and the runner
refuses what only the copy shows (a link), or what harness.md brings (an absolute audit
path is fine for a real run, never for a test case). A check over ``Config`` makes every
new path-valued setting say whether it is written, so none can skip this.
"""

from __future__ import annotations

import dataclasses
import os
import textwrap
import typing
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.config import Config

TOOL = """\
---
script: |
  def run(args):
      return "ran"
---
Runs.
"""


def case_file(config: str) -> str:
    return textwrap.dedent(
        f"""\
        ---
        cases:
          - name: writes its audit trail
            config: {config}
            call: t
            expect: {{ok: true}}
        ---
        """
    )


def project(root: Path, config: str, harness_md: str = "") -> Path:
    for kind in ("tools", "tests"):
        (root / ".harness" / kind).mkdir(parents=True, exist_ok=True)
    (root / ".harness" / "tools" / "t.md").write_text(TOOL)
    (root / ".harness" / "tests" / "audit.md").write_text(case_file(config))
    (root / "harness.md").write_text(
        "---\nruntime: {isolation: inprocess}\n" + harness_md + "---\nPrompt.\n"
    )
    return root


def cli_run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize("kind", ["absolute", "dotdot"])
def test_a_case_audit_path_outside_the_copy_is_refused(tmp_path: Path, kind: str) -> None:
    outside = tmp_path / "stolen" / "audit.jsonl"
    value = str(outside) if kind == "absolute" else "../../../../../../../../" + str(outside)
    root = project(tmp_path / "proj", f"{{audit: {{path: {value!r}}}}}".replace("'", '"'))
    code, out = cli_run("validate", "--root", str(root))
    assert code == 1, out
    assert ".harness/tests/audit.md:4:" in out, out
    assert "audit.path" in out and "outside" in out and "case copy" in out, out
    code, out = cli_run("test", "--root", str(root))
    assert code != 0, out
    assert "audit.path" in out, out
    assert not outside.exists()
    assert not (tmp_path / "stolen").exists()


def test_a_link_in_the_workspace_cannot_lead_the_audit_trail_out(tmp_path: Path) -> None:
    outside = tmp_path / "stolen"
    outside.mkdir()
    root = project(tmp_path / "proj", '{audit: {path: "out/audit.jsonl"}}')
    os.symlink(outside, root / "out")
    code, out = cli_run("test", "--root", str(root))
    assert code != 0, out
    assert "audit.path" in out and "outside the case copy" in out, out
    assert list(outside.iterdir()) == []


def test_harness_md_audit_path_outside_is_never_written_by_a_case(tmp_path: Path) -> None:
    """Fine for a real run; a test case must not append to the production trail."""
    outside = tmp_path / "var" / "audit.jsonl"
    root = project(tmp_path / "proj", "{}", harness_md=f'audit: {{path: "{outside}"}}\n')
    code, out = cli_run("validate", "--root", str(root))
    assert code == 0, out
    code, out = cli_run("test", "--root", str(root))
    assert code != 0 and "audit.path" in out and "harness.md" in out, out
    assert not outside.exists()
    # A case that sets its own audit path inside the copy runs.
    root = project(tmp_path / "proj", "{audit: {path: .harness/state/audit.jsonl}}")
    code, out = cli_run("test", "--root", str(root))
    assert code == 0, out
    assert not outside.exists()


def test_an_audit_path_inside_the_copy_runs(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", '{audit: {path: "logs/audit.jsonl"}}')
    code, out = cli_run("test", "--root", str(root))
    assert code == 0, out
    assert not (root / "logs").exists()  # written in the copy, not the real root


PATHLIKE = ("path", "dir", "file", "workspace", "mounts", "url", "root", "protected")


def _fields(cls: type, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            out.extend(_fields(typing.cast(type, hint), (*prefix, f.name)))
        else:
            out.append(((*prefix, f.name), hint))
    return out


def test_every_path_valued_setting_is_classified() -> None:
    """A new setting that names a place (a path, a directory, a URL...) must say whether
    a case writes there (then it is checked against the copy) or not, and why."""
    from harness.testing import paths as case_paths

    classified = set(case_paths.WRITTEN) | set(case_paths.NOT_WRITTEN)
    for name, hint in _fields(Config):
        pathlike = hint is Path or "Path" in str(hint) or any(w in name[-1] for w in PATHLIKE)
        if pathlike:
            assert name in classified, (
                f"Config.{'.'.join(name)}: add it to harness/testing/paths.py"
            )
    for name in classified:
        assert name in {n for n, _ in _fields(Config)}, name


def test_an_eval_case_audit_path_outside_is_refused_by_validate(tmp_path: Path) -> None:
    root = project(tmp_path / "proj", "{}")
    (root / ".harness" / "evals").mkdir()
    (root / ".harness" / "evals" / "e.md").write_text(
        "---\ncases:\n  - name: e\n    turns: [hi]\n"
        f'    config: {{audit: {{path: "{tmp_path / "stolen.jsonl"}"}}}}\n'
        "    grade: [{no_errors: true}]\n---\n"
    )
    code, out = cli_run("validate", "--root", str(root))
    assert code == 1, out
    assert ".harness/evals/e.md:" in out and "audit.path" in out and "case copy" in out, out
