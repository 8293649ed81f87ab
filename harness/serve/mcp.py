"""``harness serve``: the loaded tools as an MCP server, on the official ``mcp`` SDK
(docs/spec.md §11).

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
import itertools
import json
import logging
import re
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from harness.artifacts.export import definition, mcp_output_is_wrapped
from harness.core import Harness
from harness.core import load as load_harness
from harness.errors import HarnessError, LoadError
from harness.output import read_page
from harness.pipeline import cap_text, policy_allows, render, truncation_notice
from harness.results import ToolResult
from harness.runtime import cancel, placeholders
from harness.serve import info, tracing
from harness.serve.http import gone_event, identity_of
from harness.serve.info import changes_possible
from harness.serve.limits import CallGate, Refused
from harness.serve.watch import ReloadRefused, Snapshot, load_guarded, snapshot
from harness.session import Session
from harness.session_tools import TOOL_SEARCH
from harness.state import StateBackend, open_backend
from harness.state.cache import BackendCache, BackendMetrics
from harness.state.limits import from_config
from harness.state.spills import SpillStore

log = logging.getLogger("harness.serve")

READ_OUTPUT = "read_output"
ANONYMOUS = "anonymous"
CALL_THREADS = 64  # tool calls running at once on worker threads (the rest queue)

_call_ids = itertools.count(1)
_GONE = object()  # what _run_call gives when the client's connection closed mid-call
_GONE_WAITING = object()  # ... closed while the call waited for a slot (never started)


class ServeSession(Session):
    """A Session whose spilled outputs live in the server-wide :class:`SpillStore`.

    Refs survive the request (and the session) that made them, ``--watch`` reloads
    and, with a shared backend, the replica; each is readable only from ``scope``."""

    def __init__(
        self, harness: Harness, store: SpillStore, scope: str, shared_cache: bool = False
    ) -> None:
        self._store = store
        self.scope = scope
        super().__init__(harness)
        if shared_cache:  # cache values and metrics in the state backend, scoped like refs
            self.cache = BackendCache(store.backend, scope)  # type: ignore[assignment]
            self.metrics = BackendMetrics(store.backend, scope)  # type: ignore[assignment]

    def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, id: str | None = None
    ) -> ToolResult:
        if not tracing.active():
            return super().call(name, arguments, id=id)
        self.auditing = True  # the pipeline reports each hook run (hook.decision)
        with tracing.call_span(name, id or "") as span:
            result = super().call(name, arguments, id=id)
            tracing.finish_call(span, result)
            return result

    def emit(self, event: str, /, **fields: Any) -> None:
        super().emit(event, **fields)
        if event == "hook.decision" and tracing.active():
            tracing.hook_span(fields)

    def spill(self, text: str) -> str | None:
        try:
            return self._store.put(self.scope, text)
        except Exception as exc:  # noqa: BLE001 - a full output we cannot keep is cut
            log.warning("could not keep the full output: %s", exc)
            return None

    def _read_output(self, args: dict[str, Any]) -> Any:
        ref = args["ref"]
        try:
            data = self._store.get(self.scope, ref)
        except Exception as exc:  # noqa: BLE001
            return {"error": f'output ref "{ref}" cannot be read now: {exc}'}
        if data is None:
            return {
                "error": f'unknown output ref "{ref}": it expired, or it was made for '
                "another client (refs are readable only by the client that "
                "received them)"
            }
        return read_page(data, ref, args, self.harness.config.limits.max_output_bytes)


@dataclass(eq=False, slots=True)
class Generation:
    """One successfully loaded set of tools; retired (and closed) after a reload."""

    harness: Harness
    inflight: int = 0
    retired: bool = False
    sessions: list[Session] = field(default_factory=list)
    # name -> (spec, MCP inputSchema): the SDK checks Mcp-Param-* headers against it
    schemas: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def input_schema(self, name: str) -> Any:
        """The MCP ``inputSchema`` of a loaded tool, or None (never starts a server)."""
        spec = self.harness.loaded_tools.get(name)
        if spec is None:
            return None
        hit = self.schemas.get(name)
        if hit is None or hit[0] is not spec:
            hit = self.schemas[name] = (spec, definition(spec, "mcp")["inputSchema"])
        return hit[1]

    def deferred(self) -> dict[str, Any]:
        """Deferred tools a client may discover (enabled, allowed by tools_policy)."""
        h = self.harness
        return {
            n: t
            for n, t in h.loaded_tools.items()
            if t.loading == "deferred"
            and t.enabled
            and n != READ_OUTPUT
            and policy_allows(h.config, n)
        }


@dataclass(eq=False, slots=True)
class Client:
    """The state of one client: its session and the tools it has surfaced.

    Handshake-era clients are one per connection. Per-request (2026-07-28) clients
    have no connection: they are one per auth identity (``anonymous`` without auth)
    and live as long as the server."""

    key: Any
    gen: Generation
    session: ServeSession
    modern: bool = False
    surfaced: set[str] = field(default_factory=set)
    notify: Callable[[], Any] | None = None
    closed: bool = False
    version: str | None = None  # the protocol version negotiated (handshake era)


class _Server(Server[Any]):
    """The SDK's low-level server, advertising ``tools.listChanged`` truthfully on every
    transport (the HTTP session manager asks for options without passing any)."""

    tools_changed = False

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(tools_changed=self.tools_changed)
        return super().create_initialization_options(options, experimental_capabilities, extensions)


class HarnessMCPServer:
    """Serves one project root over MCP. Create, then ``await serve_stdio(server)``
    (serve/stdio.py) or ``await run_http(...)``."""

    def __init__(
        self,
        root: Path,
        *,
        watch: bool = False,
        watch_interval: float = 0.5,
        name: str = "harness",
        backend: StateBackend | None = None,
        harness: Harness | None = None,
    ) -> None:
        self.root = Path(root)
        self.watch = watch
        self.watch_interval = watch_interval
        self._snapshot: Snapshot = snapshot(self.root)
        # LoadError propagates at startup; the stdio fast path hands its own load.
        self.gen = Generation(harness if harness is not None else load_harness(self.root))
        state = self.gen.harness.config.state
        self.backend = (
            backend
            if backend is not None
            else open_backend(
                state.backend, state.url, namespace=state.namespace, limits=from_config(state)
            )
        )
        # Every session's cache and metrics live in the backend (either kind), under its
        # server-wide limits (issue 22 item 5).
        self.shared_cache = True
        self.spills = SpillStore(self.backend, ttl_s=float(state.spill_ttl_s))
        self.clients: dict[Any, Client] = {}
        self._listeners: dict[str, ListenHandler] = {}
        self._buses: dict[str, InMemorySubscriptionBus] = {}
        self._limiter: anyio.CapacityLimiter | None = None
        self.gate = CallGate()  # per-identity limits of HTTP calls (serve/limits.py)
        self.server = _Server(
            name,
            version=info.version(),
            instructions=self.gen.harness.system_prompt,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
            # Without it the SDK runs a whole tools/list per tools/call (2026-07-28) to
            # find the schema the Mcp-Param-* headers are checked against.
            get_tool_input_schema=lambda name: self.gen.input_schema(name),
        )
        self.server.tools_changed = self._changes_possible()
        self.server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._initialized
        )
        self._log_tool_search_shadowing()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._follow_upstream(self.gen)

    def _changes_possible(self) -> bool:
        """Whether the listing can ever change: a reload, or tool_search surfacing."""
        return changes_possible(self.gen.harness, self.watch)

    # -- clients -----------------------------------------------------------------------

    def init_options(self) -> InitializationOptions:
        return self.server.create_initialization_options()

    def _client(self, ctx: Any) -> Client:
        """The Client a request belongs to, created on first use."""
        identity = identity_of(ctx.request)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            scope = identity or ANONYMOUS
            key: Any = ("modern", scope)
            client = self.clients.get(key)
            if client is None:
                client = Client(
                    key=key, gen=self.gen, modern=True, session=self._new_session(self.gen, scope)
                )
                self.clients[key] = client
            return client
        # The SDK keeps the per-connection object on the request's ServerSession; it
        # has no public accessor yet. Without it, every request shares one client.
        connection = getattr(ctx.session, "_connection", None)
        key = ("conn", id(connection) if connection is not None else 0)
        client = self.clients.get(key)
        if client is not None and not client.closed:
            if identity is not None and client.session.scope != identity:
                # The transport binds a session to its identity (serve/http.py); should
                # a request of another one get here anyway, it never sees this client.
                raise ValueError("Session not found")
            return client
        scope = identity or f"connection:{uuid.uuid4().hex}"
        client = Client(
            key=key,
            gen=self.gen,
            session=self._new_session(self.gen, scope),
            version=ctx.protocol_version,
        )
        self.clients[key] = client
        if connection is not None:
            client.notify = connection.send_tool_list_changed
            connection.exit_stack.push_async_callback(self._drop_client, client)
        else:
            client.notify = ctx.session.send_tool_list_changed
        log.debug("client connected")
        return client

    def _new_session(self, gen: Generation, scope: str) -> ServeSession:
        session = ServeSession(gen.harness, self.spills, scope, self.shared_cache)
        gen.sessions.append(session)
        return session

    async def _drop_client(self, client: Client) -> None:
        client.closed = True
        if self.clients.get(client.key) is client:
            del self.clients[client.key]
        gen = client.gen
        with contextlib.suppress(ValueError):
            gen.sessions.remove(client.session)
        await anyio.to_thread.run_sync(client.session.close)
        if client.session.scope.startswith("connection:"):
            self.gate.forget(client.session.scope)
        log.debug("client disconnected")

    async def _initialized(self, ctx: Any, params: Any) -> None:
        self._loop = asyncio.get_running_loop()
        self._client(ctx)

    # -- subscriptions/listen (2026-07-28) ----------------------------------------------

    def _bus(self, scope: str) -> InMemorySubscriptionBus:
        bus = self._buses.get(scope)
        if bus is None:
            bus = self._buses[scope] = InMemorySubscriptionBus()
            self._listeners[scope] = ListenHandler(bus)
        return bus

    async def _listen(self, ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
        scope = identity_of(ctx.request) or ANONYMOUS
        self._bus(scope)
        return await self._listeners[scope](ctx, params)

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
        """tools/list_changed to every handshake-era client and, once, to every bus."""
        for client in list(self.clients.values()):
            if not client.modern:
                await self._notify(client)
        for bus in list(self._buses.values()):
            await bus.publish(ToolsListChanged())

    # -- tools/list --------------------------------------------------------------------

    def visible_names(self, client: Client) -> list[str]:
        h = client.gen.harness
        loaded = _known(h)
        names = {
            n
            for n, t in loaded.items()
            if t.enabled and t.loading == "always" and policy_allows(h.config, n)
        }
        deferred = client.gen.deferred()
        names |= client.surfaced & set(deferred)
        if READ_OUTPUT in loaded and policy_allows(h.config, READ_OUTPUT):
            # Always listed: a truncated result must not change the listing.
            names.add(READ_OUTPUT)
        return sorted(names)

    def list_definitions(self, client: Client) -> list[dict[str, Any]]:
        """The MCP tool definitions this client sees now."""
        h = client.gen.harness
        defs = h.definitions("mcp", include_deferred=True, names=self.visible_names(client))
        extra = client.session.extra_tool(TOOL_SEARCH)
        if extra is not None and TOOL_SEARCH not in h.loaded_tools:
            defs.append(definition(extra[0], "mcp"))
        return sorted(defs, key=lambda d: d["name"])

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        up = self.gen.harness.upstream
        if up is not None and up.pending():
            # A deferred upstream server with no cached listing starts on the first
            # listing: seconds, so on a worker thread, never on the event loop (other
            # clients are served meanwhile). One with a cached listing is listed from it.
            await anyio.to_thread.run_sync(up.start_uncached)
        client = self._client(ctx)
        tools = [types.Tool.model_validate(d) for d in self.list_definitions(client)]
        return types.ListToolsResult(tools=tools)

    # -- tools/call --------------------------------------------------------------------

    async def _call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = params.arguments if params.arguments is not None else {}
        return await self.call(self._client(ctx), params.name, arguments, gone=gone_event(ctx))

    async def call(
        self,
        client: Client,
        name: str,
        arguments: Mapping[str, Any],
        gone: anyio.Event | None = None,
    ) -> types.CallToolResult:
        """One tools/call of ``client`` through the pipeline (on a worker thread): the
        SDK's handler and the stdio fast lane (serve/stdio.py) both come here.

        Over HTTP the call waits for a slot of its identity (serve/limits.py), and
        ``gone`` (set when the request's connection closes) cancels it."""
        gen, session = client.gen, client.session
        # Unique across connections and eras (request ids are not): cancellation and
        # the audit trail find the call by it.
        call_id = f"mcp-{next(_call_ids)}"
        finished = False

        def run() -> ToolResult | None:
            nonlocal finished
            try:
                if cancel.is_cancelled(call_id):
                    return None  # cancelled before a thread picked it up: never start
                return session.call(name, arguments, id=call_id)
            finally:
                finished = True
                cancel.forget(call_id)

        gen.inflight += 1
        try:
            result = await self._run_call(client, run, gone)
        except anyio.get_cancelled_exc_class():
            _stop(
                session, name, call_id, finished, "the client cancelled the request or disconnected"
            )
            raise
        except Exception as exc:  # noqa: BLE001 - the pipeline should never raise; be safe
            log.exception("tool %r raised inside the server", name)
            return _error_result(
                f'tool "{name}" failed inside the server: {type(exc).__name__}: {exc}'
            )
        finally:
            gen.inflight -= 1
            if gen.retired and gen.inflight == 0:
                await self._close_generation(gen)
        if isinstance(result, Refused):
            return _error_result(f'tool "{name}" was not called: {result}')
        if result is _GONE or result is _GONE_WAITING:
            # run() never starts after _GONE_WAITING: nothing is left to stop later.
            done = finished or result is _GONE_WAITING
            _stop(session, name, call_id, done, "the client's connection closed first")
            return _error_result(f'call of tool "{name}" was cancelled: the client went away')
        if result is None:  # pragma: no cover - only a cancelled call has none
            return _error_result(f'call of tool "{name}" was cancelled')
        assert isinstance(result, ToolResult)
        if await self._surface(client, name, result):
            await self._notify(client)
        return self._to_mcp(gen, session, name, result)

    async def _run_call(
        self, client: Client, run: Callable[[], ToolResult | None], gone: anyio.Event | None
    ) -> object:
        """``run`` on a worker thread, within the identity's limits (HTTP); _GONE when
        the client's connection closed first (the thread is abandoned: the caller
        cancels the call), _GONE_WAITING when it closed before a slot was free."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(CALL_THREADS)
        limiter = self._limiter
        if gone is None:
            return await anyio.to_thread.run_sync(run, abandon_on_cancel=True, limiter=limiter)
        config = client.gen.harness.config
        result: object = _GONE_WAITING
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await gone.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                async with self.gate.slot(
                    client.session.scope, config.serve, config.limits.max_concurrency
                ):
                    result = _GONE
                    result = await anyio.to_thread.run_sync(
                        run, abandon_on_cancel=True, limiter=limiter
                    )
            except Refused as exc:  # raised out of the task group, it would be a group
                result = exc
            tg.cancel_scope.cancel()
        return result

    async def _surface(self, client: Client, name: str, result: ToolResult) -> bool:
        """Record tools this result makes visible; True when the listing changed."""
        before = len(client.surfaced)
        if (
            name == TOOL_SEARCH
            and not result.is_error
            and isinstance(result.value, dict)
            and TOOL_SEARCH not in client.gen.harness.loaded_tools
        ):
            deferred = client.gen.deferred()
            for hit in result.value.get("tools") or ():
                if isinstance(hit, dict) and hit.get("name") in deferred:
                    client.surfaced.add(hit["name"])
        return len(client.surfaced) != before

    def _to_mcp(
        self, gen: Generation, session: ServeSession, name: str, result: ToolResult
    ) -> types.CallToolResult:
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=result.text)]
        if result.is_error:
            return types.CallToolResult(content=content, is_error=True)
        spec = gen.harness.loaded_tools.get(name)
        if spec is None:
            extra = session.extra_tool(name)
            spec = extra[0] if extra is not None else None
        typed = spec is not None and spec.returns is not None
        if typed and _replaced_by_text(spec, result):
            # A tool.post hook rewrote the text (modify({"content": ...})): the value is
            # that text now, not the typed value; it goes out as content, unclaimed.
            return types.CallToolResult(content=content, is_error=False)
        structured: dict[str, Any] | None = None
        if typed and spec is not None and mcp_output_is_wrapped(spec.returns):
            structured = {"result": result.value}
        elif isinstance(result.value, dict) and not result.truncated:
            structured = dict(result.value)
        max_bytes = gen.harness.config.limits.max_output_bytes
        if structured is not None and (result.truncated or _json_size(structured) > max_bytes):
            structured = None
        if typed and structured is None:
            # The outputSchema requires structuredContent, which may not carry more than
            # max_output_bytes: an error result instead (clients do not validate those)
            # whose text is the capped output and names the ref of the full value.
            return types.CallToolResult(
                content=[
                    types.TextContent(
                        type="text", text=self._capped_text(session, result, max_bytes)
                    )
                ],
                is_error=True,
            )
        return types.CallToolResult(content=content, structured_content=structured, is_error=False)

    @staticmethod
    def _capped_text(session: ServeSession, result: ToolResult, max_bytes: int) -> str:
        if result.truncated:
            return result.text
        text = render(result.value)  # fits as text; only the structured form is over
        ref = session.spill(text)
        notice = truncation_notice(max_bytes, ref, 0)
        room = max(0, max_bytes - len(notice.encode("utf-8")) - 16)
        head, _ = cap_text(text, room)
        return head + truncation_notice(max_bytes, ref, len(head.encode("utf-8")))

    async def _notify(self, client: Client) -> None:
        if client.closed:
            return
        try:
            if client.modern:
                scope = client.session.scope
                if scope in self._buses:
                    await self._buses[scope].publish(ToolsListChanged())
            elif client.notify is not None:
                await client.notify()
        except Exception:  # noqa: BLE001 - a notification is best-effort
            log.debug("could not send tools/list_changed", exc_info=True)

    # -- reload ------------------------------------------------------------------------

    async def watch_loop(self) -> None:
        """Poll artifact mtimes; reload and notify on change. Runs until cancelled."""
        log.info("watching %s for changes", self.root)
        workspace = str(self.gen.harness.config.workspace)
        runs = placeholders.runs_started()
        while True:
            await anyio.sleep(self.watch_interval)
            started, runs = runs, placeholders.runs_started()
            current = await anyio.to_thread.run_sync(snapshot, self.root)
            if current != self._snapshot:
                self._snapshot = current
                # A sandboxed command or server of this process started since the last
                # look, or one of any process runs now (watch.load_guarded).
                during = started != runs or await anyio.to_thread.run_sync(
                    placeholders.running_now, workspace
                )
                await self.reload(during_sandbox=during)

    async def reload(self, *, during_sandbox: bool = False) -> bool:
        """Load the root again; swap in the new tools only when they load cleanly (and,
        ``during_sandbox``, loosen nothing: see ``watch.load_guarded``)."""
        old_project = self.gen.harness.project
        try:
            harness = await anyio.to_thread.run_sync(
                load_guarded, self.root, old_project, during_sandbox
            )
        except ReloadRefused as exc:
            log.error(
                "reload refused; keeping the last good tools: the change was made while a "
                "sandboxed command or upstream server ran, and it loosens the sandbox (%s). "
                "Check harness.md and .harness/, then restart harness serve to apply it",
                exc,
            )
            return False
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
            client.session = self._new_session(new, client.session.scope)
            client.surfaced &= set(new.deferred())
        old.retired = True
        if old.inflight == 0:
            await self._close_generation(old)
        log.info("reloaded %s: %d tools", self.root, self.tool_count())
        self._log_tool_search_shadowing()
        await self._notify_all()
        return True

    async def _close_generation(self, gen: Generation) -> None:
        def close() -> None:
            for session in gen.sessions:
                session.close()
            gen.harness.close()

        await anyio.to_thread.run_sync(close)

    def _log_tool_search_shadowing(self) -> None:
        h = self.gen.harness
        if TOOL_SEARCH in h.loaded_tools and self.gen.deferred():
            log.warning(
                'a project tool is named "%s": it replaces the built-in search, so '
                "deferred tools can only be called by name",
                TOOL_SEARCH,
            )

    # -- transports (stdio: serve/stdio.py) ----------------------------------------------

    def close_listeners(self) -> None:
        for listener in self._listeners.values():
            listener.close()

    async def run_http(
        self,
        sock: Any,
        *,
        host: str,
        port: int,
        tokens: Sequence[str] = (),
        allowed_hosts: Sequence[str] = (),
        allowed_origins: Sequence[str] = (),
        header_timeout: float = 10.0,
        max_connections: int = 512,
    ) -> None:
        import uvicorn
        from mcp.server.transport_security import TransportSecuritySettings

        from harness.serve.connections import guarded_protocol
        from harness.serve.http import BearerAuth, DisconnectWatch, host_policy
        from harness.serve.sessions import SessionBounds

        policy = host_policy(host, port, allowed_hosts, allowed_origins)
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(policy.allowed_hosts),
            allowed_origins=list(policy.allowed_origins),
        )
        app: Any = self.server.streamable_http_app(
            host=host, transport_security=security, max_sessions=None
        )
        # serve.max_sessions(_per_identity) bound the sessions instead (serve/sessions.py)
        SessionBounds(self.server.session_manager, lambda: self.gen.harness.config.serve)
        app = DisconnectWatch(app)
        admit = None
        if tokens:
            app = BearerAuth(app, tokens)
            admit = app.admits
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="on",
            access_log=False,
            http=guarded_protocol(header_timeout, max_connections, admit),
            timeout_keep_alive=5,
            timeout_graceful_shutdown=2,
        )
        server = uvicorn.Server(config)
        self._warm_workers()
        async with anyio.create_task_group() as tg:
            if self.watch:
                tg.start_soon(self.watch_loop)
            # Always said (even with --log-level warning): with --port 0 it is the only
            # way to learn the port.
            log.log(
                max(logging.INFO, log.getEffectiveLevel()),
                "serving %d tools from %s on http://%s:%d/mcp%s",
                self.tool_count(),
                self.root,
                _url_host(host),
                port,
                " (bearer tokens required)" if tokens else "",
            )
            await server.serve(sockets=[sock])
            tg.cancel_scope.cancel()

    def _warm_workers(self) -> None:
        """Start the script worker pool in the background (process isolation): a server
        under load must not make its first callers wait for worker processes to start,
        one after another (issue 26 item 3: the p99 of the first calls)."""
        h = self.gen.harness
        if h.config.runtime.isolation != "process":
            return
        warm = getattr(h.runtime, "warm", None)
        if warm is not None:
            threading.Thread(target=warm, name="harness-warm-workers", daemon=True).start()

    def tool_count(self) -> int:
        """Tools listed now (those of deferred upstream servers neither started nor
        cached aside)."""
        h = self.gen.harness
        return sum(
            1
            for n, t in _known(h).items()
            if t.enabled and t.loading == "always" and policy_allows(h.config, n)
        )

    def close(self) -> None:
        for listener in self._listeners.values():
            listener.close()
        for client in list(self.clients.values()):
            client.session.close()
        self.gen.harness.close()
        self.backend.close()


def _stop(session: ServeSession, name: str, call_id: str, finished: bool, reason: str) -> None:
    """notifications/cancelled, or the client went away: stop the call (the Starlark
    run, the command's process group, the worker) and record it."""
    cancel.cancel(call_id)
    if finished:
        cancel.forget(call_id)
    with contextlib.suppress(Exception):
        session.emit("tool.cancelled", tool=name, call_id=call_id, reason=reason)
    log.info('call of tool "%s" cancelled: %s', name, reason)


def _json_size(value: Mapping[str, Any]) -> int:
    return len(
        json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")
    )


def _error_result(text: str) -> types.CallToolResult:
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    return types.CallToolResult(content=content, is_error=True)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def quiet_sdk_logs() -> None:
    """The SDK and uvicorn log session ids at INFO: keep them at WARNING or above, and
    never let a session id through (docs/spec.md §8.10: session ids are credentials)."""
    for name in ("mcp", "uvicorn", "uvicorn.error", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("mcp").addFilter(_no_session_ids)


_SESSION_ID = re.compile(r"session id|[0-9a-f]{16,}", re.IGNORECASE)


def _no_session_ids(record: logging.LogRecord) -> bool:
    """Drop SDK records that carry a session id (a bearer credential for the session)."""
    return _SESSION_ID.search(record.getMessage()) is None


def _known(h: Harness) -> Mapping[str, Any]:
    """The tools a listing shows: loaded ones and, for upstream servers not started,
    their cached ones (never starts a server: this runs on the event loop)."""
    return h.loaded_tools if h.upstream is None else h.all_tools


def _replaced_by_text(spec: Any, result: ToolResult) -> bool:
    """The typed tool's value is a text a hook put in its place (nothing over the cap)."""
    if result.truncated or not isinstance(result.value, str):
        return False
    returns = spec.returns if isinstance(spec.returns, dict) else {}
    kinds = returns.get("type")
    declared = kinds if isinstance(kinds, list) else [kinds]
    return kinds is not None and "string" not in declared
