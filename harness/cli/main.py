"""The click group. Each command lives in its own module and is registered here."""

from __future__ import annotations

import sys

import click

from harness.cli import call, init, list_cmd, run, schema_cmd, serve, validate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
    sys.exit(cli.main(standalone_mode=True))


if __name__ == "__main__":
    main()
