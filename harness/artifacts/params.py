"""Tool ``parameters`` -> JSON Schema (SPEC §3).

``{"type": "object", "properties": {...in YAML order...}, "required": [...in YAML order...]}``.
``required`` is lifted out of each parameter, an empty ``description`` is dropped and
every other JSON-Schema keyword is passed through unchanged. Validity of the result
against the Draft 2020-12 metaschema is checked by :func:`schema_errors` with a
validator compiled once.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any

from harness.artifacts.model import Parameter, Problem

TYPES = ("string", "number", "integer", "boolean", "object", "array")
METASCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"

# Draft 2020-12 keywords (all vocabularies) plus the common annotation keywords.
KEYWORDS = frozenset((
    "$id", "$schema", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary",
    "$comment", "$defs", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
    "dependentSchemas", "prefixItems", "items", "contains", "properties",
    "patternProperties", "additionalProperties", "propertyNames", "unevaluatedItems",
    "unevaluatedProperties", "type", "const", "enum", "multipleOf", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties",
    "minProperties", "required", "dependentRequired", "title", "description", "default",
    "deprecated", "readOnly", "writeOnly", "examples", "format", "contentEncoding",
    "contentMediaType", "contentSchema", "nullable",
))

Pos = Callable[[tuple[Any, ...]], tuple[int, int]]


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


def suggest(word: str, choices: Any) -> str:
    """`` (did you mean "x"?)`` or ``""``."""
    match = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{match[0]}"?)' if match else ""


def build(
    raw: Any, *, owner: str, path: str, pos: Pos, base: tuple[Any, ...] = ("parameters",)
) -> tuple[tuple[Parameter, ...], dict[str, Any], list[Problem]]:
    """Return ``(parameters, input_schema, problems)`` for one tool's ``parameters``.

    ``owner`` is the quoted subject of messages (``tool "x"``); ``pos(path)`` gives
    the (line, column) of a key path in the file.
    """
    problems: list[Problem] = []

    def err(at: tuple[Any, ...], code: str, msg: str, severity: str = "error") -> None:
        line, column = pos(at)
        problems.append(Problem(path=path, line=line, column=column, code=code, message=msg,
                                severity=severity))  # type: ignore[arg-type]

    params: list[Parameter] = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    if raw is None:
        return (), {"type": "object", "properties": properties, "required": required}, problems
    if not isinstance(raw, dict):
        err(base, "parameters-invalid", f"{owner} parameters must be a mapping of parameter "
            f"name to {{type: ..., description: ...}}, got a {type_name(raw)}")
        return (), {"type": "object", "properties": properties, "required": required}, problems
    for name, spec in raw.items():
        at = (*base, name)
        if not isinstance(name, str) or not name:
            err(at, "parameter-invalid", f"{owner} parameter name {name!r} must be a non-empty "
                "string; quote it in the YAML")
            continue
        label = f'{owner} parameter "{name}"'
        if not isinstance(spec, dict):
            hint = f" (write `{name}: {{type: {spec}}}`)" if spec in TYPES else ""
            err(at, "parameter-invalid", f"{label} must be a mapping with at least a type, got a "
                f"{type_name(spec)}{hint}")
            continue
        ptype = spec.get("type")
        ok = True
        if ptype is None:
            err(at, "parameter-type-missing", f"{label} has no type; add `type:` with one of "
                f"{', '.join(TYPES)}")
            ok = False
        elif not isinstance(ptype, str) or ptype not in TYPES:
            err((*at, "type"), "parameter-type-invalid", f"{label} type must be one of "
                f"{', '.join(TYPES)}; got {ptype!r}{suggest(str(ptype), TYPES)}")
            ok = False
        req = spec.get("required", False)
        if not isinstance(req, bool):
            err((*at, "required"), "parameter-required-invalid", f"{label} required must be true "
                f"or false, got {req!r}")
            req = False
        desc = spec.get("description", "")
        if desc is None:
            desc = ""
        if not isinstance(desc, str):
            err((*at, "description"), "parameter-description-invalid",
                f"{label} description must be a string, got a {type_name(desc)}")
            desc = ""
        for key in spec:
            if isinstance(key, str) and key not in KEYWORDS:
                err((*at, key), "parameter-unknown-key",
                    f'{label} has unknown key "{key}"{suggest(key, KEYWORDS)}; it is passed '
                    "through to the JSON Schema but no validator uses it", "warning")
        schema = {k: v for k, v in spec.items() if k != "required"}
        if not desc:
            schema.pop("description", None)
        properties[name] = schema
        if req:
            required.append(name)
        if ok:
            params.append(Parameter(name=name, type=str(ptype), description=desc, required=req,
                                    schema=schema))
    schema_out = {"type": "object", "properties": properties, "required": required}
    return tuple(params), schema_out, problems


@cache
def meta_validator() -> Any:
    """A Draft 2020-12 metaschema validator, compiled once per process."""
    import jsonschema_rs

    return jsonschema_rs.validator_for({"$schema": METASCHEMA_URI, "$ref": METASCHEMA_URI})


def schema_errors(schema: Any) -> Iterator[tuple[tuple[Any, ...], str]]:
    """Yield ``(json path, message)`` for every reason ``schema`` is not valid 2020-12."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        yield (), f"a JSON Schema must be a mapping, got a {type_name(schema)}"
        return
    validator = meta_validator()
    try:
        if validator.is_valid(schema):
            return
        errors = list(validator.iter_errors(schema))
    except (ValueError, TypeError, OverflowError) as exc:
        yield (), f"cannot be checked as JSON: {exc}"
        return
    for error in errors:
        yield tuple(error.instance_path), error.message
