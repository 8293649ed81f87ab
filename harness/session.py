"""Session: one run of an agent, with its own cache, spilled outputs, audit identity and
session-scoped tools (docs/spec.md §12). It is the ``CallEnv`` of the calls it makes.

``harness`` is the :class:`~harness.core.Harness` that made it (typed ``Any``: this
module sits below ``core``, which imports it).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.artifacts.export import definitions as export_definitions
from harness.artifacts.export import export_name, without_clashes
from harness.artifacts.model import Source, ToolSpec
from harness.audit import log_event
from harness.errors import BuiltinError, UsageError
from harness.hooks import ChainOutcome
from harness.output import read_page
from harness.pipeline import Handler, policy_allows, run_call
from harness.results import ToolCall, ToolResult, make_call
from harness.runtime.builtins.cache import MemoryCache
from harness.runtime.builtins.session_state import MetricsStore, Scratchpad
from harness.runtime.builtins.session_state import serve as serve_state
from harness.runtime.context import CallContext
from harness.session_tools import deferred_tools, install_tool_search, register_meta_tool

_log = logging.getLogger("harness")

MAX_EMIT_DEPTH = 8  # emit() nested through hooks (hooks cannot emit today: a safety net)


_ids = itertools.count(1)


class Session:
    """One run of an agent: its own cache, spilled outputs and audit identity."""

    def __init__(self, harness: Any, session_id: str | None = None) -> None:
        self.harness = harness
        self.id = session_id or uuid.uuid4().hex[:12]
        self.cache = MemoryCache()
        self.metrics = MetricsStore()
        # The scratchpad of the agent turn in progress (``ctx`` in scripts), or None.
        self.turn_pad: Scratchpad | None = None
        self.turns = 0
        self._emit_depth = threading.local()
        self._audit = harness.audit
        self.auditing = self._audit is not None or logging.getLogger("harness.audit").isEnabledFor(
            logging.DEBUG
        )
        self._spills: dict[str, Path] = {}
        self._spill_dir = harness.root / ".harness" / "state" / "spill" / self.id
        self._extra: dict[str, tuple[ToolSpec, Handler | None]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._ended = False
        self._extra["read_output"] = (harness.defined_tools["read_output"], self._read_output)
        # Deferred tools found by tool_search: listed for the rest of the session.
        self.surfaced: set[str] = set()
        install_tool_search(self)
        # A session.start block refuses the session (as ai-harness aborts it): every
        # call and run in it then fails with the hook's reason (docs/hooks.md).
        self.refused: str | None = None
        self.refused_by: str | None = None
        self.emit("session.start")
        started = self.fire("session.start", {})
        if started.blocked_by is not None:
            self.refused = f"session refused: {started.why}"
            self.refused_by = started.blocked_by

    def fire(self, event: str, payload: Mapping[str, Any]) -> ChainOutcome:
        """Run the hooks of ``event`` (``session.*`` or ``custom.<name>``) on ``payload``.

        Returns the chain outcome (``blocked_by``, ``reason``, the possibly modified
        ``payload``, with ``session`` added), also when no hook handles the event; what
        a block means for a custom event is up to the caller.
        """
        chain = self.harness.hook_chain
        full = {**payload, "session": self.id}
        if not chain.for_event(event):
            # No hook handles it: the outcome of an empty chain (never None).
            return ChainOutcome(payload=full)
        out = chain.run(
            event, full, self.harness.runtime, self._pad_ctx(self.turn_pad or Scratchpad())
        )
        if out.blocked_by is not None:
            self.emit(
                "hook.decision",
                hook_event=event,
                hook=out.blocked_by,
                decision="block",
                reason=out.reason,
            )
        return out

    def handles(self, event: str) -> bool:
        """Whether any hook of this session's harness handles ``event``."""
        return bool(self.harness.hook_chain.for_event(event))

    # -- CallEnv -----------------------------------------------------------------

    def log(self, level: str, message: str, fields: Mapping[str, Any]) -> None:
        lvl = {"info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}.get(
            level, logging.INFO
        )
        _log.log(
            lvl,
            "%s %s",
            message,
            dict(fields) if fields else "",
            extra={"harness_record": (level, message, fields, self.id)},  # cli/verbose.py
        )
        if self._audit is not None:
            self._audit.write(self.id, "log", {**fields, "level": level, "message": message})

    def emit(self, event: str, /, **fields: Any) -> None:
        if self._audit is not None:
            self._audit.write(self.id, event, fields)
        log_event(self.id, event, fields)

    def spill(self, text: str) -> str | None:
        ref = f"out-{next(_ids)}"
        try:
            self._spill_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = self._spill_dir / f"{ref}.txt"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
        except OSError as exc:
            _log.warning("could not keep the full output: %s", exc)
            return None
        self._spills[ref] = path
        return ref

    def extra_tool(self, name: str) -> tuple[ToolSpec, Handler | None] | None:
        found = self._extra.get(name)
        up = self.harness.upstream
        if found is None and up is not None and up.server_of(name) is not None:
            why = self.harness.upstream_left_out(name)
            if why is not None:  # it would export like another tool: never offered
                spec = ToolSpec(
                    name=name,
                    description=why,
                    input_schema={"type": "object"},
                    source=Source(path="<upstream>", layer="upstream"),
                )
                return spec, lambda args: {"error": why}
            # NAME.TOOL of a server not started yet: start it (first use).
            return up.resolve(name)
        return found

    def host(self, method: str, payload: Mapping[str, Any]) -> Any:
        """Session services for built-ins (reached through ``CallContext.host``)."""
        if method == "meta.tool_register":
            return register_meta_tool(self, payload)
        if method == "emit":
            return self._emit_custom(payload)
        if method.startswith(("metrics.", "ctx.")):
            return serve_state(method, payload, self.metrics, self.turn_pad)
        raise BuiltinError(f"unknown session service {method!r}")

    def begin_turn(self) -> int:
        """Start an agent turn: a fresh ``ctx`` scratchpad holding the turn number."""
        self.turns += 1
        self.turn_pad = Scratchpad({"turn": self.turns})
        return self.turns

    def end_turn(self) -> None:
        self.turn_pad = None

    def _emit_custom(self, p: Mapping[str, Any]) -> Any:
        """``emit(event, payload)`` from a script: run the ``custom.*`` hooks; a block
        raises in the script, the (possibly modified) payload is returned."""
        event, value = str(p["event"]), p.get("payload")
        chain = self.harness.hook_chain
        if not chain.for_event(event):
            return value
        depth = getattr(self._emit_depth, "n", 0)
        if depth >= MAX_EMIT_DEPTH:
            raise BuiltinError(f"emit: {event} nested more than {MAX_EMIT_DEPTH} levels deep")
        wrapped = value is not None and not isinstance(value, Mapping)
        payload = {"value": value} if wrapped else dict(value or {})
        self._emit_depth.n = depth + 1
        try:
            # Like meta.tool_register: the host runtime, never the caller's worker.
            out = chain.run(
                event,
                {**payload, "session": self.id},
                self.harness.host_runtime,
                self._pad_ctx(self.turn_pad or Scratchpad()),
            )
        finally:
            self._emit_depth.n = depth
        if out.blocked_by is not None:
            self.emit(
                "hook.decision",
                hook_event=event,
                hook=out.blocked_by,
                decision="block",
                reason=out.reason,
                by=p.get("by"),
            )
            raise BuiltinError(f"emit: {event} {out.why}")
        result = {k: v for k, v in out.payload.items() if k != "session"}
        if wrapped and set(result) == {"value"}:
            return result["value"]
        return result if (result or value is not None) else None

    def hook_context(self, pad: Scratchpad | None = None) -> Callable[[Any], CallContext]:
        """Contexts for hooks this session runs outside a call (``meta.*`` hooks,
        ``harness test`` hook cases): ``metrics``, ``ctx`` and ``cache`` work as in
        any hook of the session; ``ctx`` is ``pad``, else the turn's, else a fresh one."""
        return self._pad_ctx(pad or self.turn_pad or Scratchpad())

    def _pad_ctx(self, pad: Scratchpad) -> Callable[[Any], CallContext]:
        """Contexts for hooks fired by the session: ``ctx`` is ``pad``; no emit."""

        def host(method: str, payload: Mapping[str, Any]) -> Any:
            if method.startswith(("metrics.", "ctx.")):
                return serve_state(method, payload, self.metrics, pad)
            raise BuiltinError(f"{method} is not available in hooks of session events")

        def make(hook: Any) -> CallContext:
            return CallContext(
                config=self.harness.config,
                session_id=self.id,
                tool=hook.name,
                kind="hook",
                cache=self.cache,
                log=self.log,
                host=host,
            )

        return make

    @property
    def tools(self) -> dict[str, ToolSpec]:
        """What this session exposes: the harness's tools plus session-scoped ones
        (registered with meta.tool_register or surfaced by tool_search)."""
        tools = dict(self.harness.tools)
        if self.surfaced:
            deferred = deferred_tools(self.harness)
            tools.update((n, deferred[n]) for n in sorted(self.surfaced) if n in deferred)
        extra = [
            name
            for name, (spec, _) in self._extra.items()
            if spec.enabled and name not in tools and policy_allows(self.harness.config, name)
        ]
        # Never two tools under one provider name (export.without_clashes, the one rule).
        kept, _clashes = without_clashes(extra, tools)
        tools.update((name, self._extra[name][0]) for name in kept)
        return dict(sorted(tools.items()))

    def definitions(self, format: str = "openai") -> list[dict[str, Any]]:
        """Provider definitions of :attr:`tools` (asked again each agent round)."""
        return export_definitions(list(self.tools.values()), format, include_deferred=True)

    @property
    def registered_tools(self) -> dict[str, ToolSpec]:
        """Tools registered in this session with meta.tool_register."""
        return {n: s for n, (s, _) in self._extra.items() if s.source.layer == "meta"}

    def register_tool(self, spec: ToolSpec, handler: Handler | None = None) -> None:
        """Add a session-scoped tool (meta.tool_register, tool_search surfacing)."""
        if spec.name in self.harness.defined_tools and spec.name != "read_output":
            raise UsageError(f'tool "{spec.name}" already exists and cannot be replaced')
        self._extra[spec.name] = (spec, handler)

    def _read_output(self, args: dict[str, Any]) -> Any:
        """One page of a spilled output, as text, ending with a line saying where the
        next page starts. Pages never split a UTF-8 character and always fit within
        ``max_output_bytes`` (so a page is never itself truncated or spilled)."""
        ref = args["ref"]
        path = self._spills.get(ref)
        if path is None:
            known = ", ".join(sorted(self._spills)) or "none in this session"
            return {"error": f'unknown output ref "{ref}"; known refs: {known}'}
        return read_page(path.read_bytes(), ref, args, self.harness.config.limits.max_output_bytes)

    # -- calls -------------------------------------------------------------------

    def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, id: str | None = None
    ) -> ToolResult:
        reg = self.harness.registry
        if name not in reg.plans:
            name = self.tool_name(name)
        call = make_call(name, {} if arguments is None else arguments, id or f"call-{next(_ids)}")
        if self.refused is not None:
            return self._refusal(call)
        return run_call(call, reg, self)

    def call_tool(self, call: ToolCall) -> ToolResult:
        reg = self.harness.registry
        if call.name not in reg.plans and (name := self.tool_name(call.name)) != call.name:
            call = replace(call, name=name)
        if not call.id:
            call = replace(call, id=f"call-{next(_ids)}")
        if self.refused is not None:
            return self._refusal(call)
        return run_call(call, reg, self)

    def tool_name(self, name: str) -> str:
        """The tool ``name`` stands for: itself, or the tool whose provider export it is
        (``math_div`` for ``math.div``: OpenAI and Anthropic see ``.`` as ``_``); unknown
        names are returned as they are (the call then says so)."""
        if name in self._extra:
            return name
        found = self.harness.provider_tool(name)
        if found is not None:
            return found
        return next((n for n in self._extra if export_name(n) == name), name)

    def _refusal(self, call: ToolCall) -> ToolResult:
        """The result of every call in a session a session.start hook refused."""
        reason = self.refused or "session refused"
        self.emit("tool.refused", tool=call.name, call_id=call.id, reason=reason)
        return ToolResult(
            call_id=call.id,
            name=call.name,
            is_error=True,
            text=reason,
            error=reason,
            blocked_by=self.refused_by,
        )

    async def acall(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, id: str | None = None
    ) -> ToolResult:
        return await asyncio.to_thread(self.call, name, arguments, id=id)

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.harness.config.limits.max_concurrency,
                    thread_name_prefix=f"harness-{self.id}",
                )
            return self._pool

    def call_many(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run calls concurrently (up to max_concurrency); results in call order."""
        if len(calls) <= 1:
            return [self.call_tool(c) for c in calls]
        return list(self._executor().map(self.call_tool, calls))

    async def acall_many(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        loop = asyncio.get_running_loop()
        pool = self._executor()
        return list(
            await asyncio.gather(*(loop.run_in_executor(pool, self.call_tool, c) for c in calls))
        )

    def end(self) -> None:
        """Run the session.end hooks and record the end (once); close() calls it."""
        if self._ended:
            return
        self._ended = True
        self.fire("session.end", {})
        self.emit("session.end")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.end()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._spills and self._audit is None:
            shutil.rmtree(self._spill_dir, ignore_errors=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
