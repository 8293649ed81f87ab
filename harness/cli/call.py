"""`harness call TOOL [JSON] [--arg k=v]... [--format text|json]`: one call, full pipeline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from harness.cli.common import CliError, root_option
from harness.errors import LoadError


def _split_arg(item: str) -> tuple[str, str]:
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise click.UsageError(f"--arg takes key=value, got {item!r}")
    return key, raw


_NON_STRING = frozenset({"integer", "number", "boolean", "array", "object"})


def _arg_value(raw: str, schema: Any) -> Any:
    """A --arg value, typed by the parameter's schema.

    A string parameter gets the text itself: ``--arg msg=42`` sends "42", and a value
    written as a JSON string (``--arg msg='"hi"'``) loses its quotes. Any other
    parameter (or one the tool does not declare) gets the value parsed as JSON
    (``--arg n=5`` sends 5); text that is not JSON is sent as text, and validation
    then says what was expected. ``null`` is null only where the schema allows it.
    """
    declared = schema.get("type") if isinstance(schema, dict) else None
    types = set(declared) if isinstance(declared, list) else {declared}
    if "string" in types and not (_NON_STRING & types):
        if raw == "null" and "null" in types:
            return None
        if len(raw) >= 2 and raw[0] == raw[-1] == '"':
            try:
                value = json.loads(raw)
            except ValueError:
                return raw
            return value if isinstance(value, str) else raw
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


@click.command()
@click.argument("tool")
@click.argument("arguments", required=False)
@click.option(
    "--arg",
    "args",
    multiple=True,
    metavar="KEY=VALUE",
    help="One argument (repeatable). For a string parameter VALUE is the text "
    'itself (--arg msg=42 sends "42"; surrounding JSON quotes are removed); '
    "for any other parameter VALUE is parsed as JSON (--arg n=5, "
    "--arg tags='[\"a\"]'), and text that is not JSON is sent as text. "
    "Overrides the same key in ARGUMENTS.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Show what the tool's and hooks' scripts print and log on stderr, each line "
    "with the file and line of the print/log call.",
)
@root_option
def command(
    tool: str,
    arguments: str | None,
    args: tuple[str, ...],
    fmt: str,
    verbose: bool,
    root: Path | None,
) -> None:
    """Call TOOL once through the full pipeline. ARGUMENTS is a JSON object.

    Exit 0 when the call succeeded, 1 when its result is an error, 2 on a usage or
    load error.
    """
    payload: Any = {}
    if arguments:
        try:
            payload = json.loads(arguments)
        except ValueError as exc:
            raise click.UsageError(f"ARGUMENTS is not valid JSON: {exc}") from None
        if not isinstance(payload, dict):
            raise click.UsageError('ARGUMENTS must be a JSON object, e.g. \'{"path": "."}\'')
    pairs = [_split_arg(item) for item in args]

    import harness

    try:
        h = harness.load(root)
    except LoadError as exc:
        for p in exc.problems:
            click.echo(p.render(), err=True)
        raise CliError(exit_code=exc.exit_code) from None
    spec = h.all_tools.get(tool)  # starts nothing: a local call never starts a server
    up = h.upstream
    if pairs and up is not None and up.server_of(tool) is not None:
        found = up.resolve(tool)  # the call starts this server anyway: its live schema
        spec = found[0] if found is not None else spec
    properties = spec.input_schema.get("properties", {}) if spec is not None else {}
    for key, raw in pairs:
        payload[key] = _arg_value(raw, properties.get(key))
    from contextlib import nullcontext

    from harness.cli.verbose import script_output

    with h, script_output() if verbose else nullcontext():
        result = h.call(tool, payload)
    if fmt == "json":
        click.echo(
            json.dumps(
                {
                    "call_id": result.call_id,
                    "name": result.name,
                    "is_error": result.is_error,
                    "value": result.value,
                    "text": result.text,
                    "error": result.error,
                    "duration_ms": round(result.duration_ms, 3),
                    "truncated": result.truncated,
                    "blocked_by": result.blocked_by,
                    "output_ref": result.output_ref,
                    "notes": list(result.notes),
                },
                ensure_ascii=False,
                default=str,
            )
        )
    elif result.is_error:
        click.echo(result.text, err=True)
    else:
        click.echo(result.text)
    if result.is_error:
        raise CliError(exit_code=1)
