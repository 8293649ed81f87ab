"""HookChain: hooks grouped by event, order fixed at load (docs/spec.md §4).

``run`` is the whole decision loop: evaluate ``when``, call ``handle``, interpret the
decision, merge ``modify`` payloads, stop at the first ``block``, and treat every
failure as a block unless the hook says ``on_error: allow``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from harness.artifacts.model import HookSpec, hook_order
from harness.events import ALIASES, EVENTS
from harness.hotpath import tuple_maker
from harness.redact import REDACT_REQUEST, RuleError, apply_request
from harness.runtime.context import CallContext, Outcome, ScriptRuntime
from harness.runtime.reach import UNUSED, hook_inputs
from harness.runtime.when import FALLBACK_ERRORS, NO_ANSWER, Fn, compile_when

# Keys a modify() may change, per event (harness/events.py). Any other key must be left
# as it is; an event whose modify has no effect allows none.
MUTABLE_KEYS: dict[str, frozenset[str]] = {
    name: frozenset(spec.modify) for name, spec in EVENTS.items()
}
# Events fired under another name: ai-harness's meta.register_tool is meta.tool_register.
EVENT_ALIASES = ALIASES
# Two names for one value (ai-harness hooks read "args"): a modify may change either,
# and afterwards both carry the new value (re-validated like any modified arguments).
ALIASED_KEYS: dict[str, tuple[str, str]] = {"tool.pre": ("arguments", "args")}


class ChainOutcome(NamedTuple):
    """``blocked_by`` is set when a hook blocked (or failed closed); ``reason`` says why.

    A NamedTuple: one is made per hook event of every call (see ``Outcome``).
    """

    payload: Mapping[str, Any]
    blocked_by: str | None = None
    reason: str = ""
    failed: bool = False

    @property
    def why(self) -> str:
        """The refusal as callers report it: the failure itself, or who blocked and why."""
        return self.reason if self.failed else f'blocked by hook "{self.blocked_by}": {self.reason}'


_chain_outcome = tuple_maker(ChainOutcome)  # one per hook event of every call


# Events whose hooks must all have seen the payload that goes on (issue 10, item 8):
# the tool never receives arguments that a tool.pre hook able to block has not seen.
SETTLE_EVENTS = frozenset({"tool.pre"})
# How often one hook may change the payload in one call before the chain is declared
# unsettled (an error result): a chain of idempotent hooks changes it once per hook.
MAX_CHANGES = 2


class HookFailure(Exception):
    pass


# Called after each modify with the merged payload; returns an error message to fail
# the hook with (e.g. re-validation of modified arguments), or None.
Recheck = Callable[[Mapping[str, Any]], "str | None"]
# (event, hook name, decision, reason, duration_ms) -> None
DecisionSink = Callable[[str, str, str, str, float], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class HookPlan:
    """What running one hook needs, compiled once when the chain is made."""

    spec: HookSpec
    when: Fn | None  # the compiled ``when`` (None: no when, or only Starlark can answer)
    event_used: bool  # whether the script reads its event parameter (runtime/reach.py)
    keys: frozenset[str] | None  # payload keys it reads; None: it may read any


def hook_plan(spec: HookSpec) -> HookPlan:
    reads = hook_inputs(spec.script)
    return HookPlan(
        spec=spec,
        when=compile_when(spec.when) if spec.when else None,
        event_used=reads.event,
        keys=reads.keys,
    )


class HookChain:
    def __init__(self, hooks: Iterable[HookSpec]) -> None:
        by_event: dict[str, list[HookSpec]] = {}
        for hook in hooks:
            event = EVENT_ALIASES.get(hook.event, hook.event)
            by_event.setdefault(event, []).append(hook)
        self._by_event = {
            event: tuple(sorted(specs, key=hook_order)) for event, specs in by_event.items()
        }
        self._plans = {
            event: tuple(map(hook_plan, specs)) for event, specs in self._by_event.items()
        }
        self.pre = self.for_event("tool.pre")  # read on every call
        self.post = self.for_event("tool.post")

    def for_event(self, event: str) -> tuple[HookSpec, ...]:
        return self._by_event.get(event, ())

    def run(
        self,
        event: str,
        payload: Mapping[str, Any],
        runtime: ScriptRuntime,
        make_ctx: Callable[[HookSpec], CallContext],
        recheck: Recheck | None = None,
        on_decision: DecisionSink | None = None,
    ) -> ChainOutcome:
        hooks = self._plans.get(event)
        current = payload  # never mutated: a modify() merges into a new dict
        if not hooks:
            return _chain_outcome((current, None, "", False))
        # One pass in priority order. Guards see what runs (SETTLE_EVENTS): when a hook
        # after the first changes the payload, the hooks before it have not seen the
        # new one, and _settle takes over. (Until then every earlier hook has seen
        # ``current``: the first hook's own change counts as seen by it.)
        settle = event in SETTLE_EVENTS
        first: str | None = None  # the first hook, when it changed the payload
        for i, plan in enumerate(hooks):
            hook = plan.spec
            try:
                action, reason, new, took = _run_one(
                    plan, event, current, runtime, make_ctx, recheck
                )
            except HookFailure as exc:
                failed = _failure(hook, exc, event, current, on_decision)
                if failed is None:  # on_error: allow
                    continue
                return failed
            if on_decision is not None:
                on_decision(event, hook.name, action, reason, took)
            if action == "block":
                return ChainOutcome(payload=current, blocked_by=hook.name, reason=reason)
            if action == "modify" and new is not current:
                if settle and i > 0:
                    seen: list[Mapping[str, Any] | None] = [current] * len(hooks)
                    seen[i] = new
                    for later in range(i + 1, len(hooks)):
                        seen[later] = None
                    changes = {first: 1} if first is not None else {}
                    changes[hook.name] = changes.get(hook.name, 0) + 1
                    return _settle(
                        hooks, event, new, seen, changes, runtime, make_ctx, recheck, on_decision
                    )
                first = hook.name
                current = new
        return _chain_outcome((current, None, "", False))


def _settle(
    hooks: tuple[HookPlan, ...],
    event: str,
    current: Mapping[str, Any],
    seen: list[Mapping[str, Any] | None],
    changes: dict[str, int],
    runtime: ScriptRuntime,
    make_ctx: Callable[[HookSpec], CallContext],
    recheck: Recheck | None,
    on_decision: DecisionSink | None,
) -> ChainOutcome:
    """Run until every hook has seen ``current`` (``seen[i]`` is what hook i last saw).

    A change sends the chain back to the first hook that has not seen the new
    payload; a hook's own change counts as seen by it; a hook changing the payload
    more than MAX_CHANGES times ends the call with an error outcome.
    """
    i, n = 0, len(hooks)
    while i < n:
        if seen[i] is current:
            i += 1
            continue
        plan = hooks[i]
        hook = plan.spec
        try:
            action, reason, new, took = _run_one(plan, event, current, runtime, make_ctx, recheck)
        except HookFailure as exc:
            failed = _failure(hook, exc, event, current, on_decision)
            if failed is None:  # on_error: allow
                seen[i] = current
                i += 1
                continue
            return failed
        if on_decision is not None:
            on_decision(event, hook.name, action, reason, took)
        if action == "block":
            return ChainOutcome(payload=current, blocked_by=hook.name, reason=reason)
        changed = action == "modify" and new is not current
        if changed:
            current = new
            count = changes[hook.name] = changes.get(hook.name, 0) + 1
            if count > MAX_CHANGES:
                message = _unsettled(event, hook.name, changes)
                if on_decision is not None:
                    on_decision(event, hook.name, "error", message, 0.0)
                return ChainOutcome(
                    payload=current, blocked_by=hook.name, reason=message, failed=True
                )
        seen[i] = current
        i = 0 if changed else i + 1
    return _chain_outcome((current, None, "", False))


def _failure(
    hook: HookSpec,
    exc: HookFailure,
    event: str,
    current: Mapping[str, Any],
    on_decision: DecisionSink | None,
) -> ChainOutcome | None:
    """A hook that failed: recorded, then the blocking outcome, or None (on_error: allow)."""
    message = f'hook "{hook.name}" failed: {exc}'
    if on_decision is not None:
        on_decision(event, hook.name, "error", message, 0.0)
    if hook.on_error == "allow":
        return None
    return ChainOutcome(payload=current, blocked_by=hook.name, reason=message, failed=True)


def _unsettled(event: str, name: str, changes: Mapping[str, int]) -> str:
    others = ", ".join(f'"{h}"' for h in sorted(changes) if h != name) or "none"
    return (
        f'{event} hooks do not settle: hook "{name}" changed the payload '
        f"{changes[name]} times in one call (other hooks that changed it: {others}). "
        "After every change the hooks that saw the earlier payload run again, and "
        "these keep changing it; make each modify() idempotent (running the hook "
        "again on its own result must change nothing) or merge the hooks."
    )


_ALLOW = {"action": "allow"}


def _run_one(  # noqa: C901
    plan: HookPlan,
    event: str,
    current: Mapping[str, Any],
    runtime: ScriptRuntime,
    make_ctx: Callable[[HookSpec], CallContext],
    recheck: Recheck | None,
) -> tuple[str, str, Mapping[str, Any], float]:
    """(action, reason, payload after the hook, duration_ms) of one hook."""
    hook = plan.spec
    path = hook.source.path
    if hook.when:
        # The Python evaluator first; it answers only where it equals Starlark
        # (runtime/when.py), else the runtime evaluates the expression.
        matched: Any = NO_ANSWER
        fn = plan.when
        if fn is not None:
            try:
                matched = fn({"event": event, "payload": current})
            except FALLBACK_ERRORS:
                pass
        took = 0.0
        if matched is NO_ANSWER:
            out = runtime.eval_when(
                hook.when,
                path,
                hook.when_line or 1,
                event,
                current,
                make_ctx(hook),
                hook.timeout_ms,
            )
            if out.status != "ok":
                _fail(out, hook, "when: ")
            matched, took = out.value, out.duration_ms
        if not matched:
            return "skip", "", current, took
    # Hand the script only what it can observe (runtime/reach.py): converting into
    # Starlark costs per value, and arguments can be large. A parameter the script
    # never names is UNUSED: the runtime passes 0 (the cheapest value to convert), or
    # nothing at all when neither is read.
    keys = plan.keys
    if keys is None:
        seen: Mapping[str, Any] | object = current
    elif keys:
        seen = {k: current[k] for k in keys if k in current}
    else:
        seen = UNUSED
    out = runtime.run_hook(
        hook.script,
        path,
        hook.script_line or 1,
        event if plan.event_used else UNUSED,
        seen,
        make_ctx(hook),
        hook.timeout_ms,
    )
    if out.status != "ok":
        _fail(out, hook, "")
    value = out.value
    if value is None or value == _ALLOW:
        return "allow", "", current, out.duration_ms
    action, reason, new = _interpret(value)
    if action == "block":
        return "block", reason or "no reason given", current, out.duration_ms
    if action == "modify":
        if REDACT_REQUEST in new:  # modify(redact(payload, ...)) of a handed-over payload
            new = _redacted(current, new)
        merged = _merge(event, current, new)
        if merged is current:  # a modify that changes nothing is an allow
            return "allow", "", current, out.duration_ms
        if recheck is not None:
            problem = recheck(merged)
            if problem:
                raise HookFailure(problem)
        return "modify", "", merged, out.duration_ms
    return "allow", "", current, out.duration_ms


def _redacted(current: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The changes of a redaction request (runtime/builtins/redaction.py), applied to
    the payload here: a hook never needs a copy of a large result to redact it."""
    try:
        changes = apply_request(dict(current), new[REDACT_REQUEST])
    except RuleError as exc:
        raise HookFailure(str(exc)) from None
    return {**{k: v for k, v in new.items() if k != REDACT_REQUEST}, **changes}


def _fail(out: Outcome, hook: HookSpec, prefix: str) -> None:
    if out.status == "timeout":
        if out.error and out.error.startswith("timed out: "):  # says why (memguard.py)
            raise HookFailure(out.error)
        raise HookFailure(f"timed out after {hook.timeout_ms} ms")
    raise HookFailure(prefix + (out.error or out.status))


def _interpret(value: Any) -> tuple[str, str, dict[str, Any]]:
    """Decision value -> (action, reason, payload). Anything unexpected is a failure."""
    if value is None:
        return "allow", "", {}
    if not isinstance(value, dict):
        raise HookFailure(
            f"handle() must return allow(), block(reason), modify(payload), None or a decision "
            f"dict; got {type(value).__name__}"
        )
    # ai-harness's dict form: "continue" (or no action) means allow, keys other than
    # action/reason/payload are ignored, and a modify without "payload" uses the dict
    # itself. An unknown action is still a failure (fail closed).
    action = value.get("action", "allow")
    if action == "continue":
        action = "allow"
    if action not in ("allow", "block", "modify"):
        raise HookFailure(
            'handle() returned an invalid decision: expected {"action": "allow"|"continue"|'
            f'"block"|"modify", "reason": ..., "payload": ...}}; got {value!r:.200}'
        )
    reason = value.get("reason") or ""
    if not isinstance(reason, str):
        raise HookFailure(f"decision reason must be a string, got {type(reason).__name__}")
    if action != "modify":
        return action, reason, {}
    payload = value.get("payload")
    if "payload" not in value:
        payload = {k: v for k, v in value.items() if k not in ("action", "reason")}
    if not isinstance(payload, dict):
        raise HookFailure("modify() needs a dict payload")
    return action, reason, payload


def _merge(event: str, current: Mapping[str, Any], new: Mapping[str, Any]) -> Mapping[str, Any]:
    """``current`` itself when ``new`` changes nothing, else a new dict."""
    mutable = MUTABLE_KEYS.get(event)
    merged: dict[str, Any] | None = None
    changed = []
    for key, value in new.items():
        if key in current and current[key] == value:
            continue
        if mutable is not None and key not in mutable:
            allowed = ", ".join(sorted(mutable)) or "nothing"
            raise HookFailure(f'modify() may not change "{key}" in {event} (may change: {allowed})')
        if merged is None:
            merged = dict(current)
        merged[key] = value
        changed.append(key)
    if merged is None:
        return current
    pair = ALIASED_KEYS.get(event)
    if pair is not None and changed:
        first, second = pair
        if first in changed and second in changed and merged[first] != merged[second]:
            raise HookFailure(
                f'modify() changed "{first}" and "{second}" to different values '
                f"in {event}; they are the same arguments: change one of them"
            )
        if second in changed:
            merged[first] = merged[second]
        elif first in changed:
            merged[second] = merged[first]
    return merged
