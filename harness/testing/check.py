"""What ``harness validate`` adds for test and eval files (both parsers, one list)."""

from __future__ import annotations

from pathlib import Path

from harness.artifacts.model import Problem, Project
from harness.testing.evalspec import eval_files, parse_eval
from harness.testing.spec import check_against, check_config, parse, test_files


def check_tests(root: Path, project: Project) -> list[Problem]:
    """Every problem of every test file under ``root`` and of every eval file (for
    ``harness validate``)."""
    out: list[Problem] = []
    for rel, path in test_files(root):
        tf = parse(path.read_bytes(), rel)
        out.extend(tf.problems)
        out.extend(check_against(tf, project))
        out.extend(check_config(tf, root))
    for rel, path in eval_files(root):
        out.extend(parse_eval(path.read_bytes(), rel, project)[1])
    return out
