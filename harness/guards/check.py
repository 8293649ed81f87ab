"""``harness validate``'s guard checks: each hook's ``when`` and ``handle`` followed with
the payload its event really carries (:mod:`harness.events`), the project's tools, their
parameters and ``returns``, and what each decision does on that event.

Runs once per project after loading (it needs every tool), only over hooks: a project's
tools are read once into :class:`Project`-wide facts (:func:`facts`), and ``custom.*``
payloads are derived from the tool scripts that ``emit`` them, only when a hook listens.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from harness import surface
from harness.artifacts.model import HookSpec, Problem, Project, ToolSpec
from harness.artifacts.problems import closest
from harness.events import CUSTOM, Event, event
from harness.guards import conditions, decisions
from harness.guards import shapes as S
from harness.guards.flow import Checker, Context, Env, Finding, ToolInfo, literal
from harness.guards.model import parse
from harness.guards.shapes import Shape, declared, from_schema, join, of, text

BUILTIN_TOOLS = frozenset(("read_output", "tool_search"))
HOOK_MODULES = frozenset(surface.module_names("hook")) | frozenset(surface.TOOL_MODULES)


@dataclass(slots=True)
class Facts:
    """What every hook's check shares: the tools, servers, and emitted payloads."""

    tools: Tools
    specs: Mapping[str, ToolSpec]
    prefixes: tuple[str, ...]
    open_names: bool
    emitted: dict[str, Shape] | None = None  # custom event -> payload (on first need)
    emit_sites: dict[str, list[str]] = field(default_factory=dict)
    flows: dict[str, ToolFlow] = field(default_factory=dict)


class Tools(Mapping[str, ToolInfo]):
    """The project's tools as the checker sees them, each read on first use: a hook
    looks at a few tools, a project may have thousands."""

    def __init__(self, specs: Mapping[str, ToolSpec]) -> None:
        self._specs = specs
        self._done: dict[str, ToolInfo] = {}
        self._everything: Shape | None = None
        self._sorted: list[str] | None = None

    def __getitem__(self, name: str) -> ToolInfo:
        info = self._done.get(name)
        if info is None:
            spec = self._specs[name]
            info = self._done[name] = ToolInfo(
                params={p.name: from_schema(p.schema) for p in spec.parameters},
                returns=None if spec.returns is None else from_schema(spec.returns),
            )
        return info

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def starting(self, prefix: str) -> list[str]:
        """The tool names that start with ``prefix`` (a bisection of the sorted names)."""
        if self._sorted is None:
            self._sorted = sorted(self._specs)
        names = self._sorted
        out = []
        for i in range(bisect_left(names, prefix), len(names)):
            if not names[i].startswith(prefix):
                break
            out.append(names[i])
        return out

    def every_argument(self) -> Shape:
        """The arguments of a call of any tool: every parameter any tool declares."""
        if self._everything is None:
            keys: dict[str, Shape] = {}
            for name in self._specs:
                for k, v in (self[name].params or {}).items():
                    keys[k] = join(keys[k], v) if k in keys else v
            self._everything = of(S.DICT, keys=keys)
        return self._everything


def facts(project: Project) -> Facts:
    tools = Tools(project.tools)
    prefixes = tuple(p for name in project.servers for p in (f"{name}.", f"{name}_"))
    return Facts(
        tools=tools,
        specs=project.tools,
        prefixes=prefixes,
        open_names=bool(project.config.meta.enabled),
    )


def check_hook(
    hook: HookSpec, path: str, label: str, known: Facts, event_at: tuple[int, int] = (1, 1)
) -> list[Problem]:
    """Every guard problem of one hook, located in ``path`` (``event_at``: its event:)."""
    spec = event(hook.event)
    if spec is None:
        return []  # an unknown event is reported by the field checks
    payload = _payload(hook.event, spec, known)
    if spec is CUSTOM and hook.event not in (known.emitted or {}):
        typo = _custom_typo(hook.event, known)
        if typo is not None:
            return [
                Problem(
                    path=path,
                    line=event_at[0],
                    column=event_at[1],
                    code="event-never-fired",
                    message=f"{label} {typo}",
                )
            ]
    ctx = Context(
        event=hook.event,
        payload=payload,
        tools=known.tools,
        extra=BUILTIN_TOOLS,
        prefixes=known.prefixes,
        open_names=known.open_names,
        text_key=spec.text if spec is not CUSTOM or _wrapped(payload) else None,
        origin=spec.origin,
        origin_keys=spec.origin_keys,
        modules=HOOK_MODULES,
        infer=lambda name: tool_flow(known, name).returns,
    )
    problems: list[Problem] = []
    tools: frozenset[str] | None = None
    if hook.when:
        found, tools = _check_when(hook.when, ctx)
        problems += _locate(found, path, hook.when_line, hook.when_column, label, "when: ")
    if hook.script:
        problems += _locate(
            _check_script(hook.script, ctx, spec, tools),
            path,
            hook.script_line,
            hook.script_column,
            label,
            "",
        )
    return problems


def _wrapped(payload: Shape) -> bool:
    return payload.keys is not None and "value" in payload.keys


def _payload(name: str, spec: Event, known: Facts) -> Shape:
    if spec is CUSTOM:
        return replace(_custom(name, known), what="payload", role="payload", event=name)
    shape = of(S.DICT, keys={k: declared(t) for k, t in spec.payload.items()})
    return replace(shape, what="payload", role="payload", event=name)


def _check_when(expr: str, ctx: Context) -> tuple[list[Finding], frozenset[str] | None]:
    source = expr.strip()
    lead = expr[: len(expr) - len(expr.lstrip())].count("\n")
    tree = parse(source, "eval")
    if not isinstance(tree, ast.Expression):
        return [], None  # the Starlark checks report it
    checker = Checker(replace(ctx, modules=frozenset(surface.module_names("when"))), None, source)
    env = Env({"payload": ctx.payload, "event": text(ctx.event).named("event", "event")})
    try:
        checker.expr(tree.body, env)
        tools = checker.narrow(tree.body, env.copy(), True).tools
    except RecursionError:
        return [], None
    found = [*checker.findings.values(), *conditions.check(tree)]
    return [f._replace(line=f.line + lead) for f in found], tools


def _handle(module: ast.Module) -> ast.FunctionDef | None:
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == "handle":
            return node
    return None


def _check_script(
    script: str, ctx: Context, spec: Event, tools: frozenset[str] | None
) -> list[Finding]:
    module = parse(script)
    if not isinstance(module, ast.Module):
        return []
    early = decisions.check(module) + conditions.check(module)
    fn = _handle(module)
    if fn is None or len(fn.args.args) < 2:
        return early
    checker = Checker(ctx, module, script)
    event_name, payload_name = fn.args.args[0].arg, fn.args.args[1].arg
    env = Env(
        {payload_name: ctx.payload, event_name: text(ctx.event).named("event", "event")},
        {},
        tools,
    )
    try:
        checker.block(fn.body, env)
    except RecursionError:
        return []
    found = list(checker.findings.values())
    shapes = {id(node): args[0] for _name, node, args in checker.decisions if args}
    found += _decisions(module, ctx, spec, shapes)
    found += decisions.unchanged(fn, payload_name)
    return early + found


_IGNORED_BLOCK = {
    "session.end": "the session is over when session.end runs",
    "error": "the run has already failed; error hooks only observe",
}


def _decisions(
    module: ast.Module, ctx: Context, spec: Event, shapes: Mapping[int, Shape]
) -> list[Finding]:
    """block/modify (calls or the dict form) on an event where they do nothing."""
    found = []
    for node in ast.walk(module):
        kind, arg = _decision(node)
        if kind == "block" and spec.block is None:
            why = _IGNORED_BLOCK.get(ctx.event, "nothing reads it")
            found.append(
                Finding(
                    getattr(node, "lineno", 1),
                    getattr(node, "col_offset", 0) + 1,
                    "guard-decision-ignored",
                    f"block() on {ctx.event} has no effect ({why}); log it (log(...)) or move "
                    f"the check to an event whose block does something: {_blockers()}",
                )
            )
        elif kind == "modify":
            found += _modify(node, arg, ctx, spec, shapes.get(id(node)))
    return found


def _blockers() -> str:
    from harness.events import EVENTS

    return ", ".join(name for name, e in EVENTS.items() if e.block)


def _decision(node: ast.AST) -> tuple[str, ast.AST | None]:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("block", "modify")
    ):
        return node.func.id, node.args[0] if node.args else None
    if isinstance(node, ast.Dict):
        values = dict(zip((literal(k) if k else None for k in node.keys), node.values, strict=True))
        action = literal(values["action"]) if "action" in values else None
        if action in ("block", "modify"):
            payload = values.get("payload")
            return str(action), payload if payload is not None else node
    return "", None


def _modify(
    node: ast.AST, arg: ast.AST | None, ctx: Context, spec: Event, shape: Shape | None
) -> list[Finding]:
    at = (getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1)
    if not spec.modify:
        allowed = "block or allow" if spec.block else "only allow (observe)"
        return [
            Finding(
                *at,
                "guard-decision-ignored",
                f"modify() on {ctx.event} has no effect: nothing it changes is used (a "
                f"modify that changes a key fails the hook); hooks on {ctx.event} may {allowed}",
            )
        ]
    if spec.modify == ("*",) or arg is None:
        return []
    if shape is not None and shape.known and shape.kinds and S.DICT not in shape.kinds:
        key = spec.text or spec.modify[0]
        return [
            Finding(
                *at,
                "guard-modify-shape",
                f"modify() needs a dict of the keys to change, got {shape.text()}"
                f"{' (' + spec.origin + ')' if spec.origin else ''}; write "
                f'modify({{"{key}": ...}}) (may change: {", ".join(spec.modify)})',
            )
        ]
    if isinstance(arg, ast.Dict):
        for k in arg.keys:
            name = literal(k) if k is not None else None
            if isinstance(name, str) and name not in spec.modify and name != "action":
                if isinstance(node, ast.Dict) and name == "reason":
                    continue
                return [
                    Finding(
                        *at,
                        "guard-modify-key",
                        f'modify() may not change "{name}" in {ctx.event} (a hook that does '
                        f"fails); it may change: {', '.join(spec.modify)}",
                    )
                ]
    return []


# -- custom.* payloads: from the tools that emit them ---------------------------------


def _custom_typo(name: str, known: Facts) -> str | None:
    """``custom.deplyo`` when no tool emits it but a tool emits ``custom.deploy``."""
    emitted = known.emitted or {}
    match = closest(name, emitted)
    if match is None:
        return None
    tools = ", ".join(sorted(set(known.emit_sites.get(match, ()))))
    return (
        f'listens to "{name}", which no tool emits, so it never runs (did you mean '
        f'"{match}"? emitted by {tools}); fix the event: field (an event fired from '
        "Python with Session.fire is not known to validate: name it differently)"
    )


def _custom(name: str, known: Facts) -> Shape:
    if known.emitted is None:
        known.emitted = _emitted(known)
    shape = known.emitted.get(name)
    if shape is None:
        return of(S.DICT)  # emitted from Python (Session.fire) or not at all: not known
    return shape


def _emitted(known: Facts) -> dict[str, Shape]:
    found: dict[str, Shape] = {}
    for tool in known.specs.values():
        if not tool.script or "emit" not in tool.script:
            continue
        for event_name, value in tool_flow(known, tool.name).emits:
            shape = _as_payload(value)
            found[event_name] = join(found[event_name], shape) if event_name in found else shape
            known.emit_sites.setdefault(event_name, []).append(tool.name)
    return found


@dataclass(frozen=True, slots=True)
class ToolFlow:
    """What a tool's script returns and emits, as far as its ``run`` shows."""

    returns: Shape
    emits: tuple[tuple[str, Shape], ...] = ()


_NO_FLOW = ToolFlow(returns=S.ANY)


def tool_flow(known: Facts, name: str) -> ToolFlow:
    """The (cached) flow of tool ``name``'s script: its return shape and its emits."""
    done = known.flows.get(name)
    if done is None:
        done = known.flows[name] = _tool_flow(known, name)
    return done


def _tool_flow(known: Facts, name: str) -> ToolFlow:
    tool = known.specs.get(name)
    if tool is None or not tool.script:
        return _NO_FLOW
    module = parse(tool.script)
    if not isinstance(module, ast.Module):
        return _NO_FLOW
    run = next((n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "run"), None)
    if run is None or not run.args.args:
        return _NO_FLOW
    sites: list[tuple[str, Shape]] = []

    def on_call(fn: str, call: ast.Call, args: list[Shape]) -> None:
        if fn == "emit" and call.args:
            event_name = literal(call.args[0])
            if isinstance(event_name, str):
                sites.append((event_name, args[1] if len(args) > 1 else of(S.NULL)))

    info = known.tools.get(name)
    params = {} if info is None or info.params is None else info.params
    ctx = Context(
        event="",
        payload=S.ANY,
        tools=known.tools,
        modules=frozenset(surface.TOOL_MODULES),
        on_call=on_call,
    )
    checker = Checker(ctx, module)
    env = Env({run.args.args[0].arg: of(S.DICT, keys=dict(params)).named("args")})
    try:
        _env, _done = checker.block(run.body, env)
    except RecursionError:
        return _NO_FLOW
    out = S.NOTHING
    for shape in checker.returns:
        out = join(out, shape)
    if not checker.returns or not _done:
        out = join(out, of(S.NULL))  # falling off the end returns None
    returns = replace(out, what="", role="", texts=None) if out.kinds else S.ANY
    return ToolFlow(returns=returns, emits=tuple(sites))


def _as_payload(value: Shape) -> Shape:
    """The hook payload of ``emit(event, value)`` (harness/session.py ``_emit_custom``)."""
    session = {"session": text()}
    if value.kinds == {S.DICT}:
        if value.keys is None:
            return of(S.DICT)
        return of(S.DICT, keys={**value.keys, **session})
    if value.kinds == {S.NULL}:
        return of(S.DICT, keys=session)
    if value.known and S.DICT not in value.kinds:
        return of(S.DICT, keys={"value": value.without((S.NULL,)), **session})
    return of(S.DICT)


# -- locating --------------------------------------------------------------------------


def _locate(
    found: Iterable[Finding], path: str, first_line: int, first_column: int, label: str, what: str
) -> list[Problem]:
    line0, indent = max(first_line, 1) - 1, max(first_column - 1, 0)
    return [
        Problem(
            path=path,
            line=line0 + f.line,
            column=f.column + indent,
            code=f.code,
            message=f"{label} {what}{f.message}",
            severity="warning" if f.severity == "warning" else "error",
        )
        for f in found
    ]
