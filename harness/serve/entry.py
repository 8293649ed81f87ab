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

from harness.errors import UsageError
from harness.serve.fast_start import serve_stdio
from harness.serve.mcp import HarnessMCPServer, quiet_sdk_logs


def serve(
    root: Path,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    watch: bool = False,
    watch_interval: float = 0.5,
    auth_token_env: str | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    header_timeout: float = 10.0,
    max_connections: int = 512,
) -> None:
    """Run the server until the client disconnects (stdio) or it is interrupted (http)."""
    import os

    from harness.serve.http import ServeError, bind, is_loopback, parse_tokens

    if transport not in ("stdio", "http"):
        raise UsageError(f'unknown transport "{transport}"; use stdio or http')
    quiet_sdk_logs()
    tokens: list[str] = []
    if transport == "http":
        if auth_token_env:
            raw = os.environ.get(auth_token_env)
            if raw is None:
                raise ServeError(
                    f'--auth-token-env: the environment variable "{auth_token_env}" '
                    "is not set; export it with the bearer token clients must send"
                )
            tokens = parse_tokens(raw, auth_token_env)
        elif not is_loopback(host):
            raise ServeError(
                f"--host {host} is not a loopback address: anyone who can reach it "
                "could call every tool. Require a bearer token with "
                "--auth-token-env NAME (see docs/deploying.md)"
            )
    if transport == "stdio":
        serve_stdio(root, watch=watch, watch_interval=watch_interval)
        return
    server = HarnessMCPServer(root, watch=watch, watch_interval=watch_interval)
    try:
        if transport == "http":
            sock = bind(host, port)
            actual = int(sock.getsockname()[1])
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
