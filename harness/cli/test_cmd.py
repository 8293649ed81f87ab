"""``harness test``: run the test files of ``.harness/tests/`` (docs/testing.md).

Exit 0 when every case passed, 1 when any failed, 2 for usage or load errors (a broken
artifact, a test file with errors, a path that does not exist, no case to run: a
``-k`` that matches nothing must not pass silently).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from harness.cli.common import CliError, echo_problems, resolve_root, root_option

FORMATS = ("text", "json", "github", "junit")


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@root_option
@click.option(
    "-k",
    "pattern",
    default=None,
    metavar="PATTERN",
    help="Run only cases whose FILE::NAME contains PATTERN (case-insensitive).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="text for people, json for programs, github for Actions annotations, "
    "junit for CI test reports.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the report to FILE (stdout gets the summary line).",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Cases run in parallel (default: the number of cores, at most 8).",
)
@click.option(
    "--coverage",
    is_flag=True,
    help="Also list tools and hooks no case reached, and hook decisions (block, "
    "modify) no case produced.",
)
@click.option(
    "--record",
    is_flag=True,
    help="Run every command and request for real and write what they returned into "
    "the test file as fakes: (redacted like audit records; see docs/testing.md).",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Show on stderr what each case's scripts printed and logged, each line with "
    "the file and line of the print/log call.",
)
def command(
    paths: tuple[Path, ...],
    root: Path | None,
    pattern: str | None,
    fmt: str,
    output: Path | None,
    jobs: int | None,
    coverage: bool,
    record: bool,
    verbose: bool,
) -> None:
    """Run the cases of test files (default: every .harness/tests/*.md)."""
    from contextlib import nullcontext

    from harness.cli.verbose import script_output
    from harness.testing.coverage import measure
    from harness.testing.report import as_json, render, summary
    from harness.testing.runner import Runner, outcome
    from harness.testing.verbose import VerboseRunner, collect

    with (VerboseRunner if verbose else Runner)(resolve_root(root), record=record) as runner:
        files, problems = runner.collect(paths, pattern)
        if problems:
            echo_problems(problems, runner.root)
            click.echo(
                "test files have errors; fix them (harness validate shows them too)", err=True
            )
            raise CliError(exit_code=2)
        if not any(tf.cases for tf in files):
            where = f'match -k "{pattern}"' if pattern else "were found"
            click.echo(
                f"no test cases {where} (test files: .harness/tests/*.md; see docs/testing.md)",
                err=True,
            )
            raise CliError(exit_code=2)
        workers = jobs or min(
            8,
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else (os.cpu_count() or 1),
        )
        with script_output(collect) if verbose else nullcontext():
            result = runner.run(files, jobs=workers)
        if record:
            _write_recorded(runner, files, result.results)
        if isinstance(runner, VerboseRunner):
            for line in runner.report(result.results):
                click.echo(line, err=True)
        cov = measure(runner.project, result.results) if coverage else None
    rows = [outcome(r) for r in result.results]
    seconds = result.duration_ms / 1000.0
    if cov is None:
        report = render(fmt, rows, seconds)
    elif fmt == "json":
        report = as_json(
            rows,
            seconds,
            {
                "coverage": {
                    "untested_tools": list(cov.untested_tools),
                    "untested_hooks": list(cov.untested_hooks),
                    "unproduced": [{"hook": h, "decision": d} for h, d in cov.unproduced],
                }
            },
        )
    elif fmt == "github":
        report = render(fmt, rows, seconds, cov.lines())
    elif cov.complete:
        report = render(
            fmt,
            rows,
            seconds,
            ["Coverage: every tool and hook has a case; every block and modify was produced"],
        )
    else:
        report = render(fmt, rows, seconds, ["Coverage:", *("  " + x for x in cov.lines())])
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(report + "\n", encoding="utf-8")
        click.echo(summary(rows, seconds))
    else:
        click.echo(report)
    if not result.ok:
        raise CliError(exit_code=1)


def _write_recorded(runner: Any, files: Any, results: Any) -> None:
    """--record: the fakes each case's real commands and requests produced, written
    into its test file (harness/testing/record.py)."""
    from harness.testing.record import write_recorded

    for tf in files:
        cases = [(r.case, r.recorded) for r in results if r.case.path == tf.path and r.recorded]
        if not cases:
            continue
        path = Path(tf.path) if Path(tf.path).is_absolute() else runner.root / tf.path
        try:
            click.echo(write_recorded(path, tf.path, cases), err=True)
        except ValueError as exc:
            click.echo(f"{tf.path}: not recorded: {exc}", err=True)
            raise CliError(exit_code=2) from None
