"""The six steps every call goes through (docs/spec.md §9), one small function each.

resolve -> validate -> tool.pre hooks -> execute -> tool.post hooks -> return.
There is no fast path: Python handlers, script tools and built-in tools all pass here.
Failures of the tool, its arguments, hooks or the sandbox are results, never raised: a
step that refuses the call raises :class:`Stop`, and :func:`run_call` turns it into
the result, in the one place results are built (:func:`finish`).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from harness.artifacts.model import HookSpec, ToolSpec
from harness.output import (  # noqa: F401 - cap_text, truncation_notice: re-exported
    cap_text,
    capped,
    is_error_value,
    json_problem,
    render,
    truncation_notice,
)
from harness.plans import (  # noqa: F401 - Handler, Registry, policy_allows: re-exported
    Handler,
    Registry,
    ToolPlan,
    policy_allows,
    runnable,
)
from harness.results import ToolCall, ToolResult, make_result
from harness.runtime.builtins.session_state import Scratchpad
from harness.runtime.builtins.session_state import serve as serve_state
from harness.runtime.context import CacheStore, CallContext, Outcome, make_context
from harness.runtime.nesting import value_problem


class CallEnv(Protocol):
    """The session side of a call: identity, cache, log, audit, spill, extra tools."""

    @property
    def id(self) -> str: ...
    @property
    def cache(self) -> CacheStore: ...
    @property
    def auditing(self) -> bool: ...

    def log(self, level: str, message: str, fields: Mapping[str, Any]) -> None: ...

    def emit(self, event: str, /, **fields: Any) -> None: ...
    def host(self, method: str, payload: Mapping[str, Any]) -> Any: ...
    def spill(self, text: str) -> str | None: ...
    def extra_tool(self, name: str) -> tuple[ToolSpec, Handler | None] | None: ...


class Stop(Exception):
    """A step refused the call: the result is this error (and who blocked it)."""

    def __init__(self, error: str, blocked_by: str | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.blocked_by = blocked_by


def run_call(call: ToolCall, reg: Registry, env: CallEnv) -> ToolResult:
    """One call through the six steps of docs/spec.md §9."""
    c = Call(call, reg, env)
    try:
        plan = c.plan = resolve(c)
        args = validate(c, plan, call.arguments)
        args = pre_hooks(c, args)
        value, error = execute(c, plan, args)
        if reg.chain.post:
            value, error = post_hooks(c, args, value, error)
    except Stop as stop:
        return finish(c, error=stop.error, blocked_by=stop.blocked_by)
    return finish(c, value, error)


# 1. resolve


def resolve(c: Call) -> ToolPlan:
    """The plan of the tool named: the registry's, else a tool of the session."""
    plan = c.reg.plans.get(c.name)
    if plan is None:
        plan = _resolve_slowly(c)
    if c.auditing:
        c.env.emit("tool.resolve", tool=c.name, call_id=c.call_id, source=plan.spec.source.path)
    return plan


def _resolve_slowly(c: Call) -> ToolPlan:
    reg, name = c.reg, c.name
    spec, handler = reg.tools.get(name), reg.handlers.get(name)
    if not runnable(spec, handler):
        # Session-scoped tools: meta-registered ones, and session handlers of built-in
        # tools such as read_output.
        extra = c.env.extra_tool(name)
        if extra is not None:
            spec, handler = extra
    if spec is None or not spec.enabled:
        raise Stop(reg.unknown(name))
    if not reg.allowed(name):
        raise Stop(f'tool "{name}" is denied by tools_policy')
    return reg.session_plan(spec, handler)


# 2. validate


def validate(c: Call, plan: ToolPlan, args: Mapping[str, Any]) -> Mapping[str, Any]:
    """The arguments with declared defaults filled in, checked against the tool's input
    schema; undeclared names are noted, or refused under ``arguments: strict``."""
    if type(args) is not dict and not isinstance(args, Mapping):
        raise Stop(
            f'invalid arguments for tool "{c.name}": $: arguments must be a JSON '
            f"object, got {type(args).__name__}"
        )
    deep = value_problem(args, f'the arguments of tool "{c.name}"')  # before any recursion
    if deep is not None:
        raise Stop(deep)
    shape = plan.arguments.shape  # arguments.py: defaults and declared names
    if shape is not None:
        if shape.fills:
            args = shape.fill(args)
        known = shape.known
        if known is not None and not known.issuperset(args):
            note = shape.note(c.name, shape.unknown(args))
            if (plan.spec.arguments or c.reg.config.arguments) == "strict":
                raise Stop(
                    f'invalid arguments for tool "{c.name}": {note} '
                    "(`arguments: strict` refuses undeclared names)"
                )
            c.notes = (note,)
    problems = plan.arguments.problems(args)
    if c.auditing:
        c.env.emit("tool.validate", tool=c.name, call_id=c.call_id, ok=not problems)
    if problems:
        raise Stop(f'invalid arguments for tool "{c.name}": ' + "; ".join(problems))
    return args


# 3. tool.pre hooks


def pre_hooks(c: Call, args: Mapping[str, Any]) -> Mapping[str, Any]:
    """The arguments the tool.pre hooks let through (possibly modified), or a block."""
    chain = c.reg.chain
    if not chain.pre:
        return args
    # "args" is the same decoded dict under the name ai-harness hooks read.
    pre = chain.run(
        "tool.pre",
        {"id": c.call_id, "name": c.name, "arguments": args, "args": args, "session": c.env.id},
        c.reg.runtime,
        c.context,
        c.recheck,
        c.decision if c.auditing else None,
    )
    if pre.blocked_by is not None:
        raise Stop(pre.why, pre.blocked_by)
    arguments: Mapping[str, Any] = pre.payload["arguments"]
    return arguments


# 4. execute


def execute(c: Call, plan: ToolPlan, args: Mapping[str, Any]) -> tuple[Any, str | None]:
    """(value, error) of running the tool: its handler or its script."""
    name = c.name
    t0 = time.monotonic()
    value: Any = None
    error: str | None = None
    if plan.handler is not None:
        try:
            value = plan.handler(dict(args))
            if inspect.isawaitable(value):
                value = _await(value)
            bad = value_problem(value, f'the result of tool "{name}"')
            if bad:
                value, error = None, bad
            elif bad := json_problem(value):
                value, error = None, f'tool "{name}" returned a value that is not JSON: {bad}'
        except Exception as exc:  # noqa: BLE001 - a handler failure is a result
            error = f'tool "{name}" failed: {type(exc).__name__}: {exc}'
    elif plan.spec.script:
        spec = plan.spec
        runtime = c.reg.runtime if spec.source.layer != "meta" else c.reg.untrusted()
        out = runtime.run_tool(
            plan.spec.script,
            spec.source.path,
            spec.script_line or 1,
            args,
            c.context(),
            plan.timeout_ms,
        )
        if out.status == "ok":
            value = out.value
        else:
            error = _outcome_error(name, out, plan.timeout_ms, c.reg.config.limits.memory_mb)
    else:
        error = f'tool "{name}" has no script and no bound handler'
    if error is None and type(value) is dict and "error" in value and is_error_value(value):
        error = render(value["error"])
    elif error is None and plan.result is not None:
        errs = plan.result.problems(value)
        if errs:
            error = (
                f'tool "{name}" returned a value that does not match its returns schema: '
                + "; ".join(errs)
            )
    c.exec_ms = (time.monotonic() - t0) * 1000.0
    if c.auditing:
        c.env.emit(
            "tool.execute",
            tool=name,
            call_id=c.call_id,
            ok=error is None,
            duration_ms=c.exec_ms,
            error=error,
        )
    return value, error


def _outcome_error(tool: str, out: Outcome, timeout_ms: int, memory_mb: int) -> str:
    if out.status == "timeout":
        if out.error and out.error.startswith("timed out: "):  # says why (memguard.py)
            return f'tool "{tool}" {out.error}'
        return f'tool "{tool}" timed out after {timeout_ms} ms'
    if out.status == "memory":
        return f'tool "{tool}" exceeded its memory limit ({memory_mb} MB)'
    if out.status == "crash":
        return f'tool "{tool}" {out.error or "crashed"}'
    return out.error or f'tool "{tool}" failed'


def _await(awaitable: Any) -> Any:
    """Run an async handler's coroutine to completion from this (worker) thread."""

    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    # Called from inside a running loop (a sync call made in async code): use a thread.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, wait()).result()


# 5. tool.post hooks


def post_hooks(
    c: Call, args: Mapping[str, Any], value: Any, error: str | None
) -> tuple[Any, str | None]:
    """(value, error) after the tool.post hooks: kept, rewritten, or withheld."""
    chain = c.reg.chain
    name = c.name
    is_error = error is not None
    # "call_id" and "content" (the text the model is given, before the output cap)
    # are the keys ai-harness post-hooks read.
    if is_error:
        content = error
    else:
        text = render(value)
        c.rendered = (value, text)
        content = text
    post = chain.run(
        "tool.post",
        {
            "id": c.call_id,
            "call_id": c.call_id,
            "name": name,
            "arguments": args,
            "session": c.env.id,
            "result": value,
            "content": content,
            "is_error": is_error,
            "error": error,
            "duration_ms": c.exec_ms,
        },
        c.reg.runtime,
        c.context,
        None,
        c.decision if c.auditing else None,
    )
    if post.blocked_by is not None:
        raise Stop(
            post.reason
            if post.failed
            else f'result withheld by hook "{post.blocked_by}": {post.reason}',
            post.blocked_by,
        )
    value = post.payload.get("result")
    is_error = bool(post.payload.get("is_error"))
    error = post.payload.get("error")
    new_content = post.payload.get("content")
    if new_content != content:
        # A hook rewrote the text itself (ai-harness style): it replaces the result.
        if is_error:
            error = new_content if isinstance(new_content, str) else render(new_content)
        else:
            value = new_content
    if is_error and not error:
        error = render(value) if value is not None else f'tool "{name}" failed'
    return value, error if is_error else None


# 6. return


def finish(
    c: Call, value: Any = None, error: str | None = None, blocked_by: str | None = None
) -> ToolResult:
    """The one place a call's result is built: ``error`` (if any) or the rendered value
    as its text, capped with the full text spilled (output.py); a blocked call carries
    no value. Recorded when the session audits."""
    is_error = error is not None
    seen = c.rendered
    if error is not None:
        text = error
    elif seen is not None and seen[0] is value:
        text = seen[1]  # the hooks kept the value they were shown rendered
    else:
        text = render(value)
    max_bytes = c.reg.config.limits.max_output_bytes
    ref = None
    # len() first: a text of at most max_bytes / 4 characters cannot be over the cap
    truncated = len(text) > max_bytes // 4 and len(text.encode("utf-8")) > max_bytes
    if truncated:
        text, ref = capped(text, max_bytes, c.env.spill)
    notes = c.notes
    for note in notes:  # after the cap: the model always reads them
        text = (text or "") + f"\n[note: {note}]"
    result = make_result(
        c.call_id,
        c.name,
        is_error,
        None if is_error and blocked_by else value,
        text or "",
        error,
        (time.monotonic() - c.start) * 1000.0,
        truncated,
        blocked_by,
        ref,
        notes,
    )
    if c.auditing:
        c.env.emit(
            "tool.result",
            tool=c.name,
            call_id=c.call_id,
            is_error=result.is_error,
            error=result.error,
            blocked_by=result.blocked_by,
            duration_ms=result.duration_ms,
            text=result.text,
        )
    return result


# -- the state of one call -------------------------------------------------------------


class _CallHost:
    """Session services of one call, with ``ctx.*`` answered from the turn's scratchpad
    (agent loop) or, outside a turn, from one scratchpad per call (its hooks and tool).
    Holds no reference back to the call's context, so a call leaves no cycle behind."""

    __slots__ = ("env", "pad")

    def __init__(self, env: CallEnv) -> None:
        self.env = env
        self.pad: Any = None  # made on first use

    def __call__(self, method: str, payload: Mapping[str, Any]) -> Any:
        if method.startswith("ctx."):
            pad = getattr(self.env, "turn_pad", None)
            if pad is None:
                if self.pad is None:
                    self.pad = Scratchpad()
                pad = self.pad
            return serve_state(method, payload, None, pad)
        return self.env.host(method, payload)


class Call:
    """One call in flight: what the steps share (one object instead of closures)."""

    __slots__ = (
        "reg",
        "env",
        "name",
        "call_id",
        "auditing",
        "start",
        "ctx",
        "plan",
        "exec_ms",
        "notes",
        "rendered",
    )

    def __init__(self, call: ToolCall, reg: Registry, env: CallEnv) -> None:
        self.start = time.monotonic()
        self.reg, self.env, self.name, self.call_id = reg, env, call.name, call.id
        self.auditing = env.auditing
        self.ctx: CallContext | None = None
        self.notes: tuple[str, ...] = ()  # remarks for the model (unknown argument names)
        # (value, its text) rendered for the tool.post hooks: finish() reuses the text
        # when the hooks left that very value in place.
        self.rendered: tuple[Any, str] | None = None
        # set by the steps: plan (resolve), exec_ms (execute)
        self.plan: ToolPlan
        self.exec_ms: float

    def context(self, hook: HookSpec | None = None) -> CallContext:
        # One context serves the hooks and the tool of this call: the engine sets kind
        # and restores the deadline it sets; a ``when`` on the fast path never asks.
        ctx = self.ctx
        if ctx is None:
            env = self.env
            ctx = self.ctx = make_context(
                self.reg.config, env.id, self.call_id, self.name, env.cache, env.log, _CallHost(env)
            )
        return ctx

    def decision(self, event: str, hook: str, decision: str, reason: str, ms: float) -> None:
        if self.auditing:
            self.env.emit(
                "hook.decision",
                hook_event=event,
                hook=hook,
                tool=self.name,
                call_id=self.call_id,
                decision=decision,
                reason=reason,
                duration_ms=ms,
            )

    def recheck(self, payload: Mapping[str, Any]) -> str | None:
        errs = self.plan.arguments.problems(payload.get("arguments"))
        if errs:
            return f'modified arguments are invalid for tool "{self.name}": ' + "; ".join(errs)
        return None
