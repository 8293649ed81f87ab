"""The six steps every call goes through (SPEC §9), as one plain function.

resolve -> validate -> tool.pre hooks -> execute -> tool.post hooks -> return.
There is no fast path: Python handlers, script tools and built-in tools all pass here.
Failures of the tool, its arguments, hooks or the sandbox are results, never raised.
"""

from __future__ import annotations

import asyncio
import fnmatch
import inspect
import json
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.artifacts.model import HookSpec, ToolSpec
from harness.artifacts.problems import json_path, unknown_tool_message
from harness.config import Config
from harness.hooks import HookChain
from harness.results import ToolCall, ToolResult, make_result
from harness.runtime.context import (
    CacheStore,
    CallContext,
    Outcome,
    ScriptRuntime,
    make_context,
)

Handler = Callable[[dict[str, Any]], Any]


_TOO_DEEP = ("$: the value nests too deeply to be checked against the schema; send "
             "flatter lists and objects (a few hundred levels at most)")


class ArgValidator:
    """Fast accept with a compiled (Rust) validator; jsonschema only to explain failures."""

    __slots__ = ("schema", "_fast", "_slow")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self._fast: Any = None
        self._slow: Any = None

    def problems(self, instance: Any) -> list[str]:
        if self._fast is None:
            import jsonschema_rs

            try:
                # Never fetch a remote $ref at call time (validate refuses them too).
                self._fast = jsonschema_rs.validator_for(dict(self.schema),
                                                         retriever=_no_fetch)
            except Exception as exc:  # noqa: BLE001 - a broken schema is a result, not a crash
                return [f"$: the tool's schema cannot be compiled ({exc}); run harness validate"]
        if self._fast.is_valid(instance):
            return []
        try:
            found = self._explain(instance)
        except RecursionError:
            return [_TOO_DEEP]
        except Exception:  # noqa: BLE001 - e.g. an ECMA-only pattern Python's re rejects
            try:
                found = [(json_path(e.instance_path), e.message)
                         for e in self._fast.iter_errors(instance)]
            except ValueError:  # "Recursion limit reached" on deep nesting
                return [_TOO_DEEP]
        return [f"{p}: {m}" for p, m in sorted(found)] or ["arguments do not match the schema"]

    def _explain(self, instance: Any) -> list[tuple[str, str]]:
        """Every problem with its JSON path, in jsonschema's wording (SPEC §9)."""
        if self._slow is None:
            import jsonschema

            self._slow = jsonschema.Draft202012Validator(
                dict(self.schema), format_checker=jsonschema.FormatChecker()
            )
        found = []
        for err in self._slow.iter_errors(instance):
            path = json_path(err.absolute_path)
            if err.validator == "required":
                missing = err.message.split("'")[1] if "'" in err.message else ""
                if missing:
                    path = f"{path}.{missing}"
            found.append((path, err.message))
        return found


def _no_fetch(uri: str) -> Any:
    raise ValueError(f"remote $ref {uri!r} is not fetched; harness never fetches schemas")


@dataclass(slots=True, kw_only=True)
class Registry:
    """Everything a call needs that is fixed at load time."""

    config: Config
    tools: dict[str, ToolSpec]
    runtime: ScriptRuntime
    chain: HookChain
    handlers: dict[str, Handler] = field(default_factory=dict)
    validators: dict[str, ArgValidator] = field(default_factory=dict)

    def validator(self, tool: ToolSpec) -> ArgValidator:
        v = self.validators.get(tool.name)
        if v is None or v.schema is not tool.input_schema:
            v = self.validators[tool.name] = ArgValidator(tool.input_schema)
        return v

    _allowed: dict[str, bool] = field(default_factory=dict)
    # name -> (tool, handler, validator) for registry tools that resolve as they are
    # (enabled, runnable, allowed): the registry never changes, so neither do these.
    plans: dict[str, tuple[ToolSpec, Handler | None, ArgValidator]] = field(
        default_factory=dict)

    _returns: dict[str, ArgValidator] = field(default_factory=dict)

    def result_validator(self, tool: ToolSpec) -> ArgValidator:
        """The compiled validator of ``tool.returns`` (compiled once, not per call)."""
        assert tool.returns is not None
        v = self._returns.get(tool.name)
        if v is None or v.schema is not tool.returns:
            v = self._returns[tool.name] = ArgValidator(tool.returns)
        return v

    def plan(self, name: str) -> tuple[ToolSpec, Handler | None, ArgValidator] | None:
        tool = self.tools.get(name)
        handler = self.handlers.get(name)
        if tool is None or not tool.enabled or (handler is None and not tool.script) \
                or not self.allowed(name):
            return None
        plan = self.plans[name] = (tool, handler, self.validator(tool))
        return plan

    def allowed(self, name: str) -> bool:
        ok = self._allowed.get(name)
        if ok is None:
            ok = self._allowed[name] = policy_allows(self.config, name)
        return ok


def policy_allows(config: Config, name: str) -> bool:
    """tools_policy: glob patterns on tool names; deny wins."""
    policy = config.tools_policy
    if any(fnmatch.fnmatchcase(name, p) for p in policy.deny):
        return False
    return any(fnmatch.fnmatchcase(name, p) for p in policy.allow)


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


def json_problem(value: Any, path: str = "$", depth: int = 0) -> str | None:
    """Where a handler's return value stops being JSON (None when it is JSON)."""
    if value is None or type(value) in (str, int, float, bool):
        if type(value) is float and (value != value or value in (float("inf"), float("-inf"))):
            return f"{path} is {value!r}"
        return None
    if depth > 100:
        return f"{path} is nested more than 100 levels deep"
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            bad = json_problem(v, f"{path}[{i}]", depth + 1)
            if bad:
                return bad
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{path} has a non-string key {k!r}"
            bad = json_problem(v, f"{path}.{k}", depth + 1)
            if bad:
                return bad
        return None
    return f"{path} is a {type(value).__name__}"


def render(value: Any) -> str:
    """What the model sees of a value: the string itself, or compact JSON."""
    kind = type(value)
    if kind is str:
        return value
    if kind is int:
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def cap_text(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes without splitting a character."""
    if len(text) <= max_bytes // 4:  # fast path: cannot exceed the cap
        return text, False
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    return data[:max_bytes].decode("utf-8", "ignore"), True


def truncation_notice(max_bytes: int, ref: str | None, offset: int) -> str:
    """The last lines of a cut output; ``offset`` is where the shown text stops."""
    notice = f"[output truncated at {max_bytes} bytes]"
    if ref is None:
        return "\n" + notice
    return (f'\n[full output kept as "{ref}": call read_output(ref="{ref}", '
            f"offset={offset}) for the rest]\n{notice}")


def is_error_value(value: Any) -> bool:
    """The artifact convention: a dict with "error" and nothing but "error"/"details"."""
    return isinstance(value, dict) and "error" in value and set(value) <= {"error", "details"}


def _outcome_error(tool: str, out: Outcome, timeout_ms: int, memory_mb: int) -> str:
    if out.status == "timeout":
        return f'tool "{tool}" timed out after {timeout_ms} ms'
    if out.status == "memory":
        return f'tool "{tool}" exceeded its memory limit ({memory_mb} MB)'
    if out.status == "crash":
        return f'tool "{tool}" {out.error or "crashed"}'
    return out.error or f'tool "{tool}" failed'


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
            from harness.runtime.builtins.session_state import Scratchpad, serve

            pad = getattr(self.env, "turn_pad", None)
            if pad is None:
                if self.pad is None:
                    self.pad = Scratchpad()
                pad = self.pad
            return serve(method, payload, None, pad)
        return self.env.host(method, payload)


class _CallState:
    """Per-call values shared by the hook callbacks (one object instead of closures)."""

    __slots__ = ("config", "env", "name", "call_id", "auditing", "ctx", "validator")

    def __init__(self, config: Config, env: CallEnv, name: str, call_id: str,
                 auditing: bool, validator: ArgValidator) -> None:
        self.config, self.env, self.name, self.call_id = config, env, name, call_id
        self.auditing, self.validator = auditing, validator
        self.ctx: CallContext | None = None

    def context(self, hook: HookSpec | None = None) -> CallContext:
        # One context serves the hooks and the tool of this call: the engine sets kind
        # and restores the deadline it sets; a ``when`` on the fast path never asks.
        ctx = self.ctx
        if ctx is None:
            env = self.env
            ctx = self.ctx = make_context(self.config, env.id, self.call_id, self.name,
                                          env.cache, env.log, _CallHost(env))
        return ctx

    def decision(self, event: str, hook: str, decision: str, reason: str, ms: float) -> None:
        if self.auditing:
            self.env.emit("hook.decision", hook_event=event, hook=hook, tool=self.name,
                          call_id=self.call_id, decision=decision, reason=reason,
                          duration_ms=ms)

    def recheck(self, payload: Mapping[str, Any]) -> str | None:
        errs = self.validator.problems(payload.get("arguments"))
        if errs:
            return f'modified arguments are invalid for tool "{self.name}": ' + "; ".join(errs)
        return None


def run_call(call: ToolCall, reg: Registry, env: CallEnv) -> ToolResult:
    start = time.monotonic()
    name, call_id, auditing = call.name, call.id, env.auditing
    config = reg.config

    # 1. resolve
    plan = reg.plans.get(name)
    if plan is None:
        plan = reg.plan(name)
    if plan is not None:
        tool, handler, validator = plan
    else:
        found = reg.tools.get(name)
        handler = reg.handlers.get(name)
        if found is None or not found.enabled or (handler is None and not found.script):
            # Session-scoped tools: meta-registered ones, and session handlers of
            # built-in tools such as read_output.
            extra = env.extra_tool(name)
            if extra is not None:
                found, handler = extra
        if found is None or not found.enabled:
            return _done(call_id, name, start, config, env, error=_unknown(name, reg, env))
        tool = found
        if not reg.allowed(name):
            return _done(call_id, name, start, config, env,
                         error=f'tool "{name}" is denied by tools_policy')
        validator = reg.validator(tool)
    if auditing:
        env.emit("tool.resolve", tool=name, call_id=call_id, source=tool.source.path)

    # 2. validate
    args = call.arguments
    if type(args) is not dict and not isinstance(args, Mapping):
        return _done(call_id, name, start, config, env,
                     error=f'invalid arguments for tool "{name}": $: arguments must be a JSON '
                           f"object, got {type(args).__name__}")
    problems = validator.problems(args)
    if auditing:
        env.emit("tool.validate", tool=name, call_id=call_id, ok=not problems)
    if problems:
        return _done(call_id, name, start, config, env,
                     error=f'invalid arguments for tool "{name}": ' + "; ".join(problems))
    state = _CallState(config, env, name, call_id, auditing, validator)
    chain = reg.chain

    # 3. tool.pre hooks
    if chain.pre:
        # "args" is the same decoded dict under the name ai-harness hooks read.
        pre = chain.run("tool.pre", {"id": call_id, "name": name, "arguments": args,
                                     "args": args, "session": env.id},
                        reg.runtime, state.context, state.recheck,
                        state.decision if auditing else None)
        if pre.blocked_by is not None:
            return _done(call_id, name, start, config, env, error=pre.why,
                         blocked_by=pre.blocked_by)
        args = pre.payload["arguments"]

    # 4. execute
    limit = config.limits.max_timeout_ms
    timeout_ms = min(tool.timeout_ms, limit) if tool.timeout_ms and limit else (
        tool.timeout_ms or limit)
    t0 = time.monotonic()
    value: Any = None
    error: str | None = None
    if handler is not None:
        try:
            value = handler(dict(args))
            if inspect.isawaitable(value):
                value = _await(value)
            bad = json_problem(value)
            if bad:
                value, error = None, f'tool "{name}" returned a value that is not JSON: {bad}'
        except Exception as exc:  # noqa: BLE001 - a handler failure is a result
            error = f'tool "{name}" failed: {type(exc).__name__}: {exc}'
    elif tool.script:
        out = reg.runtime.run_tool(tool.script, tool.source.path, tool.script_line or 1, args,
                                   state.context(), timeout_ms)
        if out.status == "ok":
            value = out.value
        else:
            error = _outcome_error(name, out, timeout_ms, config.limits.memory_mb)
    else:
        error = f'tool "{name}" has no script and no bound handler'
    if error is None and type(value) is dict and "error" in value and is_error_value(value):
        error = render(value["error"])
    elif error is None and tool.returns is not None:
        errs = reg.result_validator(tool).problems(value)
        if errs:
            error = (f'tool "{name}" returned a value that does not match its returns schema: '
                     + "; ".join(errs))
    exec_ms = (time.monotonic() - t0) * 1000.0
    if auditing:
        env.emit("tool.execute", tool=name, call_id=call_id, ok=error is None,
                 duration_ms=exec_ms, error=error)

    # 5. tool.post hooks
    if chain.post:
        is_error = error is not None
        # "call_id" and "content" (the text the model is given, before the output cap)
        # are the keys ai-harness post-hooks read.
        content = error if is_error else render(value)
        post = chain.run("tool.post", {"id": call_id, "call_id": call_id, "name": name,
                                       "arguments": args, "session": env.id, "result": value,
                                       "content": content, "is_error": is_error,
                                       "error": error, "duration_ms": exec_ms},
                         reg.runtime, state.context, None,
                         state.decision if auditing else None)
        if post.blocked_by is not None:
            msg = post.reason if post.failed else (
                f'result withheld by hook "{post.blocked_by}": {post.reason}')
            return _done(call_id, name, start, config, env, error=msg,
                         blocked_by=post.blocked_by)
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
        if not is_error:
            error = None

    # 6. return
    if error is None and not auditing:
        text = render(value)
        if len(text) <= config.limits.max_output_bytes // 4:  # cannot need the cap
            return make_result(call_id, name, False, value, text, None,
                               (time.monotonic() - start) * 1000.0, False, None, None)
    return _done(call_id, name, start, config, env, value=value, error=error)


def _done(call_id: str, name: str, start: float, config: Config, env: CallEnv, *,
          value: Any = None, error: str | None = None,
          blocked_by: str | None = None) -> ToolResult:
    result = _finish(call_id, name, start, config, env, value=value, error=error,
                     blocked_by=blocked_by)
    if env.auditing:
        env.emit("tool.result", tool=name, call_id=call_id, is_error=result.is_error,
                 error=result.error, blocked_by=result.blocked_by,
                 duration_ms=result.duration_ms, text=result.text)
    return result


def _finish(call_id: str, name: str, start: float, config: Config, env: CallEnv, *,
            value: Any = None, error: str | None = None,
            blocked_by: str | None = None) -> ToolResult:
    is_error = error is not None
    text = error if is_error else render(value)
    max_bytes = config.limits.max_output_bytes
    ref = None
    truncated = False
    if text and len(text) > max_bytes // 4 and len(text.encode("utf-8")) > max_bytes:
        # The whole text the model sees, notice included, stays within max_bytes.
        truncated = True
        ref = env.spill(text)
        notice = truncation_notice(max_bytes, ref, 0)
        room = max(0, max_bytes - len(notice.encode("utf-8")) - 16)
        head, _ = cap_text(text, room)
        text = head + truncation_notice(max_bytes, ref, len(head.encode("utf-8")))
    text = text or ""
    return make_result(call_id, name, is_error, None if is_error and blocked_by else value,
                       text, error, (time.monotonic() - start) * 1000.0, truncated,
                       blocked_by, ref)


def _unknown(name: str, reg: Registry, env: CallEnv) -> str:
    available = sorted(n for n, t in reg.tools.items()
                       if t.enabled and t.loading == "always" and reg.allowed(n))
    return unknown_tool_message(name, available)
