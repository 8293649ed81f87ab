"""``harness serve``: the loaded tools as an MCP server, on the official ``mcp`` SDK (SPEC §11).

Built on the SDK's low-level :class:`mcp.server.lowlevel.Server`, which leaves
``tools/list`` and ``tools/call`` results entirely to us:

- ``tools/list``: name, title, description, ``inputSchema``, ``outputSchema`` (from
  ``returns``), annotations, from :func:`harness.artifacts.export.definitions`.
  Deferred tools are hidden until ``tool_search`` finds them (per client connection);
  ``read_output`` (the harness's pager for truncated outputs) is always listed.
- ``tools/call``: every call runs through the full pipeline in the connection's own
  :class:`~harness.core.Session`. Bad arguments, blocks, timeouts and tool failures
  are ``isError`` results whose text is the pipeline's message, never protocol
  errors. ``structuredContent`` is sent when the value is an object (or wrapped as
  ``{"result": value}`` when ``returns`` is not an object schema).
- ``--watch`` polls artifact mtimes, reloads, and sends
  ``notifications/tools/list_changed``; a reload that fails validation keeps the last
  good set and logs the problems. Logs go to stderr only: stdout is the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions

from harness.artifacts.export import definition, mcp_output_is_wrapped
from harness.core import Harness, Session
from harness.core import load as load_harness
from harness.errors import HarnessError, LoadError, UsageError
from harness.pipeline import policy_allows
from harness.results import ToolResult
from harness.serve import search
from harness.serve.watch import Snapshot, snapshot

log = logging.getLogger("harness.serve")

READ_OUTPUT = "read_output"


@dataclass(eq=False, slots=True)
class Generation:
    """One successfully loaded set of tools; retired (and closed) after a reload."""

    harness: Harness
    inflight: int = 0
    retired: bool = False
    sessions: list[Session] = field(default_factory=list)

    def deferred(self) -> dict[str, Any]:
        """Deferred tools a client may discover (enabled, allowed by tools_policy)."""
        h = self.harness
        return {n: t for n, t in h.all_tools.items()
                if t.loading == "deferred" and t.enabled and n != READ_OUTPUT
                and policy_allows(h.config, n)}


@dataclass(eq=False, slots=True)
class Client:
    """The state of one MCP connection: its session and the tools it has surfaced."""

    key: int
    gen: Generation
    session: Session
    surfaced: set[str] = field(default_factory=set)
    notify: Callable[[], Any] | None = None
    closed: bool = False


class HarnessMCPServer:
    """Serves one project root over MCP. Create, then ``await run_stdio()`` or ``run_http()``."""

    def __init__(self, root: Path, *, watch: bool = False, watch_interval: float = 0.5,
                 name: str = "harness") -> None:
        self.root = Path(root)
        self.watch = watch
        self.watch_interval = watch_interval
        self._snapshot: Snapshot = snapshot(self.root)
        self.gen = Generation(load_harness(self.root))  # LoadError propagates at startup
        self.clients: dict[int, Client] = {}
        self.server: Server[Any] = Server(
            name,
            version=_version(),
            instructions=self.gen.harness.system_prompt,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._initialized)
        self._log_tool_search_shadowing()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._follow_upstream(self.gen)

    # -- connections -------------------------------------------------------------------

    def init_options(self) -> InitializationOptions:
        return self.server.create_initialization_options(NotificationOptions(tools_changed=True))

    def _client(self, ctx: Any) -> Client:
        """The Client of the connection ``ctx`` belongs to, created on first use."""
        # The SDK keeps the per-connection object on the request's ServerSession; it
        # has no public accessor yet. Without it, every request shares one client.
        connection = getattr(ctx.session, "_connection", None)
        key = id(connection) if connection is not None else 0
        client = self.clients.get(key)
        if client is not None and not client.closed:
            return client
        client = Client(key=key, gen=self.gen, session=self._new_session(self.gen))
        self.clients[key] = client
        if connection is not None:
            client.notify = connection.send_tool_list_changed
            connection.exit_stack.push_async_callback(self._drop_client, client)
        else:
            client.notify = ctx.session.send_tool_list_changed
        log.debug("client connected (session %s)", client.session.id)
        return client

    def _new_session(self, gen: Generation) -> Session:
        session = gen.harness.session()
        gen.sessions.append(session)
        if gen.deferred() and search.NAME not in gen.harness.all_tools:
            index = search.ToolIndex(gen.deferred().values())
            session.register_tool(search.tool_spec(), lambda args: search.run_search(index, args))
        return session

    async def _drop_client(self, client: Client) -> None:
        client.closed = True
        if self.clients.get(client.key) is client:
            del self.clients[client.key]
        gen = client.gen
        with contextlib.suppress(ValueError):
            gen.sessions.remove(client.session)
        await anyio.to_thread.run_sync(client.session.close)
        log.debug("client disconnected (session %s)", client.session.id)

    async def _initialized(self, ctx: Any, params: Any) -> None:
        self._loop = asyncio.get_running_loop()
        self._client(ctx)

    def _follow_upstream(self, gen: Generation) -> None:
        """Pass an upstream server's tools/list_changed on to every client (upstream/)."""
        up = gen.harness.upstream
        if up is None:
            return

        def changed() -> None:  # called on the upstream client's thread
            loop = self._loop
            if loop is not None and gen is self.gen and not loop.is_closed():
                asyncio.run_coroutine_threadsafe(self._notify_all(), loop)

        up.listeners.append(changed)

    async def _notify_all(self) -> None:
        for client in list(self.clients.values()):
            await self._notify(client)

    # -- tools/list --------------------------------------------------------------------

    def visible_names(self, client: Client) -> list[str]:
        h = client.gen.harness
        names = set(h.tools)
        deferred = client.gen.deferred()
        names |= client.surfaced & set(deferred)
        if READ_OUTPUT in client.surfaced:
            names.add(READ_OUTPUT)
        return sorted(names)

    def list_definitions(self, client: Client) -> list[dict[str, Any]]:
        """The MCP tool definitions this client sees now."""
        h = client.gen.harness
        defs = h.definitions("mcp", include_deferred=True, names=self.visible_names(client))
        extra = client.session.extra_tool(search.NAME)
        if extra is not None and search.NAME not in h.all_tools:
            defs.append(definition(extra[0], "mcp"))
        return sorted(defs, key=lambda d: d["name"])

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        client = self._client(ctx)
        tools = [types.Tool.model_validate(d) for d in self.list_definitions(client)]
        return types.ListToolsResult(tools=tools)

    # -- tools/call --------------------------------------------------------------------

    async def _call_tool(self, ctx: Any,
                         params: types.CallToolRequestParams) -> types.CallToolResult:
        client = self._client(ctx)
        name = params.name
        arguments = params.arguments if params.arguments is not None else {}
        gen, session = client.gen, client.session
        gen.inflight += 1
        try:
            result = await session.acall(name, arguments, id=f"mcp-{ctx.request_id}")
        except Exception as exc:  # noqa: BLE001 - the pipeline should never raise; be safe
            log.exception("tool %r raised inside the server", name)
            return _error_result(f'tool "{name}" failed inside the server: '
                                 f"{type(exc).__name__}: {exc}")
        finally:
            gen.inflight -= 1
            if gen.retired and gen.inflight == 0:
                await self._close_generation(gen)
        if await self._surface(client, name, result):
            await self._notify(client)
        return self._to_mcp(gen, session, name, result)

    async def _surface(self, client: Client, name: str, result: ToolResult) -> bool:
        """Record tools this result makes visible; True when the listing changed."""
        before = len(client.surfaced)
        if result.output_ref is not None:
            client.surfaced.add(READ_OUTPUT)
        if (name == search.NAME and not result.is_error and isinstance(result.value, dict)
                and search.NAME not in client.gen.harness.all_tools):
            deferred = client.gen.deferred()
            for hit in result.value.get("tools") or ():
                if isinstance(hit, dict) and hit.get("name") in deferred:
                    client.surfaced.add(hit["name"])
        return len(client.surfaced) != before

    def _to_mcp(self, gen: Generation, session: Session, name: str,
                result: ToolResult) -> types.CallToolResult:
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=result.text)]
        if result.is_error:
            return types.CallToolResult(content=content, is_error=True)
        spec = gen.harness.all_tools.get(name)
        if spec is None:
            extra = session.extra_tool(name)
            spec = extra[0] if extra is not None else None
        structured: dict[str, Any] | None = None
        if spec is not None and spec.returns is not None and mcp_output_is_wrapped(spec.returns):
            structured = {"result": result.value}
        elif isinstance(result.value, dict):
            # A tool without an outputSchema whose text was cut: the capped text is
            # what the model gets (SPEC §8.6); an outputSchema requires the object.
            if not (result.truncated and (spec is None or spec.returns is None)):
                structured = dict(result.value)
        return types.CallToolResult(content=content, structured_content=structured,
                                    is_error=False)

    async def _notify(self, client: Client) -> None:
        if client.notify is None or client.closed:
            return
        try:
            await client.notify()
        except Exception:  # noqa: BLE001 - a notification is best-effort
            log.debug("could not send tools/list_changed", exc_info=True)

    # -- reload ------------------------------------------------------------------------

    async def watch_loop(self) -> None:
        """Poll artifact mtimes; reload and notify on change. Runs until cancelled."""
        log.info("watching %s for changes", self.root)
        while True:
            await anyio.sleep(self.watch_interval)
            current = await anyio.to_thread.run_sync(snapshot, self.root)
            if current != self._snapshot:
                self._snapshot = current
                await self.reload()

    async def reload(self) -> bool:
        """Load the root again; swap in the new tools only when they load cleanly."""
        try:
            harness = await anyio.to_thread.run_sync(load_harness, self.root)
        except LoadError as exc:
            log.error("reload failed; keeping the last good tools. Problems:")
            for problem in exc.problems:
                log.error("  %s", problem.render())
            return False
        except (HarnessError, OSError) as exc:
            log.error("reload failed; keeping the last good tools: %s", exc)
            return False
        old, new = self.gen, Generation(harness)
        self.gen = new
        self._follow_upstream(new)
        self.server.instructions = harness.system_prompt
        for client in list(self.clients.values()):
            client.gen = new
            client.session = self._new_session(new)
            client.surfaced &= set(new.deferred()) | {READ_OUTPUT}
        old.retired = True
        if old.inflight == 0:
            await self._close_generation(old)
        log.info("reloaded %s: %d tools", self.root, len(harness.tools))
        self._log_tool_search_shadowing()
        for client in list(self.clients.values()):
            await self._notify(client)
        return True

    async def _close_generation(self, gen: Generation) -> None:
        def close() -> None:
            for session in gen.sessions:
                session.close()
            gen.harness.close()

        await anyio.to_thread.run_sync(close)

    def _log_tool_search_shadowing(self) -> None:
        h = self.gen.harness
        if search.NAME in h.all_tools and self.gen.deferred():
            log.warning('a project tool is named "%s": it replaces the built-in search, so '
                        "deferred tools can only be called by name", search.NAME)

    # -- transports ----------------------------------------------------------------------

    async def run_stdio(self) -> None:
        from mcp.server.stdio import stdio_server

        async with anyio.create_task_group() as tg:
            if self.watch:
                tg.start_soon(self.watch_loop)
            async with stdio_server() as (read_stream, write_stream):
                log.info("serving %d tools from %s over stdio", len(self.gen.harness.tools),
                         self.root)
                await self.server.run(read_stream, write_stream, self.init_options())
            tg.cancel_scope.cancel()

    async def run_http(self, host: str = "127.0.0.1", port: int = 8000) -> None:
        import uvicorn

        if host not in ("127.0.0.1", "localhost", "::1"):
            log.warning("listening on %s: every tool is reachable by anyone who can connect, "
                        "without authentication", host)
        app = self.server.streamable_http_app(host=host)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                                lifespan="on", access_log=False)
        server = uvicorn.Server(config)
        async with anyio.create_task_group() as tg:
            if self.watch:
                tg.start_soon(self.watch_loop)
            log.info("serving %d tools from %s on http://%s:%d/mcp",
                     len(self.gen.harness.tools), self.root, _url_host(host), port)
            await server.serve()
            tg.cancel_scope.cancel()

    def close(self) -> None:
        for client in list(self.clients.values()):
            client.session.close()
        self.gen.harness.close()


def _error_result(text: str) -> types.CallToolResult:
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    return types.CallToolResult(content=content, is_error=True)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("harness")
    except PackageNotFoundError:  # pragma: no cover - running from a checkout
        return "0"


def serve(root: Path, *, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8000,
          watch: bool = False, watch_interval: float = 0.5) -> None:
    """Run the server until the client disconnects (stdio) or it is interrupted (http)."""
    if transport not in ("stdio", "http"):
        raise UsageError(f'unknown transport "{transport}"; use stdio or http')
    server = HarnessMCPServer(root, watch=watch, watch_interval=watch_interval)
    try:
        if transport == "stdio":
            asyncio.run(server.run_stdio())
        else:
            asyncio.run(server.run_http(host, port))
    finally:
        server.close()
