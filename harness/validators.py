"""JSON Schema checks of a call's arguments and of a tool's result (docs/spec.md §9 step 2).

A compiled (Rust) validator accepts valid values (~0.3 µs); pure ``jsonschema`` runs
only to explain a failure, with JSON paths and JSON wording (``arguments.json_message``).
Both run schema patterns with a linear-time engine (``harness.artifacts.patterns``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.arguments import ArgumentShape, json_message, required_name, shape_for
from harness.artifacts import patterns
from harness.artifacts.problems import json_path

TOO_DEEP = (
    "$: the value nests too deeply to be checked against the schema; send "
    "flatter lists and objects (a few hundred levels at most)"
)


class ArgValidator:
    """Fast accept with a compiled validator; jsonschema only to explain failures.

    The Rust validator is compiled on first use, not when the plan is made: a project
    of thousands of tools loads without compiling schemas nobody calls.
    """

    __slots__ = ("schema", "_fast", "_slow", "shape")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self._fast: Any = None
        self._slow: Any = None
        # Defaults and declared names of the schema (harness/arguments.py), built once.
        self.shape: ArgumentShape | None = shape_for(schema)

    def problems(self, instance: Any) -> list[str]:
        if self._fast is None:
            refused = self._compile()
            if refused is not None:
                return [refused]
        if self._fast.is_valid(instance):
            return []
        try:
            found = self._explain(instance)
        except RecursionError:
            return [TOO_DEEP]
        except Exception:  # noqa: BLE001 - e.g. an ECMA-only pattern RE2 spells otherwise
            try:
                found = [
                    (json_path(e.instance_path), e.message)
                    for e in self._fast.iter_errors(instance)
                ]
            except ValueError:  # "Recursion limit reached" on deep nesting
                return [TOO_DEEP]
        return [f"{p}: {m}" for p, m in sorted(found)] or ["arguments do not match the schema"]

    def _compile(self) -> str | None:
        """Compile the accept path; why the schema cannot be used, or None. A pattern no
        linear-time engine runs (lookarounds, backreferences) is named (validate reports
        it up front, with the file and line)."""
        refused = patterns.schema_problem(self.schema)
        if refused is not None:
            return f"$: the tool's schema cannot be compiled: {refused}"
        try:
            # Never fetch a remote $ref at call time (validate refuses them too).
            self._fast = patterns.rs_validator(dict(self.schema), retriever=_no_fetch)
        except Exception as exc:  # noqa: BLE001 - a broken schema is a result, not a crash
            return f"$: the tool's schema cannot be compiled ({exc}); run harness validate"
        return None

    def _explain(self, instance: Any) -> list[tuple[str, str]]:
        """Every problem with its JSON path, in jsonschema's wording (docs/spec.md §9)."""
        if self._slow is None:  # built on the first failure only: jsonschema is slow to import
            self._slow = patterns.python_validator(self.schema, formats=True)
        found = []
        for err in self._slow.iter_errors(instance):
            path = json_path(err.absolute_path)
            if err.validator == "required":
                missing = required_name(err)
                if missing:
                    path = f"{path}.{missing}"
            found.append((path, json_message(err)))
        return found


def _no_fetch(uri: str) -> Any:
    raise ValueError(f"remote $ref {uri!r} is not fetched; harness never fetches schemas")
