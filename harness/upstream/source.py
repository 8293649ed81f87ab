"""Upstream servers as a tool source: ``NAME.TOOL`` specs and handlers for the registry.

Each upstream tool becomes a script-less :class:`ToolSpec` whose handler calls the
server, so it runs through the same six pipeline steps as every other tool (the seam
``Harness.bind`` already uses). This module owns the connections: it starts a server on
first use (or at load with ``loading: eager``), caches its tool listing (in memory, and
on disk: :mod:`harness.upstream.listing_cache`), refreshes it on
``notifications/tools/list_changed``, retries by policy, restarts a server that crashed
or hung, and stops every server on :meth:`Upstream.close`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from harness.artifacts.model import ToolSpec
from harness.artifacts.servers import ServerSpec
from harness.config import Config
from harness.upstream import listing_cache
from harness.upstream.connection import Connection, Loop, UpstreamFailure, new_errlog
from harness.upstream.egress import EgressProxy
from harness.upstream.launch import LaunchError, after_stop, http_transport, stdio_launch
from harness.upstream.mapping import (
    Listing,
    build_listing,
    convert,
    describe,
    failure_kind,
    listing_shape,
    server_source,
)

log = logging.getLogger("harness.upstream")


class Upstream:
    """Every declared server of one harness."""

    def __init__(self, servers: Mapping[str, ServerSpec], config: Config) -> None:
        self.servers = {n: s for n, s in servers.items() if s.enabled}
        self.config = config
        self.version = 0
        self.listeners: list[Callable[[], None]] = []
        self._loop: Loop | None = None
        self._lock = threading.RLock()
        self._server_locks = {n: threading.Lock() for n in self.servers}
        self._conns: dict[str, Connection] = {}
        self._listings: dict[str, Listing] = {}
        # The on-disk listings of servers not started (read once, on first ask).
        self._cached: dict[str, listing_cache.Entry | None] = {}
        self._failed: dict[str, str] = {}
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------

    @property
    def loop(self) -> Loop:
        with self._lock:
            if self._loop is None:
                self._loop = Loop()
            return self._loop

    def start(self, name: str) -> Connection:
        """The live connection of ``name``, started (and its tools listed) if needed."""
        with self._server_locks[name]:
            conn = self._conns.get(name)
            if conn is not None and conn.alive():
                return conn
            if conn is not None and not conn.dead:
                log.warning(
                    'upstream server "%s" exited since its last call; starting it again', name
                )
                conn.dead = True
                self.loop.run(conn.stop(), timeout=15)
            if self._closed:
                raise UpstreamFailure("error", f'upstream server "{name}" is closed')
            spec = self.servers[name]
            try:
                conn = self.loop.run(self._start(spec))
            except LaunchError as exc:
                self._failed[name] = str(exc)
                raise UpstreamFailure("error", str(exc)) from None
            except Exception as exc:  # noqa: BLE001 - spawn, handshake, HTTP errors
                msg = (
                    f'upstream server "{name}" could not be started: '
                    f"{describe(exc)} (declared in {spec.source.path}:{spec.source.line})"
                )
                self._failed[name] = msg
                raise UpstreamFailure(failure_kind(exc), msg) from None
            self._failed.pop(name, None)
            self._conns[name] = conn
            return conn

    async def _start(self, spec: ServerSpec) -> Connection:
        errlog = None
        launch: Any = None
        egress: EgressProxy | None = None
        statuses: list[int] = []
        if spec.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            egress = None
            if spec.allowed_domains and (spec.sandbox or self.config.exec.sandbox) != "off":
                egress = EgressProxy(spec.name, spec.allowed_domains)
                await egress.start()
            try:
                launch = stdio_launch(spec, self.config, os.environ, egress)
            except BaseException:
                if egress is not None:
                    await egress.stop()
                raise
            log.debug(
                "upstream server %s: sandboxed=%s, read-only mounts %s, argv %s",
                spec.name,
                launch.sandboxed,
                launch.mounts,
                launch.argv,
            )
            errlog = new_errlog()
            transport: Any = stdio_client(
                StdioServerParameters(
                    command=launch.argv[0], args=launch.argv[1:], env=launch.env, cwd=launch.cwd
                ),
                errlog=errlog,
            )
        else:
            transport = http_transport(spec, os.environ, statuses)
        conn = Connection(spec, transport, lambda: self._list_changed(spec.name), errlog, statuses)
        conn.egress = egress
        if spec.transport == "stdio" and launch.sandboxed:

            def checked(launch: Any = launch) -> None:
                try:
                    notes = after_stop(self.config, launch)
                except Exception:  # noqa: BLE001 - a check must not break stopping
                    log.exception(
                        'upstream server "%s": checking protected paths after it stopped failed',
                        spec.name,
                    )
                    return
                for note in notes:
                    log.warning(
                        'upstream server "%s": %s', spec.name, note.removeprefix("harness: ")
                    )

            conn.after_stop = checked
        try:
            await conn.start()
            listing = await self._list(conn)
        except BaseException:
            await conn.stop()
            raise
        self._set_listing(spec.name, listing)
        return conn

    async def _list(self, conn: Connection) -> Listing:
        """The tools ``conn`` offers now, kept in the on-disk cache too."""
        tools = await self._list_raw(conn)
        info = getattr(conn.client, "server_info", None)
        version = str(getattr(info, "version", "") or "")
        await asyncio.to_thread(listing_cache.write, conn.spec, self.config, tools, version)
        return build_listing(conn.spec, tools)

    async def _list_raw(self, conn: Connection) -> list[Any]:
        spec = conn.spec
        tools: list[Any] = []
        cursor = None
        while True:
            page = await asyncio.wait_for(
                conn.client.list_tools(cursor=cursor), spec.timeout_ms / 1000
            )
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _set_listing(self, name: str, listing: Listing) -> None:
        with self._lock:
            old = self._listings.get(name)
            # What clients were shown: the live listing, else the cached one.
            entry = self._cached.get(name) if old is None else None
            shown = old if old is not None else (entry.listing if entry else None)
            self._listings[name] = listing
            if old is None or listing_shape(old) != listing_shape(listing):
                self.version += 1
            changed = shown is None or listing_shape(shown) != listing_shape(listing)
        if changed:
            for fn in list(self.listeners):
                try:
                    fn()
                except Exception:  # noqa: BLE001 - a listener must not break the source
                    log.exception("upstream list_changed listener failed")

    def _list_changed(self, name: str) -> None:
        """notifications/tools/list_changed (on the loop thread): list again."""
        conn = self._conns.get(name)

        async def refresh() -> None:
            if conn is None or conn.dead:
                return
            try:
                self._set_listing(name, await self._list(conn))
            except Exception as exc:  # noqa: BLE001
                # The cached listing is out of date now: a later run lists again.
                listing_cache.drop(self.servers[name], self.config)
                log.warning(
                    'upstream server "%s": listing tools after list_changed failed: %s',
                    name,
                    describe(exc),
                )

        asyncio.get_running_loop().create_task(refresh())

    def start_eager(self) -> None:
        for name, spec in self.servers.items():
            if spec.loading == "eager":
                self._try_start(name)

    def start_all(self) -> None:
        """Start every server not started yet (listing tools needs them)."""
        for name in self.servers:
            if name not in self._listings and name not in self._failed:
                self._try_start(name)

    def pending(self) -> bool:
        """Whether start_uncached() has a server left to start (it may block for seconds)."""
        return any(self._uncached(n) for n in self.servers)

    def _uncached(self, name: str) -> bool:
        return name not in self._listings and name not in self._failed and not self.cached(name)

    def start_uncached(self) -> None:
        """Start every server whose tools are known neither live nor from the cache."""
        for name in self.servers:
            if self._uncached(name):
                self._try_start(name)

    def cached(self, name: str) -> listing_cache.Entry | None:
        """The on-disk listing of ``name`` (read once; never starts anything)."""
        if name not in self._cached:
            self._cached[name] = listing_cache.read(self.servers[name], self.config)
        return self._cached[name]

    def cached_tools(self) -> dict[str, ToolSpec]:
        """Tools of the servers not started, from the cache: to list, never to call (a
        call starts the server and validates against the listing it gives then)."""
        out: dict[str, ToolSpec] = {}
        for name in self.servers:
            if name in self._listings or name in self._failed:
                continue
            entry = self.cached(name)
            if entry is not None:
                out.update(entry.listing.specs)
        return out

    def _try_start(self, name: str) -> None:
        try:
            self.start(name)
        except UpstreamFailure as exc:
            log.warning("%s", exc)

    def failures(self) -> dict[str, str]:
        return dict(self._failed)

    def close(self) -> None:
        """Stop every server; no process is left behind."""
        with self._lock:
            self._closed = True
            conns = list(self._conns.values())
            self._conns.clear()
            loop = self._loop
            self._loop = None
        if loop is None:
            return

        async def stop_all() -> None:
            await asyncio.gather(*(c.stop() for c in conns), return_exceptions=True)

        try:
            loop.run(stop_all(), timeout=20)
        except Exception:  # noqa: BLE001
            log.warning(
                "upstream servers did not all stop cleanly: %s",
                ", ".join(c.spec.name for c in conns),
            )
        loop.close()

    # -- tools ----------------------------------------------------------------------

    def tools(self) -> dict[str, ToolSpec]:
        with self._lock:
            out: dict[str, ToolSpec] = {}
            for listing in self._listings.values():
                out.update(listing.specs)
            return out

    def server_of(self, tool: str) -> str | None:
        name = tool.split(".", 1)[0]
        return name if "." in tool and name in self.servers else None

    def resolve(self, tool: str) -> tuple[ToolSpec, Callable[[dict[str, Any]], Any]] | None:
        """The spec and handler of ``NAME.TOOL``, starting NAME if it is not running. A
        server that cannot start yields a tool whose call explains why."""
        name = self.server_of(tool)
        if name is None:
            return None
        try:
            self.start(name)
        except UpstreamFailure as exc:
            spec = ToolSpec(
                name=tool,
                description=str(exc),
                input_schema={"type": "object"},
                source=server_source(self.servers[name]),
            )
            message = str(exc)
            return spec, lambda args: {"error": message}
        listing = self._listings[name]
        found = listing.specs.get(tool)
        if found is None and tool in listing.refused:
            why = listing.refused[tool]
            refused = ToolSpec(
                name=tool,
                description=why,
                input_schema={"type": "object"},
                source=server_source(self.servers[name]),
            )
            return refused, lambda args: {"error": why}
        return None if found is None else (found, self.handler(tool))

    def handler(self, tool: str) -> Callable[[dict[str, Any]], Any]:
        def call(args: dict[str, Any]) -> Any:
            return self.call(tool, args)

        return call

    # -- calls ----------------------------------------------------------------------

    def call(self, tool: str, args: dict[str, Any]) -> Any:
        """Call ``NAME.TOOL`` upstream, retrying by policy; failures are ``{"error": ...}``."""
        name = self.server_of(tool)
        assert name is not None
        spec = self.servers[name]
        listing = self._listings.get(name)
        upstream = listing.upstream.get(tool) if listing else None
        if upstream is None:
            upstream = tool.split(".", 1)[1]
        policy = spec.retry_for(upstream)
        limit = self.config.limits.max_timeout_ms
        timeout_ms = min(spec.timeout_for(upstream), limit) if limit else spec.timeout_for(upstream)
        tool_spec = listing.specs.get(tool) if listing else None
        annotations = tool_spec.annotations if tool_spec is not None else None
        may_retry = policy.retry_non_idempotent or not (
            annotations and annotations.get("idempotent") is False
        )
        attempts = policy.max_attempts or 1
        retry_on = policy.retry_on or ()
        for attempt in range(1, attempts + 1):
            try:
                conn = self.start(name)
                try:
                    return self.loop.run(self._call(conn, tool, upstream, args, timeout_ms))
                except (concurrent.futures.CancelledError, RuntimeError) as exc:
                    if not self._closed:
                        raise
                    raise UpstreamFailure(
                        "error",
                        f'upstream server "{name}" was stopped during '
                        f'the call to "{tool}": the harness is closing',
                    ) from exc
            except UpstreamFailure as exc:
                if attempt < attempts and exc.kind in retry_on and may_retry:
                    log.info("%s; retrying (attempt %d of %d)", exc, attempt + 1, attempts)
                    time.sleep((policy.backoff_ms or 0) * (2 ** (attempt - 1)) / 1000)
                    continue
                msg = str(exc)
                if attempt > 1:
                    msg += f" (gave up after {attempt} attempts)"
                elif attempts > 1 and exc.kind in retry_on and not may_retry:
                    msg += (
                        " (not retried: the tool's annotations say it is not idempotent; "
                        "set retry.retry_non_idempotent: true to retry it anyway)"
                    )
                return {"error": msg}
        return {"error": f'tool "{tool}" was not called'}  # pragma: no cover

    async def _call(
        self, conn: Connection, tool: str, upstream: str, args: dict[str, Any], timeout_ms: int
    ) -> Any:
        from mcp.shared.exceptions import MCPError

        name = conn.spec.name
        seen = len(conn.http_statuses)
        try:
            async with asyncio.timeout(timeout_ms / 1000):  # no extra task, unlike wait_for
                result = await conn.client.call_tool(upstream, args)
        except TimeoutError:
            conn.dead = True
            asyncio.get_running_loop().create_task(conn.stop())
            raise UpstreamFailure(
                "timeout",
                f'upstream server "{name}" did not answer the call '
                f'to "{tool}" within {timeout_ms} ms; the server was stopped '
                "and is restarted on the next call",
            ) from None
        except MCPError as exc:
            if conn.dead or conn.client is None or "connection closed" in str(exc).lower():
                raise self._lost(conn, tool) from None
            statuses = conn.http_statuses[seen:]
            if statuses:
                status = statuses[-1]
                raise UpstreamFailure(
                    "5xx" if status >= 500 else "error",
                    f'upstream server "{name}" answered the call to "{tool}" with HTTP {status}',
                ) from None
            raise UpstreamFailure(
                failure_kind(exc),
                f'upstream server "{name}" refused the call to "{tool}": {describe(exc)}',
            ) from None
        except Exception as exc:  # noqa: BLE001 - transport errors (HTTP, pipes)
            kind = failure_kind(exc)
            if kind == "transient":
                raise self._lost(conn, tool, exc) from None
            raise UpstreamFailure(
                kind, f'upstream server "{name}" failed the call to "{tool}": {describe(exc)}'
            ) from None
        return convert(result)

    def _lost(
        self, conn: Connection, tool: str, exc: BaseException | None = None
    ) -> UpstreamFailure:
        conn.dead = True
        asyncio.get_running_loop().create_task(conn.stop())
        why = f": {describe(exc)}" if exc is not None else ""
        tail = conn.stderr_tail()
        said = f'; its last stderr line: "{tail}"' if tail else ""
        return UpstreamFailure(
            "transient",
            f'upstream server "{conn.spec.name}" crashed or '
            f'closed the connection during the call to "{tool}"{why}{said}; '
            "it is restarted on the next call",
        )
