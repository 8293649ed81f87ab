"""The click group. Each command lives in its own module and is registered here."""

from __future__ import annotations

from typing import Any

import click

from harness.cli import call, init, list_cmd, run, schema_cmd, serve, validate
from harness.cli.common import report
from harness.errors import HarnessError


class Boundary(click.Group):
    """The one place exit codes are decided: a command that raises a HarnessError
    exits with the error's ``exit_code`` after its message (``Error: ...``, or a
    LoadError's problems) is printed on stderr."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HarnessError as exc:
            raise click.exceptions.Exit(report(exc)) from exc


@click.group(cls=Boundary, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="harness-md")
def cli() -> None:
    """Tools for language models as Markdown files."""


cli.add_command(validate.command, "validate")
cli.add_command(list_cmd.command, "list")
cli.add_command(schema_cmd.command, "schema")
cli.add_command(call.command, "call")
cli.add_command(serve.command, "serve")
cli.add_command(init.command, "init")
cli.add_command(run.command, "run")


def _add_testing_commands() -> None:
    """``harness test`` and ``harness eval`` (docs/testing.md)."""
    from harness.cli import eval_cmd, test_cmd

    cli.add_command(test_cmd.command, "test")
    cli.add_command(eval_cmd.command, "eval")


_add_testing_commands()


def main() -> None:
    """Console-script entry point."""
    cli.main(standalone_mode=True)  # click exits with the code Boundary chose


if __name__ == "__main__":
    main()
