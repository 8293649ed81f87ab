"""``harness test -v``: the print and log output of each case, with file:line.

:class:`VerboseRunner` runs cases as :class:`~harness.testing.runner.Runner` does and
keeps, per case, the lines :mod:`harness.cli.verbose` makes of the records its
scripts wrote. Cases run in parallel threads; a record is written on the thread of
the call that made it (a worker's records are read by the calling thread), so a
context variable set around each case says whose it is.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator

from harness.testing.runner import CaseResult, Runner
from harness.testing.spec import Case

_lines: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "harness_test_lines", default=None
)


class VerboseRunner(Runner):
    """A Runner that keeps what each case's scripts printed and logged."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.logs: dict[int, list[str]] = {}

    def run_case(self, case: Case) -> CaseResult:
        lines: list[str] = []
        token = _lines.set(lines)
        try:
            return super().run_case(case)
        finally:
            _lines.reset(token)
            self.logs[id(case)] = lines

    def report(self, results: tuple[CaseResult, ...]) -> Iterator[str]:
        """Per case with output: a header line, then its lines indented."""
        for r in results:
            lines = self.logs.get(id(r.case))
            if lines:
                yield f"-- {r.case.path}::{r.case.name}"
                yield from (f"   {line}" for line in lines)


def collect(_session: str, line: str) -> None:
    """The sink of :func:`harness.cli.verbose.script_output` for test runs."""
    lines = _lines.get()
    if lines is not None:
        lines.append(line)
