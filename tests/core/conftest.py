from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from core_samples import write_project

import harness

GUARD_CODES = ("payload-key-unknown", "guard-modify-key", "guard-shape", "guard-key-unknown")


@pytest.fixture
def make_harness(tmp_path: Path) -> Callable[..., harness.Harness]:
    opened: list[harness.Harness] = []

    def make(*, refused_guards: bool = False, **kw: object) -> harness.Harness:
        """``refused_guards``: load although validate refuses a hook's guard checks
        (and nothing else), to test what the runtime does with such a hook anyway."""
        write_project(tmp_path, **kw)  # type: ignore[arg-type]
        if refused_guards:
            from harness.validation import check_project

            project = check_project(tmp_path)
            errors = [p for p in project.problems if p.severity == "error"]
            assert errors and all(p.code in GUARD_CODES for p in errors), errors
            h = harness.Harness(project)
        else:
            h = harness.load(tmp_path)
        opened.append(h)
        return h

    yield make  # type: ignore[misc]
    for h in opened:
        h.close()
