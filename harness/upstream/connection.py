"""One live connection to an upstream MCP server, driven from a background event loop.

The official SDK client (``mcp.Client``) is async and its context must be entered and
left by one task, so each connection has an owner task on the :class:`Loop` thread that
enters the client, publishes it, and waits to be told to stop. Calls from any thread are
submitted to that loop. A connection that fails (the server crashed, exited, hung past
its timeout) is marked dead and stopped; the next call starts a new one.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from harness.artifacts.patterns import install as install_linear_patterns
from harness.artifacts.servers import ServerSpec

log = logging.getLogger("harness.upstream")
T = TypeVar("T")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


class UpstreamFailure(Exception):
    """A call that did not get an answer. ``kind`` is its retry class."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # transient | timeout | 5xx | error


class Loop:
    """A daemon thread running one asyncio loop for every connection of a harness."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="harness-upstream", daemon=True
        )
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    def close(self) -> None:
        """Cancel what still runs (a caller waiting on it gets an error, never hangs),
        then stop the loop."""
        if self.loop.is_running():

            async def cancel_all() -> None:
                me = asyncio.current_task()
                tasks = [t for t in asyncio.all_tasks() if t is not me]
                for t in tasks:
                    t.cancel()
                await asyncio.wait(tasks, timeout=2) if tasks else None

            try:
                self.run(cancel_all(), timeout=5)
            except Exception:  # noqa: BLE001 - closing anyway
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
        if not self.loop.is_running():
            self.loop.close()


class Connection:
    """A started server: the SDK client, its tool listing, its stderr."""

    def __init__(
        self,
        spec: ServerSpec,
        transport: Any,
        on_list_changed: Callable[[], None],
        errlog: Any,
        http_statuses: list[int] | None = None,
    ) -> None:
        self.spec = spec
        self._transport = transport
        self._on_list_changed = on_list_changed
        self.errlog = errlog
        self.client: Any = None
        self.dead = False
        # non-2xx HTTP statuses seen (HTTP servers)
        self.http_statuses = http_statuses if http_statuses is not None else []
        self._stop: asyncio.Event | None = None
        self._owner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self.after_stop: Callable[[], None] | None = None  # run once the process is gone
        self.egress: Any = None  # the EgressProxy of a sandboxed server with network

    async def start(self) -> None:
        from mcp import Client

        # The client checks structured results against the server's outputSchema with
        # pure-Python jsonschema: its patterns must run on RE2, never backtrack.
        install_linear_patterns()
        self._stop = asyncio.Event()
        self._ready = asyncio.get_running_loop().create_future()

        async def on_message(message: Any) -> None:
            if getattr(message, "method", None) == "notifications/tools/list_changed":
                self._on_list_changed()

        async def own() -> None:
            assert self._stop is not None and self._ready is not None
            try:
                # "legacy" = the initialize handshake every server speaks, and the
                # notifications/tools/list_changed message servers send.
                async with Client(
                    self._transport, message_handler=on_message, mode="legacy", cache=None
                ) as client:
                    self.client = client
                    if not self._ready.done():
                        self._ready.set_result(None)
                    await self._stop.wait()
            except BaseException as exc:  # noqa: BLE001 - reported through _ready
                if not self._ready.done():
                    self._ready.set_exception(
                        exc if isinstance(exc, Exception) else RuntimeError(repr(exc))
                    )
                elif not isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
                    log.debug("upstream %s: connection ended: %s", self.spec.name, exc)
            finally:
                self.dead = True
                self.client = None

        self._owner = asyncio.get_running_loop().create_task(own())
        await asyncio.wait_for(asyncio.shield(self._ready), START_TIMEOUT_S)

    def alive(self) -> bool:
        """False once the server is known gone: marked dead, or its connection closed
        while idle (the server exited between calls; a request would fail unsent)."""
        if self.dead or self.client is None:
            return False
        try:
            dispatcher = getattr(self.client.session, "_dispatcher", None)  # SDK internals
        except RuntimeError:
            return False
        return not getattr(dispatcher, "_closed", False)

    async def stop(self) -> None:
        """Stop the server (stdin closed, then SIGTERM/SIGKILL of its process tree)."""
        self.dead = True
        if self._stop is not None:
            self._stop.set()
        owner = self._owner
        if owner is not None and not owner.done():
            try:
                await asyncio.wait_for(asyncio.shield(owner), STOP_TIMEOUT_S)
            except (TimeoutError, Exception):  # noqa: BLE001
                owner.cancel()
        done, self.after_stop = self.after_stop, None
        if done is not None:
            done()
        egress, self.egress = self.egress, None
        if egress is not None:
            await egress.stop()

    def stderr_tail(self, limit: int = 400) -> str:
        f = self.errlog
        if f is None:
            return ""
        try:
            f.flush()
            f.seek(0)
            text: str = f.read()
        except (OSError, ValueError):
            return ""
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        return lines[-1][-limit:] if lines else ""


def new_errlog() -> Any:
    """Where a stdio server's stderr goes: a temporary file (its last line explains crashes)."""
    return tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
