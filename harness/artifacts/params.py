"""Tool ``parameters`` -> JSON Schema (docs/spec.md §3).

``{"type": "object", "properties": {...in YAML order...}, "required": [...in YAML order...]}``.
``required`` is lifted out of each parameter, an empty ``description`` is dropped and
every other JSON-Schema keyword is passed through unchanged. Validity of the result
against the Draft 2020-12 metaschema is checked by :func:`schema_errors` with a
validator compiled once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any

from harness.artifacts.model import Parameter
from harness.artifacts.patterns import PatternError, pattern_problem, rs_validator, schema_problem
from harness.artifacts.problems import Problem, a_type, as_json, json_path, suggest
from harness.artifacts.required import lift as lift_required

TYPES = ("string", "number", "integer", "boolean", "object", "array")
METASCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"

# Draft 2020-12 keywords (all vocabularies) plus the common annotation keywords.
KEYWORDS = frozenset(
    (
        "$id",
        "$schema",
        "$ref",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "$vocabulary",
        "$comment",
        "$defs",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "prefixItems",
        "items",
        "contains",
        "properties",
        "patternProperties",
        "additionalProperties",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "type",
        "const",
        "enum",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
        "title",
        "description",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "examples",
        "format",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "nullable",
    )
)

Pos = Callable[[tuple[Any, ...]], tuple[int, int]]


# Type names other formats use -> the JSON Schema name they load as (with a warning).
TYPE_ALIASES = {"int": "integer", "bool": "boolean"}


def build(  # noqa: C901
    raw: Any, *, owner: str, path: str, pos: Pos, base: tuple[Any, ...] = ("parameters",)
) -> tuple[tuple[Parameter, ...], dict[str, Any], list[Problem]]:
    """Return ``(parameters, input_schema, problems)`` for one tool's ``parameters``.

    ``owner`` is the quoted subject of messages (``tool "x"``); ``pos(path)`` gives
    the (line, column) of a key path in the file.
    """
    problems: list[Problem] = []

    def err(at: tuple[Any, ...], code: str, msg: str, severity: str = "error") -> None:
        line, column = pos(at)
        problems.append(
            Problem(path=path, line=line, column=column, code=code, message=msg, severity=severity)  # type: ignore[arg-type]
        )

    params: list[Parameter] = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    if raw is None:
        return (), {"type": "object", "properties": properties, "required": required}, problems
    if not isinstance(raw, dict):
        err(
            base,
            "parameters-invalid",
            f"{owner} parameters must be a mapping of parameter "
            f"name to {{type: ..., description: ...}}, got {a_type(raw)}",
        )
        return (), {"type": "object", "properties": properties, "required": required}, problems
    for name, spec in raw.items():
        at = (*base, name)
        if not isinstance(name, str) or not name:
            err(
                at,
                "parameter-invalid",
                f"{owner} parameter name {as_json(name)} must be a "
                "non-empty string; quote it in the YAML",
            )
            continue
        label = f'{owner} parameter "{name}"'
        if not isinstance(spec, dict):
            hint = f" (write `{name}: {{type: {spec}}}`)" if spec in TYPES else ""
            err(
                at,
                "parameter-invalid",
                f"{label} must be a mapping with at least a type, got {a_type(spec)}{hint}",
            )
            continue
        ptype = spec.get("type")
        ok = True
        if isinstance(ptype, str) and ptype in TYPE_ALIASES:
            # ai-harness documents `int` / `bool`; load them as the JSON Schema names.
            wanted = TYPE_ALIASES[ptype]
            err(
                (*at, "type"),
                "parameter-type-alias",
                f'{label} type "{ptype}" is loaded as '
                f'"{wanted}"; write `type: {wanted}` (JSON Schema names the type so)',
                "warning",
            )
            ptype = wanted
            spec = {**spec, "type": wanted}
        if ptype is None:
            err(
                at,
                "parameter-type-missing",
                f"{label} has no type; add `type:` with one of {', '.join(TYPES)}",
            )
            ok = False
        elif not isinstance(ptype, str) or ptype not in TYPES:
            err(
                (*at, "type"),
                "parameter-type-invalid",
                f"{label} type must be one of "
                f"{', '.join(TYPES)}; got {as_json(ptype)}{suggest(str(ptype), TYPES)}",
            )
            ok = False
        req = spec.get("required", False)
        if isinstance(req, list) and all(isinstance(n, str) for n in req):
            req = False  # the object's own required keys: stays in its schema
        elif not isinstance(req, bool):
            err(
                (*at, "required"),
                "parameter-required-invalid",
                f"{label} required must be true or false, or a list of its property "
                f"names when it is an object; got {as_json(req)}",
            )
            req = False
            spec = {k: v for k, v in spec.items() if k != "required"}
        desc = spec.get("description", "")
        if desc is None:
            desc = ""
        if not isinstance(desc, str):
            err(
                (*at, "description"),
                "parameter-description-invalid",
                f"{label} description must be a string, got {a_type(desc)}",
            )
            desc = ""
        for key_path, message, prose in unknown_keywords(spec):
            if key_path == ("required",):
                continue  # our own keyword, lifted into the object's required list
            where = "" if len(key_path) == 1 else f" at {json_path(key_path[:-1])}"
            err(
                (*at, *key_path),
                "schema-flow-comma" if prose else "parameter-unknown-key",
                f"{label}{where}: {message}" if prose else f"{label}{where} has {message}",
                "warning",
            )
        own = {k: v for k, v in spec.items() if not (k == "required" and isinstance(v, bool))}
        schema, findings = lift_required(own, label)
        for key_path, code, message in findings:
            err((*at, *key_path), code, message)
        if not desc:
            schema.pop("description", None)
        why = default_problem(schema) if ok else None
        if why is not None:
            err(
                (*at, "default"),
                "parameter-default-invalid",
                f"{label} default {as_json(spec['default'])} does not match its own schema: "
                f"{why}; every call that leaves it out would fail; fix the default or the schema",
            )
        properties[name] = schema
        if req:
            required.append(name)
        if ok:
            params.append(
                Parameter(name=name, type=str(ptype), description=desc, required=req, schema=schema)
            )
    schema_out = {"type": "object", "properties": properties, "required": required}
    return tuple(params), schema_out, problems


def default_problem(schema: Mapping[str, Any]) -> str | None:
    """Why a parameter's ``default`` breaks the rest of its own schema, or None (no
    default, a match, or a schema that does not compile: reported on its own)."""
    if "default" not in schema:
        return None
    rest = {k: v for k, v in schema.items() if k != "default"}
    try:
        validator = rs_validator(rest, retriever=_refuse_remote)
        first = next(iter(validator.iter_errors(schema["default"])), None)
    except Exception:  # noqa: BLE001 - a schema that does not compile has its own problem
        return None
    return None if first is None else str(first.message)


def looks_like_prose(key: Any, value: Any) -> bool:
    """A key that is a piece of a sentence with no value: a comma inside ``{...}``."""
    return (
        isinstance(key, str)
        and value is None
        and (" " in key.strip() or key.rstrip().endswith("."))
    )


def flow_comma_hint(key: str, node: Mapping[str, Any]) -> str:
    """Why ``key`` is a key: YAML's flow mapping ends a plain value at a comma."""
    cut = [k for k, v in node.items() if isinstance(k, str) and isinstance(v, str)]
    was = f' (so "{cut[-1]}" is only "{node[cut[-1]]}")' if cut else ""
    return (
        f'"{key}" looks like a piece of a sentence, not a keyword: inside a YAML flow '
        "mapping {...} an unquoted comma ends the value and the rest of the text "
        f'becomes keys with no value{was}; quote the text ("...") or write the '
        "mapping in block style, one key per line"
    )


def unknown_keyword_message(key: str, node: Mapping[str, Any]) -> str:
    """The explanation of one key that is not a JSON Schema keyword."""
    if looks_like_prose(key, node.get(key)):
        return flow_comma_hint(key, node)
    return (
        f'unknown key "{key}"{suggest(key, KEYWORDS)}; it is passed through to the '
        "JSON Schema but no validator uses it"
    )


def unknown_keywords(
    schema: Any, *, skip_root: bool = False
) -> Iterator[tuple[tuple[Any, ...], str, bool]]:
    """``(key path, message, is_prose)`` for every key of every subschema that is not a
    JSON Schema keyword (``properties`` names are names, not keywords)."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(schema, ())]
    while stack:
        node, path = stack.pop()
        if not isinstance(node, Mapping):
            continue
        if path or not skip_root:
            for key in node:
                if isinstance(key, str) and key not in KEYWORDS:
                    yield (
                        (*path, key),
                        unknown_keyword_message(key, node),
                        looks_like_prose(key, node[key]),
                    )
        for key, value in reversed(list(node.items())):
            at = (*path, key)
            if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                stack.extend((sub, (*at, name)) for name, sub in reversed(list(value.items())))
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                stack.extend((sub, (*at, i)) for i, sub in reversed(list(enumerate(value))))
            elif key in _SCHEMA_ONE:
                stack.append((value, at))


@cache
def meta_validator() -> Any:
    """A Draft 2020-12 metaschema validator, compiled once per process."""
    return rs_validator({"$schema": METASCHEMA_URI, "$ref": METASCHEMA_URI})


def schema_errors(schema: Any) -> Iterator[tuple[tuple[Any, ...], str]]:
    """Yield ``(json path, message)`` for every reason ``schema`` is not valid 2020-12."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        yield (), f"a JSON Schema must be a mapping, got {a_type(schema)}"
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


# Keywords whose value is a map of name -> subschema, a list of subschemas, or one subschema.
_SCHEMA_MAPS = frozenset(("properties", "patternProperties", "$defs", "dependentSchemas"))
_SCHEMA_LISTS = frozenset(("allOf", "anyOf", "oneOf", "prefixItems"))
_SCHEMA_ONE = frozenset(
    (
        "items",
        "contains",
        "additionalProperties",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    )
)
CompileError = tuple[tuple[Any, ...], tuple[Any, ...], str]  # (JSON path, key path, message)


def _refuse_remote(uri: str) -> Any:
    raise LookupError(f"harness does not fetch schemas: {uri}")


def compile_error(schema: Mapping[str, Any]) -> BaseException | None:
    """Compile ``schema`` as a call will (never fetching anything); None when it compiles.

    jsonschema-rs checks the schema against its metaschema while compiling, so a schema
    that compiles needs no separate metaschema pass: this one call is the fast path.
    A pattern RE2 cannot run (``patterns.pattern_problem``) is a failure too.
    """
    try:
        rs_validator(dict(schema), retriever=_refuse_remote)
    except Exception as exc:  # noqa: BLE001 - any refusal is a finding
        return exc
    refused = schema_problem(schema)
    return None if refused is None else PatternError(refused)


def compile_errors(
    schema: Mapping[str, Any], root: str, failure: BaseException
) -> Iterator[CompileError]:
    """Explain a compile ``failure`` of a schema that passed :func:`schema_errors`.

    A walk names every bad ``pattern``, ``patternProperties`` key and ``$ref`` with its
    place; the compiler's own message is the fallback. ``root`` says what ``#`` is, for
    dangling-pointer messages.
    """
    found = list(_walk(schema, root))
    if found:
        yield from found
        return
    path = tuple(getattr(failure, "instance_path", ()) or ())
    message = str(getattr(failure, "message", failure)).strip().splitlines()[0]
    if "retrieving it failed" in message:
        message += "; harness does not fetch schemas (no network): inline the schema instead"
    yield path, path, f"cannot be compiled: {message}"


def _walk(schema: Mapping[str, Any], root: str) -> Iterator[CompileError]:  # noqa: C901
    stack: list[tuple[Any, tuple[Any, ...]]] = [(schema, ())]
    while stack:
        node, path = stack.pop()
        if not isinstance(node, Mapping):
            continue
        for key, value in node.items():
            at = (*path, key)
            if key == "pattern" and isinstance(value, str):
                bad = regex_error(value)
                if bad:
                    yield at, at, bad
            elif key in ("$ref", "$dynamicRef") and isinstance(value, str):
                bad = _ref_error(value, schema, root)
                if bad:
                    yield at, at, bad
            if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                for name, sub in value.items():
                    if key == "patternProperties" and isinstance(name, str):
                        bad = regex_error(name)
                        if bad:
                            yield at, (*at, name), bad
                    stack.append((sub, (*at, name)))
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                stack.extend((sub, (*at, i)) for i, sub in enumerate(value))
            elif key in _SCHEMA_ONE:
                stack.append((value, at))


@cache
def regex_error(pattern: str) -> str | None:
    """Why ``pattern`` cannot be used, or None: not a regular expression at all (ECMA-262
    syntax), or one the linear-time engines cannot run (``patterns.pattern_problem``)."""
    import jsonschema_rs

    try:
        # Only compiled, never run: tells "not a regular expression" from "not linear".
        jsonschema_rs.validator_for(
            {"pattern": pattern}, pattern_options=jsonschema_rs.FancyRegexOptions()
        )
    except Exception:  # noqa: BLE001 - any refusal is the answer
        return (
            f'"{pattern}" is not a valid regular expression; patterns use ECMA-262 '
            "(JavaScript) syntax: escape a literal ( ) [ ] { } with a backslash"
        )
    return pattern_problem(pattern)


@cache
def _bundled(uri: str) -> bool:
    """True for the URIs jsonschema-rs resolves offline (the Draft metaschemas)."""
    try:
        rs_validator({"$ref": uri}, retriever=_refuse_remote)
    except Exception:  # noqa: BLE001
        return False
    return True


def _ref_error(ref: str, schema: Mapping[str, Any], root: str) -> str | None:
    if ref.startswith("#"):
        if ref == "#" or not ref.startswith("#/"):
            return None  # the whole schema, or an $anchor: left to the compiler
        node: Any = schema
        from urllib.parse import unquote

        for part in ref[2:].split("/"):
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return (
                    f'"{ref}" points to nothing: "#" is {root}; point at something in it '
                    "or inline the schema"
                )
        return None
    if _bundled(ref):
        return None
    return (
        f'"{ref}" is a remote reference; harness does not fetch schemas (no network '
        "at validate or call time): inline the schema instead"
    )


# -- the parameter entry of the published editor schemas (harness/schemas/*.json) ----------

_VOCAB = "https://json-schema.org/draft/2020-12/meta/"
_VOCABULARIES = {
    "core": (
        "$id",
        "$schema",
        "$ref",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "$vocabulary",
        "$comment",
    ),
    "validation": (
        "type",
        "const",
        "enum",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
    ),
    "meta-data": (
        "title",
        "description",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "examples",
    ),
    "format-annotation": ("format",),
    "content": ("contentEncoding", "contentMediaType"),
}
# What the keywords of our own (required, type, description) mean for a parameter.
OWN_KEYWORDS: dict[str, dict[str, Any]] = {
    "type": {"enum": list(TYPES), "description": "JSON type of the argument."},
    "description": {
        "type": ["string", "null"],
        "description": "Shown to the model; omitted when empty.",
    },
    "required": {
        "type": ["boolean", "array"],
        "items": {"type": "string"},
        "uniqueItems": True,
        "default": False,
        "description": "true/false: lifted into the enclosing object's `required` list "
        "(the shorthand); a list: this object's own required keys (JSON Schema).",
    },
}


def keyword_schema(keyword: str) -> Any:
    """JSON Schema of one pass-through keyword's value, as the 2020-12 metaschema has it,
    except that a subschema is a :func:`property_schema` (``required: true`` there too)."""
    meta = {"anyOf": [{"type": "boolean"}, {"$ref": "#/$defs/property"}]}
    if keyword in _SCHEMA_ONE:
        return meta
    if keyword in _SCHEMA_MAPS:
        out: dict[str, Any] = {"type": "object", "additionalProperties": meta}
        if keyword == "patternProperties":
            out["propertyNames"] = {"format": "regex"}
        return out
    if keyword in _SCHEMA_LISTS:
        return {"type": "array", "minItems": 1, "items": meta}
    for vocabulary, keywords in _VOCABULARIES.items():
        if keyword in keywords:
            return {"$ref": f"{_VOCAB}{vocabulary}#/properties/{keyword}"}
    return {"description": f"{keyword}: not a Draft 2020-12 keyword; passed through unchecked."}


def parameter_schema() -> dict[str, Any]:
    """One entry of ``parameters``: the rules :func:`build` applies, as a JSON Schema."""
    return {
        "type": "object",
        "description": "One argument: a JSON Schema plus `required` (bool or list) and a "
        "mandatory `type`.",
        "required": ["type"],
        "properties": _entry_keywords(),
        "additionalProperties": False,
    }


def property_schema() -> dict[str, Any]:
    """An entry of a parameter's ``properties`` (any depth): a parameter without the
    mandatory ``type``, where ``required: true`` is the shorthand too."""
    return {
        "type": "object",
        "description": "One property of an object parameter: a JSON Schema plus "
        "`required` (bool or list).",
        "properties": _entry_keywords(nested=True),
        "additionalProperties": False,
    }


def _entry_keywords(nested: bool = False) -> dict[str, Any]:
    """A parameter's keywords (``type``, ``description`` of our own), or a nested
    property's (JSON Schema's own ``type`` and ``description``); ``required`` and
    ``properties`` take the shorthand at any depth."""
    own = {"required": OWN_KEYWORDS["required"]} if nested else dict(OWN_KEYWORDS)
    properties: dict[str, Any] = dict(own)
    for keyword in sorted(KEYWORDS - set(own)):
        properties[keyword] = keyword_schema(keyword)
    return properties
