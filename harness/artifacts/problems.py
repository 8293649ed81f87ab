"""The leaf every layer shares: ``Problem``, type names for messages, suggestions.

Imports nothing from harness, so ``config``, ``artifacts`` and the runtime can all use
it without an import cycle (tests/test_architecture.py).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One thing wrong with an artifact. ``line``/``column`` are 1-based; 0 = unknown."""

    path: str
    line: int = 0
    column: int = 0
    severity: Severity = "error"
    code: str
    message: str

    def render(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}"
        return f"{where}: {self.severity}: {self.message} [{self.code}]"


def type_name(value: Any) -> str:
    """YAML-ish name of a Python value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def a_type(value: Any) -> str:
    """``an integer``, ``a string``, ``a list``, ... or ``null`` (for "got ..." messages)."""
    name = type_name(value)
    if name == "null":
        return name
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def json_path(parts: Iterable[Any]) -> str:
    """``$.a[0].b``: where in a JSON document (arguments, a schema) something is."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def as_json(value: Any) -> str:
    """A value as JSON writes it (``null``, ``"5"``, ``true``), for messages."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def closest(word: Any, choices: Iterable[str]) -> str | None:
    """The one of ``choices`` closest to ``word`` (difflib, cutoff 0.6), or None."""
    found = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def suggest(word: Any, choices: Iterable[str]) -> str:
    """`` (did you mean "x"?)`` or ``""``: the one "did you mean" of every message."""
    match = closest(word, choices)
    return f' (did you mean "{match}"?)' if match is not None else ""


def unknown_tool_message(name: str, available: Iterable[str]) -> str:
    """``unknown tool "x"; available: a, b, c; did you mean "y"?`` (docs/spec.md §9 wording)."""
    names = sorted(available)
    match = closest(name, names)
    hint = f'; did you mean "{match}"?' if match is not None else ""
    return f'unknown tool "{name}"; available: {", ".join(names) or "(none)"}{hint}'


# People's own metadata in any frontmatter (issue 23): a key starting with ``x-``, or
# the ``extensions:`` map. Every other key harness does not read is an error.
EXTENSIONS = "extensions"
EXTENSION_PREFIX = "x-"
# What the published JSON Schemas add to every object whose keys harness checks.
EXTENSION_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"],
    "description": "Your own metadata: harness never reads it (keys starting with x- "
    "are allowed too).",
}
EXTENSION_PATTERN: dict[str, Any] = {"^x-": {}}


def own_metadata(key: Any) -> bool:
    """True for a key left to people's own metadata (``x-...`` or ``extensions``)."""
    return isinstance(key, str) and (key.startswith(EXTENSION_PREFIX) or key == EXTENSIONS)


def extensions_problem(data: Any) -> str | None:
    """Why ``data``'s ``extensions:`` value is refused, or None."""
    if not isinstance(data, dict) or EXTENSIONS not in data:
        return None
    value = data[EXTENSIONS]
    if value is None or isinstance(value, dict):
        return None
    return (
        f"extensions must be a mapping of your own keys (extensions: {{owner: team}}), "
        f"got {a_type(value)}"
    )


# ai-harness's typed-artifact metadata that changes nothing there either (its config
# loader ignores it): a warning, not an error, so origin files keep loading. Its keys
# that do change behaviour there (condition, depends_on, priority) stay errors.
ORIGIN_METADATA = ("name", "type", "version", "author", "tags")


def origin_metadata(label: str, key: Any) -> str | None:
    """The warning for ai-harness metadata ``key`` of ``label``, or None for other keys."""
    if key not in ORIGIN_METADATA:
        return None
    return (
        f'{label} has ai-harness metadata "{key}", which harness does not read; rename it '
        f'"x-{key}" or move it under extensions: (or delete it)'
    )
