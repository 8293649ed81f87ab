"""``harness init [DIR]``: scaffold ``harness.md`` and the starter pack (docs/spec.md §10).

Never overwrites: when any file of the pack already exists, nothing is written and
the command exits 1 naming every existing file.
"""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.common import CliError


@click.command()
@click.argument(
    "directory", required=False, default=".", type=click.Path(file_okay=False, path_type=Path)
)
def command(directory: Path) -> None:
    """Write harness.md and a starter pack of tools and hooks into DIRECTORY (default: .)."""
    from harness.starter import files

    pack = files()
    existing = [rel for rel in pack if (directory / rel).exists() or (directory / rel).is_symlink()]
    if existing:
        names = ", ".join(existing)
        raise CliError(
            f"{directory}: not overwriting existing files: {names}; "
            "move them away or run harness init in another directory",
            exit_code=1,
        )
    try:
        for rel, text in pack.items():
            path = directory / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            # "x": fail rather than overwrite a file that appeared in the meantime.
            with open(path, "x", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
    except OSError as exc:
        raise CliError(f"{directory}: cannot write the starter pack: {exc}", exit_code=1) from exc
    tools = [Path(r).stem for r in pack if r.startswith(".harness/tools/")]
    hooks = [Path(r).stem for r in pack if r.startswith(".harness/hooks/")]
    click.echo(f"Created harness.md and .harness/ in {directory}")
    click.echo(f"  tools: {', '.join(tools)}")
    click.echo(f"  hooks: {', '.join(hooks)}")
    click.echo("  tests: .harness/tests/starter.md")
    click.echo(
        "Next: harness validate, harness test, harness list, harness serve "
        "(see docs/getting-started.md)"
    )
