"""The settle rule checked by ``harness test``: a ``tool.pre`` modify run again on its own
output must change nothing (docs/hooks.md, "Several hooks on one event").

In a real chain the hooks that saw an earlier payload run again after every change; a
hook whose modify is not idempotent changes the payload each time and the call ends
with "hooks do not settle". A hook case shows it at once, with the key that changed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from harness.artifacts.model import HookSpec
from harness.errors import BuiltinError
from harness.hooks import ALIASED_KEYS, ChainOutcome, DecisionSink, HookChain, Recheck
from harness.runtime.builtins.cache import MemoryCache
from harness.runtime.builtins.session_state import MetricsStore, Scratchpad, serve
from harness.runtime.context import CallContext, ScriptRuntime

RULE = "make the modify idempotent (docs/hooks.md: the settle rule)"


def changed_keys(before: Any, after: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(dotted key, old value, new value) of each place where ``after`` differs."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in (*before, *(k for k in after if k not in before)):
            where = f"{path}.{key}" if path else str(key)
            if key not in after:
                yield where, before[key], "(removed)"
            elif key not in before:
                yield where, "(absent)", after[key]
            else:
                yield from changed_keys(before[key], after[key], where)
    elif before != after or type(before) is not type(after):
        yield path or "(payload)", before, after


def _show(value: Any) -> str:
    if value in ("(removed)", "(absent)"):
        return str(value)
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def not_idempotent(first: Mapping[str, Any], again: ChainOutcome, decision: str) -> str | None:
    """Why a second run of a hook on ``first`` (its own output) breaks the settle rule,
    or None when it changed nothing."""
    if again.failed:
        return f"modify is not idempotent: run again on its own output it failed: {again.reason}"
    if again.blocked_by is not None:
        return f"modify is not idempotent: run again on its own output it blocked: {again.reason}"
    if decision != "modify":
        return None
    # The alias of a key (ai-harness's ``args`` for ``arguments``) changes with it.
    alias = ALIASED_KEYS.get("tool.pre", ("", ""))[1]
    changes = [c for c in changed_keys(first, again.payload) if c[0].split(".")[0] != alias]
    if not changes:
        return None
    key, old, new = changes[0]
    more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
    return (
        f"modify is not idempotent: run again on its own output it changed "
        f"{key} ({_show(old)} -> {_show(new)}){more}; {RULE}"
    )


def rerun(
    chain: HookChain,
    payload: Mapping[str, Any],
    runtime: ScriptRuntime,
    make_ctx: Callable[[HookSpec], CallContext],
    recheck: Recheck | None = None,
) -> str | None:
    """Run the one hook of ``chain`` on ``payload`` (its own output); why that breaks
    the settle rule, or None."""
    seen: list[str] = []
    again = chain.run(
        "tool.pre",
        payload,
        runtime,
        make_ctx,
        recheck,
        lambda _e, _n, decision, _r, _t: seen.append(decision),
    )
    return not_idempotent(payload, again, "modify" if "modify" in seen else "allow")


def isolated(make_ctx: Callable[[HookSpec], CallContext]) -> Callable[[HookSpec], CallContext]:
    """Contexts like ``make_ctx``'s over a copy of the session state (cache, metrics,
    ``ctx``): a second run for the check leaves what the case sees unchanged."""

    def make(hook: HookSpec) -> CallContext:
        ctx = make_ctx(hook)
        metrics, pad = MetricsStore(), Scratchpad()
        if ctx.host is not None:
            with contextlib.suppress(BuiltinError):
                for name, value in (ctx.host("metrics.snapshot", {}) or {}).items():
                    metrics.set(name, value)
            with contextlib.suppress(BuiltinError):
                pad = Scratchpad(ctx.host("ctx.snapshot", {}) or {})

        def host(method: str, payload: Mapping[str, Any]) -> Any:
            if method.startswith(("metrics.", "ctx.")):
                return serve(method, payload, metrics, pad)
            raise BuiltinError(f"{method} is not available in this check")

        cache = ctx.cache.copy() if isinstance(ctx.cache, MemoryCache) else MemoryCache()
        return replace(ctx, cache=cache, host=host)

    return make


class SettleCheck(HookChain):
    """The hook chain of a ``harness test`` case: after every ``tool.pre`` run that let
    the call through, each hook that modified the arguments runs alone again on the
    final payload, over a copy of the session state; what breaks the settle rule is
    kept in :attr:`found` as hook name -> message, once per hook."""

    def __init__(self, hooks: Iterable[HookSpec]) -> None:
        hooks = tuple(hooks)
        super().__init__(hooks)
        self._single = {h.name: HookChain([h]) for h in hooks if h.event == "tool.pre"}
        self.found: dict[str, str] = {}

    def run(
        self,
        event: str,
        payload: Mapping[str, Any],
        runtime: ScriptRuntime,
        make_ctx: Callable[[HookSpec], CallContext],
        recheck: Recheck | None = None,
        on_decision: DecisionSink | None = None,
    ) -> ChainOutcome:
        modified: list[str] = []

        def spy(ev: str, name: str, decision: str, reason: str, took: float) -> None:
            if decision == "modify":
                modified.append(name)
            if on_decision is not None:
                on_decision(ev, name, decision, reason, took)

        out = super().run(event, payload, runtime, make_ctx, recheck, spy)
        if event != "tool.pre" or out.blocked_by is not None:
            return out
        for name in dict.fromkeys(modified):
            single = self._single.get(name)
            if single is None or name in self.found:
                continue
            why = rerun(single, out.payload, runtime, isolated(make_ctx), recheck)
            if why is not None:
                self.found[name] = why
        return out
