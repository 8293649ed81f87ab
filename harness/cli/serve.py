"""``harness serve``: the project's tools as an MCP server (SPEC §10, §11).

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
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio",
              show_default=True, help="stdio for a client that starts the server; http for "
              "streamable HTTP at http://HOST:PORT/mcp.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (http). Keep the loopback default unless the "
                   "network in front of it is trusted: there is no authentication.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True,
              help="Port to listen on (http).")
@click.option("--watch", is_flag=True,
              help="Reload when artifacts change and send notifications/tools/list_changed.")
@click.option("--watch-interval", type=click.FloatRange(min=0.05), default=0.5,
              show_default=True, help="Seconds between checks for changed files (--watch).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True, help="Log level (logs go to stderr).")
def command(root: Path | None, transport: str, host: str, port: int, watch: bool,
            watch_interval: float, log_level: str) -> None:
    """Serve the tools over MCP (Model Context Protocol) until the client disconnects."""
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, log_level.upper()),
                        format="harness serve: %(levelname)s: %(message)s", force=True)
    try:
        from harness.serve.mcp import serve
    except ImportError as exc:
        raise CliError(f"harness serve needs the MCP SDK ({exc}); install it with "
                       "pip install 'harness[mcp]'", exit_code=2) from exc
    try:
        serve(resolve_root(root).resolve(), transport=transport, host=host, port=port,
              watch=watch, watch_interval=watch_interval)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise CliError(f"cannot serve on {host}:{port}: {exc}", exit_code=1) from exc
