"""What a call's arguments become before ``tool.pre``: defaults, unknown names, wording.

- Declared ``default:`` values are filled in (top level, and inside object arguments
  whose schema lists ``properties`` with defaults), so hooks and the tool see them.
- Names the schema does not declare are *unknown*: by default the call runs and the
  result carries a note with a did-you-mean (``ToolResult.notes``, appended to the
  text); ``arguments: strict`` (harness.md or the tool) refuses them.
- Validation messages use JSON wording (``null``, ``"5"``, ``true``), not Python's.

One :class:`ArgumentShape` per tool schema, built once; a schema with no defaults and
no closed set of names costs nothing per call (the pipeline skips it).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from harness.artifacts.problems import as_json, suggest

MODES = ("note", "strict")


def _scalar(value: Any) -> bool:
    return value is None or type(value) in (str, int, float, bool)


class ArgumentShape:
    """Defaults to fill and the declared names of one input schema."""

    __slots__ = ("defaults", "known", "nested", "fills")
    defaults: tuple[tuple[str, Any], ...]
    fills: bool
    known: frozenset[str] | None
    nested: tuple[tuple[str, ArgumentShape], ...]

    def __init__(self, schema: Mapping[str, Any]) -> None:
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        # Unknown names only make sense for a closed set: additionalProperties (any
        # value but false) or patternProperties declare that other names are welcome.
        open_ended = (
            schema.get("additionalProperties", None) not in (None, False)
            or "patternProperties" in schema
        )
        self.known = None if open_ended or not props else frozenset(props)
        self.defaults = tuple(
            (name, sub["default"])
            for name, sub in props.items()
            if isinstance(sub, Mapping) and "default" in sub
        )
        # Object arguments whose own properties declare defaults (one level per shape).
        nested: list[tuple[str, ArgumentShape]] = []
        for name, sub in props.items():
            if isinstance(sub, Mapping) and isinstance(sub.get("properties"), Mapping):
                inner = ArgumentShape(sub)
                if inner.defaults or inner.nested:
                    nested.append((name, inner))
        self.nested = tuple(nested)
        self.fills = bool(self.defaults or self.nested)

    @property
    def active(self) -> bool:
        return bool(self.defaults or self.nested or self.known is not None)

    def fill(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        """``args`` with declared defaults filled in (a new dict only when one is missing)."""
        out: dict[str, Any] | None = None
        for name, default in self.defaults:
            if name not in args:
                if out is None:
                    out = dict(args)
                out[name] = default if _scalar(default) else copy.deepcopy(default)
        for name, inner in self.nested:
            value = (out if out is not None else args).get(name)
            if isinstance(value, Mapping):
                filled = inner.fill(value)
                if filled is not value:
                    if out is None:
                        out = dict(args)
                    out[name] = filled
        return args if out is None else out

    def unknown(self, args: Mapping[str, Any]) -> list[str]:
        known = self.known
        if known is None or known.issuperset(args):
            return []
        return [name for name in args if name not in known]

    def note(self, tool: str, unknown: list[str]) -> str:
        """One line naming the unknown names and what was probably meant."""
        parts = []
        for name in unknown:
            parts.append(f'"{name}"{suggest(name, sorted(self.known or ()))}')
        known = ", ".join(f'"{k}"' for k in sorted(self.known or ())) or "none"
        word = "argument" if len(unknown) == 1 else "arguments"
        return f'unknown {word} {", ".join(parts)} for tool "{tool}"; its parameters are {known}'


def shape_for(schema: Mapping[str, Any]) -> ArgumentShape | None:
    """The shape of ``schema``, or None when it has nothing to do per call."""
    shape = ArgumentShape(schema)
    return shape if shape.active else None


# -- JSON wording of jsonschema's messages ---------------------------------------------


def _listing(values: Any) -> str:
    if isinstance(values, (list, tuple)):
        return ", ".join(as_json(v) for v in values)
    return as_json(values)


_BOUNDS = {
    "minimum": "is less than the minimum of",
    "maximum": "is greater than the maximum of",
    "exclusiveMinimum": "is less than or equal to the minimum of",
    "exclusiveMaximum": "is greater than or equal to the maximum of",
    "multipleOf": "is not a multiple of",
}


def json_message(err: Any) -> str:
    """jsonschema's message for ``err`` with JSON values instead of Python reprs."""
    kind, expected, instance = err.validator, err.validator_value, err.instance
    message: str = err.message
    if kind == "type":
        return f"{as_json(instance)} is not of type {_listing(expected)}"
    if kind == "required":
        missing = required_name(err)
        return f"{as_json(missing)} is a required property" if missing else message
    if kind == "enum":
        return f"{as_json(instance)} is not one of [{_listing(expected)}]"
    if kind == "const":
        return f"{as_json(expected)} was expected"
    if kind in _BOUNDS:
        return f"{as_json(instance)} {_BOUNDS[kind]} {as_json(expected)}"
    if kind == "pattern":
        return f"{as_json(instance)} does not match {as_json(expected)}"
    if kind == "format":
        return f"{as_json(instance)} is not a {as_json(expected)}"
    if kind in ("minLength", "minItems", "minProperties"):
        return (
            f"{as_json(instance)} is too short"
            if kind != "minProperties"
            else f"{as_json(instance)} does not have enough properties"
        )
    if kind in ("maxLength", "maxItems", "maxProperties"):
        return (
            f"{as_json(instance)} is too long"
            if kind != "maxProperties"
            else f"{as_json(instance)} has too many properties"
        )
    if kind == "additionalProperties" and isinstance(instance, Mapping):
        props = err.schema.get("properties", {}) if isinstance(err.schema, Mapping) else {}
        extra = [k for k in instance if k not in props]
        verb = "was" if len(extra) == 1 else "were"
        return f"Additional properties are not allowed ({_listing(extra)} {verb} unexpected)"
    prefix = repr(instance)
    if message.startswith(prefix):
        return as_json(instance) + message[len(prefix) :]
    return message


def required_name(err: Any) -> str | None:
    """The missing property of a ``required`` error."""
    instance, expected = err.instance, err.validator_value
    if isinstance(instance, Mapping) and isinstance(expected, (list, tuple)):
        for name in expected:
            if name not in instance and (repr(name) in err.message):
                return str(name)
    return None
