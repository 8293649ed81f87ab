"""``redact(value, rules=[], keys=None)``: secrets masked with the one rule set.

The rules are harness/redact.py's (the audit trail's), compiled once per process;
``rules`` adds extra patterns (compiled once per process per list). With ``keys``,
``value`` is a dict and the result holds only those of its keys whose value had
something masked: ``modify(redact(payload, keys=["result", "error"]))`` changes
exactly what needed masking.

A hook whose payload is only ever passed as ``modify(redact(payload, ...))`` gets its
payload as a handle (runtime/reach.py: ``passthrough``): the script cannot observe the
difference, and a large result never crosses into Starlark and back.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from harness.errors import BuiltinError
from harness.redact import RuleError, RuleSet, extra_rules, redact, redact_keys, rule_set
from harness.runtime.context import CallContext
from harness.runtime.reach import Passthrough, hand_over


def _frozen(spec: Any) -> Any:
    if isinstance(spec, list):
        return tuple(_frozen(x) for x in spec)
    return spec


@lru_cache(maxsize=64)
def _compiled(spec: Any) -> RuleSet | None:
    try:
        return rule_set(extra_rules(spec, "redact(): rules"))
    except RuleError as exc:
        raise BuiltinError(str(exc)) from None


def _extra(rules: Any) -> RuleSet | None:
    if rules is None or rules == []:
        return None
    try:
        return _compiled(_frozen(rules))
    except TypeError:  # unhashable: not a list of strings or pairs
        raise BuiltinError(
            "redact(): rules must be a list of pattern strings or [pattern, replacement] "
            f"pairs, got {rules!r:.80}"
        ) from None


def _keys(keys: Any) -> tuple[str, ...]:
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise BuiltinError(f"redact(): keys must be a list of strings, got {keys!r:.80}")
    return tuple(keys)


def redact_builtin(ctx: CallContext, value: Any, rules: Any = None, keys: Any = None) -> Any:
    extra = _extra(rules)
    handle = type(value) is Passthrough
    target = value.value if handle else value
    if keys is None:
        out = redact(target, extra)
    else:
        names = _keys(keys)
        if not isinstance(target, dict):
            raise BuiltinError(
                f"redact(): with keys, value must be a dict, got {type(target).__name__}"
            )
        out = redact_keys(target, names, extra)
    return hand_over(out) if handle else out


FUNCTIONS = {"redact": redact_builtin}
