"""``redact(value, rules=[], keys=None)``: secrets masked with the one rule set.

The rules are harness/redact.py's (the audit trail's), compiled once per process;
``rules`` adds extra patterns (compiled once per process per list). With ``keys``,
``value`` is a dict and the result holds only those of its keys whose value had
something masked: ``modify(redact(payload, keys=["result", "error"]))`` changes
exactly what needed masking.

A hook whose payload is only ever passed as ``modify(redact(payload, ...))`` gets a
handle instead of its payload (runtime/reach.py: ``passthrough``): the script cannot
observe the difference. ``redact()`` on the handle checks its arguments and answers
with a handle to the request, which the hook chain applies to the payload where the
payload is: a large result never crosses into Starlark, nor to a worker process.
"""

from __future__ import annotations

from typing import Any

from harness.errors import BuiltinError
from harness.redact import RuleError, compiled_extra, frozen_spec, redact, redact_keys
from harness.runtime.context import CallContext
from harness.runtime.reach import Passthrough, hand_over

WHERE = "redact(): rules"


def _keys(keys: Any) -> tuple[str, ...]:
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise BuiltinError(f"redact(): keys must be a list of strings, got {keys!r:.80}")
    return tuple(keys)


def redact_builtin(ctx: CallContext, value: Any, rules: Any = None, keys: Any = None) -> Any:
    try:
        extra = compiled_extra(rules, WHERE)
    except RuleError as exc:
        raise BuiltinError(str(exc)) from None
    names = None if keys is None else _keys(keys)
    if type(value) is Passthrough:  # the hook's payload: redacted by the hook chain
        spec = frozen_spec(rules) if rules else ()
        return hand_over(Request(spec, names))
    if names is None:
        return redact(value, extra)
    if not isinstance(value, dict):
        raise BuiltinError(f"redact(): with keys, value must be a dict, got {type(value).__name__}")
    return redact_keys(value, names, extra)


class Request:
    """What ``redact(payload, rules, keys)`` asked for, on a handed-over payload."""

    __slots__ = ("rules", "keys")

    def __init__(self, rules: Any, keys: tuple[str, ...] | None) -> None:
        self.rules, self.keys = rules, keys

    def plain(self) -> dict[str, Any]:
        """The request as JSON-compatible data (it crosses from a worker process)."""
        return {"rules": _lists(self.rules), "keys": None if self.keys is None else list(self.keys)}


def _lists(spec: Any) -> Any:
    return [_lists(x) for x in spec] if isinstance(spec, tuple) else spec


FUNCTIONS = {"redact": redact_builtin}
