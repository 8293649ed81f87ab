"""``harness eval``: model-driven cases of ``.harness/evals/*.md`` (docs/testing.md).

Exit 0 when every case passed, 1 when any failed (or was skipped because the token
budget was spent), 2 for usage or load errors (including eval files with errors).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness.cli.common import CliError, echo_problems, resolve_root, root_option

if TYPE_CHECKING:
    from harness.testing.runner import Runner

FORMATS = ("text", "json", "github", "junit")


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@root_option
@click.option(
    "--model",
    default=None,
    metavar="NAME_OR_URL",
    help="Model name, or the base URL of an OpenAI-compatible server "
    "(default: model.name in harness.md).",
)
@click.option(
    "--provider",
    type=click.Choice(["openai", "anthropic", "copilot"]),
    default=None,
    help="Wire format of the model API (default: model.provider in harness.md).",
)
@click.option("--base-url", default=None, metavar="URL", help="Base URL of the model API.")
@click.option(
    "--case",
    "case_name",
    default=None,
    metavar="NAME",
    help="Run only cases whose name contains NAME (case-insensitive).",
)
@click.option("--dry-run", is_flag=True, help="Parse and validate the eval files; run nothing.")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Token budget for the whole run; once spent, the remaining cases are "
    "skipped (and count as failed).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="text, json, github annotations or junit XML.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the report to FILE (stdout gets the summary line).",
)
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the transcript of every case, not only of failing ones (JSON files in "
    "REPORT.transcripts/ beside the -o report, else in .harness/state/evals/).",
)
def command(
    paths: tuple[Path, ...],
    root: Path | None,
    model: str | None,
    provider: str | None,
    base_url: str | None,
    case_name: str | None,
    dry_run: bool,
    max_tokens: int | None,
    fmt: str,
    output: Path | None,
    keep: bool,
) -> None:
    """Run model-driven eval cases (default: every .harness/evals/*.md). The
    transcript of each failing case is kept (see --keep)."""
    from harness.testing.evals import Budget, run_eval
    from harness.testing.evalspec import EvalCase, eval_files, parse_eval
    from harness.testing.report import Outcome, render, summary

    start = time.perf_counter()
    with _runner(resolve_root(root)) as runner:
        files = [(runner.rel(p), p) for p in paths] if paths else eval_files(runner.root)
        cases: list[EvalCase] = []
        problems = []
        for rel, path in files:
            if not path.is_file():
                raise click.UsageError(f'eval file "{rel}" does not exist')
            found, probs = parse_eval(path.read_bytes(), rel, runner.project)
            cases.extend(found)
            problems.extend(probs)
        errors = [p for p in problems if p.severity == "error"]
        if problems:
            echo_problems(problems, runner.root)
        if errors:
            raise CliError(exit_code=2)
        if case_name:
            cases = [c for c in cases if case_name.lower() in c.name.lower()]
        if not dry_run and cases:
            from harness.agent.loop import resolve_settings

            # No model, no key, a bad URL: a usage error (exit 2) before any case runs.
            resolve_settings(
                runner.project.config.model, model=model, provider=provider, base_url=base_url
            )
        budget = Budget(limit=max_tokens or 0)
        rows: list[Outcome] = []
        for case in cases:
            if dry_run:
                rows.append(
                    Outcome(
                        path=case.path,
                        line=case.line,
                        name=case.name,
                        passed=True,
                        skipped="dry run",
                    )
                )
                continue
            record: dict[str, object] = {}
            row = run_eval(
                runner, case, budget, record, model=model, provider=provider, base_url=base_url
            )
            rows.append(row)
            if record and (keep or not row.passed):
                _keep(_transcripts(runner.root, output), case.name, record, fmt, output)
    seconds = time.perf_counter() - start
    extra = [f"tokens used: {budget.spent}" + (f" of {budget.limit}" if budget.limit else "")]
    report = render(fmt, rows, seconds, [] if dry_run else extra, noun="eval")
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(report + "\n", encoding="utf-8")
        click.echo(summary(rows, seconds, "eval"))
    else:
        click.echo(report)
    if not dry_run and any(not r.passed for r in rows):
        raise CliError(exit_code=1)


def _transcripts(root: Path, output: Path | None) -> Path:
    """Where transcripts go: beside the -o report, else under .harness/state/."""
    if output is not None:
        return output.parent / f"{output.stem}.transcripts"
    return root / ".harness" / "state" / "evals"


def _keep(
    folder: Path, name: str, record: dict[str, object], fmt: str, output: Path | None
) -> Path:
    """Write one case's transcript as FOLDER/<case-name>.json and say so on stderr
    (unless a machine-readable report goes to stdout); its path."""
    import json
    import re

    folder.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:80] or "case"
    path = folder / f"{slug}.json"
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False, default=str) + "\n")
    if fmt == "text" or output is not None:
        click.echo(f"transcript: {path}", err=True)
    return path


def _runner(root: Path) -> Runner:
    from harness.testing.runner import Runner

    return Runner(root)
