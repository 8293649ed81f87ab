"""The registry and the plans it compiles once, when it is made (docs/spec.md §9 step 1).

A :class:`ToolPlan` is everything a call of one tool needs: the spec, the Python
handler (if bound), the argument validator, the result validator (``returns``) and the
timeout. The registry is rebuilt whenever tools or handlers change, so a plan never
goes stale. Tools that live in a session (``read_output``, registered tools) get their
plan on first use, kept while the spec and handler stay the same.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.artifacts.model import ToolSpec
from harness.artifacts.problems import unknown_tool_message
from harness.config import Config
from harness.hooks import HookChain
from harness.runtime.context import ScriptRuntime
from harness.validators import ArgValidator

Handler = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolPlan:
    """What a call of ``spec`` runs and checks, compiled once."""

    spec: ToolSpec
    handler: Handler | None
    arguments: ArgValidator
    result: ArgValidator | None  # ``returns`` of the tool, if it declares one
    timeout_ms: int  # effective_timeout(): own or default, within the maximum (0: none)


def effective_timeout(spec_ms: int, config: Config) -> tuple[int, str]:
    """(timeout in ms, where it comes from) of a tool whose own ``timeout_ms`` is
    ``spec_ms`` (0: none): its own, else ``limits.default_timeout_ms``, else
    ``limits.max_timeout_ms``; never above ``max_timeout_ms`` (0: no timeout)."""
    limit = config.limits.max_timeout_ms
    own, source = spec_ms, "timeout_ms"
    if not own:
        own, source = config.limits.default_timeout_ms, "limits.default_timeout_ms"
    if not own:
        return limit, "limits.max_timeout_ms"
    if limit and own > limit:
        return limit, "limits.max_timeout_ms"
    return own, source


def make_plan(spec: ToolSpec, handler: Handler | None, config: Config) -> ToolPlan:
    timeout, _ = effective_timeout(spec.timeout_ms, config)
    return ToolPlan(
        spec=spec,
        handler=handler,
        arguments=ArgValidator(spec.input_schema),
        result=None if spec.returns is None else ArgValidator(spec.returns),
        timeout_ms=timeout,
    )


def policy_allows(config: Config, name: str) -> bool:
    """tools_policy: glob patterns on tool names; deny wins."""
    policy = config.tools_policy
    if any(fnmatch.fnmatchcase(name, p) for p in policy.deny):
        return False
    return any(fnmatch.fnmatchcase(name, p) for p in policy.allow)


def runnable(spec: ToolSpec | None, handler: Handler | None) -> bool:
    return spec is not None and spec.enabled and (handler is not None or bool(spec.script))


class Registry:
    """Everything a call needs that is fixed at load time: the plan of every tool that
    resolves as it is (enabled, runnable, allowed by ``tools_policy``)."""

    __slots__ = (
        "config",
        "tools",
        "runtime",
        "untrusted",
        "chain",
        "handlers",
        "plans",
        "_allowed",
        "_session_plans",
    )

    def __init__(
        self,
        *,
        config: Config,
        tools: Mapping[str, ToolSpec],
        runtime: ScriptRuntime,
        chain: HookChain,
        handlers: Mapping[str, Handler] | None = None,
        untrusted: Callable[[], ScriptRuntime] | None = None,
    ) -> None:
        self.config = config
        self.tools = dict(tools)
        self.runtime = runtime
        # The runtime of scripts a model wrote (meta.tool_register): always a worker
        # process, also under runtime.isolation: inprocess (see docs/isolation.md).
        self.untrusted = untrusted or (lambda: runtime)
        self.chain = chain
        self.handlers = dict(handlers or {})
        self._allowed: dict[str, bool] = {}
        self._session_plans: dict[str, ToolPlan] = {}
        self.plans: dict[str, ToolPlan] = {
            name: make_plan(spec, self.handlers.get(name), config)
            for name, spec in self.tools.items()
            if runnable(spec, self.handlers.get(name)) and self.allowed(name)
        }

    def allowed(self, name: str) -> bool:
        ok = self._allowed.get(name)
        if ok is None:
            ok = self._allowed[name] = policy_allows(self.config, name)
        return ok

    def session_plan(self, spec: ToolSpec, handler: Handler | None) -> ToolPlan:
        """The plan of a tool a session holds (its spec and handler may change)."""
        plan = self._session_plans.get(spec.name)
        if plan is None or plan.spec is not spec or plan.handler is not handler:
            plan = self._session_plans[spec.name] = make_plan(spec, handler, self.config)
        return plan

    def unknown(self, name: str) -> str:
        """The message for a name no tool answers to (docs/spec.md §9 wording)."""
        return unknown_tool_message(
            name,
            (
                n
                for n, t in self.tools.items()
                if t.enabled and t.loading == "always" and self.allowed(n)
            ),
        )
