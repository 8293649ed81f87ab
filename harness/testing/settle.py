"""The settle rule checked by ``harness test``: a ``tool.pre`` modify run again on its own
output must change nothing (docs/hooks.md, "Several hooks on one event").

In a real chain the hooks that saw an earlier payload run again after every change; a
hook whose modify is not idempotent changes the payload each time and the call ends
with "hooks do not settle". A hook case shows it at once, with the key that changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from harness.hooks import ALIASED_KEYS, ChainOutcome

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
