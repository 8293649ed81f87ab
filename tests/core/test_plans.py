"""Plans are compiled once, when the registry and the hook chain are made."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from dataclasses import replace

import pytest

from harness import pipeline
from harness.artifacts.model import HookSpec, Source, ToolSpec
from harness.config import Config, Limits, ToolsPolicy
from harness.hooks import HookChain, HookPlan
from harness.plans import Registry, ToolPlan
from harness.runtime.engine import InProcessRuntime

SRC = Source(path="t.md")


def tool(name: str, **kw: object) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=name,
        script=kw.pop("script", "def run(args):\n    return 1\n"),
        input_schema={"type": "object"},
        source=SRC,
        **kw,
    )  # type: ignore[arg-type]


def registry(tools: list[ToolSpec], config: Config | None = None, **handlers: object) -> Registry:
    return Registry(
        config=config or Config(),
        tools={t.name: t for t in tools},
        runtime=InProcessRuntime(),
        chain=HookChain(()),
        handlers=handlers,
    )  # type: ignore[arg-type]


def test_every_runnable_allowed_tool_has_its_plan_when_the_registry_is_made() -> None:
    config = replace(
        Config(),
        tools_policy=ToolsPolicy(allow=("*",), deny=("secret*",)),
        limits=replace(Config().limits, max_timeout_ms=5000),
    )
    reg = registry(
        [
            tool("a", timeout_ms=9000, returns={"type": "integer"}),
            tool("b"),
            tool("off", enabled=False),
            tool("secret_x"),
            tool("bound", script=None),
            tool("unbound", script=None),
        ],
        config,
        bound=lambda args: 1,
    )
    assert sorted(reg.plans) == ["a", "b", "bound"]
    plan = reg.plans["a"]
    assert isinstance(plan, ToolPlan) and dataclasses.is_dataclass(plan)
    assert plan.timeout_ms == 5000  # within limits.max_timeout_ms
    assert plan.result is not None and plan.result.problems(1) == []
    assert plan.result.problems("x")  # the returns schema, compiled into the plan
    assert reg.plans["b"].timeout_ms == 5000 and reg.plans["b"].result is None
    assert reg.plans["bound"].handler is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.timeout_ms = 1  # type: ignore[misc]


def test_session_plans_are_kept_while_spec_and_handler_stay() -> None:
    reg = registry([])
    spec = tool("mine")
    first = reg.session_plan(spec, None)
    assert reg.session_plan(spec, None) is first
    assert reg.session_plan(replace(spec, description="new"), None) is not first


def test_hook_plans_compile_when_and_reads_once() -> None:
    hook = HookSpec(
        name="h",
        event="tool.pre",
        when='payload["name"] == "x"',
        script='def handle(event, payload):\n    return block(payload["name"])\n',
        source=SRC,
    )
    chain = HookChain([hook])
    (plan,) = chain._plans["tool.pre"]
    assert isinstance(plan, HookPlan) and plan.spec is hook
    assert (
        plan.when is not None and plan.when({"event": "tool.pre", "payload": {"name": "x"}}) is True
    )
    assert plan.keys == frozenset({"name"}) and plan.event_used is False
    assert chain.pre == (hook,)


def test_run_call_reads_as_the_six_steps() -> None:
    source = inspect.getsource(pipeline.run_call)
    assert len(source.splitlines()) < 60
    calls = sorted(
        (n.lineno, n.col_offset, n.func.id)
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    )
    steps = ["resolve", "validate", "pre_hooks", "execute", "post_hooks", "finish"]
    assert [name for *_, name in calls if name in steps][:6] == steps


def test_limits_default_applies_without_a_tool_timeout() -> None:
    reg = registry([tool("a")], replace(Config(), limits=Limits(max_timeout_ms=700)))
    assert reg.plans["a"].timeout_ms == 700
