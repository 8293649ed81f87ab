"""``serve()``: run ``harness serve`` over stdio or HTTP until it ends.

The entry point above both servers: over stdio it hands the start to
:mod:`harness.serve.fast_start` (which imports the SDK server only after answering
``initialize``); over HTTP it runs :class:`harness.serve.mcp.HarnessMCPServer`.
Neither of them imports this module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import UsageError
from harness.serve.fast_start import serve_stdio
from harness.serve.mcp import HarnessMCPServer, quiet_sdk_logs

if TYPE_CHECKING:
    from harness.core import Harness


def serve_harness(harness: Harness, **options: Any) -> None:
    """``harness.serve(h)``: serve a loaded Harness (its Python tools included) over MCP
    through the same pipeline as ``harness serve``; ``options`` are :func:`serve`'s
    (``transport="http"``, ``host``, ``port``, ``auth_token_env``, ...)."""
    from harness.core import Harness

    if not isinstance(harness, Harness):
        raise UsageError(
            f"harness.serve needs a harness.Harness (harness.load(...)), got "
            f"{type(harness).__name__}"
        )
    serve(Path(harness.root), harness=harness, **options)


def serve(
    root: Path,
    *,
    harness: Harness | None = None,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    watch: bool = False,
    watch_interval: float = 0.5,
    auth_token_env: str | None = None,
    no_auth: bool = False,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    header_timeout: float = 10.0,
    max_connections: int = 512,
) -> None:
    """Run the server until the client disconnects (stdio) or it is interrupted (http).

    ``harness``: serve this loaded :class:`~harness.Harness` (its Python tools included)
    instead of loading ``root``."""
    from harness.serve.http import bind, show_generated_token, tokens_for

    if transport not in ("stdio", "http"):
        raise UsageError(f'unknown transport "{transport}"; use stdio or http')
    if harness is not None and watch:
        raise UsageError(
            "watch reloads the tools from the files, which would drop the Python tools "
            "registered on this Harness; serve it without watch"
        )
    quiet_sdk_logs()
    tokens: list[str] = []
    generated = False
    if transport == "http":
        tokens, generated = tokens_for(host, auth_token_env, no_auth)
    if transport == "stdio":
        serve_stdio(root, watch=watch, watch_interval=watch_interval, harness=harness)
        return
    server = HarnessMCPServer(root, watch=watch, watch_interval=watch_interval, harness=harness)
    try:
        if transport == "http":
            sock = bind(host, port)
            actual = int(sock.getsockname()[1])
            if generated:
                show_generated_token(tokens[0], host, actual)
            try:
                asyncio.run(
                    server.run_http(
                        sock,
                        host=host,
                        port=actual,
                        tokens=tokens,
                        allowed_hosts=allowed_hosts,
                        allowed_origins=allowed_origins,
                        header_timeout=header_timeout,
                        max_connections=max_connections,
                    )
                )
            finally:
                sock.close()
    finally:
        server.close()
