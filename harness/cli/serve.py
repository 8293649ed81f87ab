"""``harness serve``: the project's tools as an MCP server (docs/spec.md §10, §11).

stdout carries the protocol (stdio transport), so everything this command reports
goes to stderr through :mod:`logging`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from harness.cli.common import CliError, resolve_root, root_option


@click.command()
@root_option
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for a client that starts the server; http for "
    "streamable HTTP at http://HOST:PORT/mcp.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (http). Every address needs a bearer token (see "
    "--auth-token-env); --no-auth is for loopback addresses only.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port to listen on (http); 0 picks a free port and logs it.",
)
@click.option(
    "--auth-token-env",
    metavar="NAME",
    default=None,
    help="Require 'Authorization: Bearer <token>' on every HTTP request; the token "
    "(or several, comma-separated) is read from environment variable NAME. Without "
    "it, a token is generated and shown once on stderr.",
)
@click.option(
    "--no-auth",
    is_flag=True,
    help="Serve HTTP without a bearer token: every local user can call every tool. "
    "Loopback --host only.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="HOST:PORT",
    help="Also accept this Host header (e.g. mcp.example.com:443 behind a proxy; "
    "HOST:* for any port). Repeatable.",
)
@click.option(
    "--allowed-origin",
    "allowed_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Also accept browser requests from this Origin (e.g. "
    "https://app.example.com). Repeatable.",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds a connection may take to send its request headers before it is closed (http).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=512,
    show_default=True,
    help="Open connections at most; further ones are closed at once (http).",
)
@click.option(
    "--watch",
    is_flag=True,
    help="Reload when artifacts change and send notifications/tools/list_changed.",
)
@click.option(
    "--watch-interval",
    type=click.FloatRange(min=0.05),
    default=0.5,
    show_default=True,
    help="Seconds between checks for changed files (--watch).",
)
@click.option(
    "--python",
    "python_target",
    metavar="MODULE:ATTR",
    default=None,
    help="Serve the harness.Harness at MODULE:ATTR (e.g. my_tools:h), with the Python "
    "tools registered on it, instead of loading the root. Not with --watch.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="Log level (logs go to stderr).",
)
def command(
    root: Path | None,
    transport: str,
    host: str,
    port: int,
    auth_token_env: str | None,
    no_auth: bool,
    allowed_hosts: tuple[str, ...],
    allowed_origins: tuple[str, ...],
    header_timeout: float,
    max_connections: int,
    watch: bool,
    watch_interval: float,
    python_target: str | None,
    log_level: str,
) -> None:
    """Serve the tools over MCP (Model Context Protocol) until the client disconnects."""
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, log_level.upper()),
        format="harness serve: %(levelname)s: %(message)s",
        force=True,
    )
    harness = None
    if python_target is not None:
        from harness.cli.pyharness import import_harness

        if watch:
            raise CliError(
                "--watch reloads the tools from the files, which would drop the Python "
                "tools of --python; leave out one of them",
                exit_code=2,
            )
        harness = import_harness(python_target, root)
        root = Path(harness.root)
    if transport == "stdio":
        # Answers initialize before importing the MCP SDK (harness/serve/fast_start.py).
        import importlib.util

        if importlib.util.find_spec("mcp") is None:
            raise CliError(
                "harness serve needs the MCP SDK; install it with pip install 'harness-md[mcp]'",
                exit_code=2,
            )
        from harness.serve.fast_start import serve_stdio

        try:
            serve_stdio(
                resolve_root(root).resolve(),
                watch=watch,
                watch_interval=watch_interval,
                harness=harness,
            )
        except KeyboardInterrupt:
            pass
        return
    try:
        from harness.serve.entry import serve
    except ImportError as exc:
        raise CliError(
            f"harness serve needs the MCP SDK ({exc}); install it with "
            "pip install 'harness-md[mcp]'",
            exit_code=2,
        ) from exc
    try:
        serve(
            resolve_root(root).resolve(),
            harness=harness,
            transport=transport,
            host=host,
            port=port,
            watch=watch,
            watch_interval=watch_interval,
            auth_token_env=auth_token_env,
            no_auth=no_auth,
            allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins,
            header_timeout=header_timeout,
            max_connections=max_connections,
        )
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise CliError(f"cannot serve on {host}:{port}: {exc}", exit_code=1) from exc
