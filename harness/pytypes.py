"""Python types as JSON Schema, and JSON values back into those types (``@h.tool``).

- :func:`schema_of`: a type hint -> ``(JSON Schema, nullable)``. Scalars, ``list`` /
  ``tuple`` / ``set``, ``dict[str, T]``, ``Literal``, ``Enum``, unions and ``Optional``,
  ``Annotated[T, "description"]`` (or a metadata object with a ``description``, such as
  pydantic's ``Field``), dataclasses and ``TypedDict`` (built here: the same schema with
  or without pydantic), and pydantic models (the model's own ``model_json_schema()``;
  its ``$defs`` move to the root of the schema being built, :class:`Defs`).
- :func:`converter`: a function turning a checked JSON value into the hinted type
  (``None`` when the JSON value already is one), built once per parameter.
- :func:`to_json`: a returned value (dataclass, model, enum, tuple, set) as plain JSON.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.docstrings import parse as parse_doc
from harness.errors import UsageError

Convert = Callable[[Any], Any]
_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}
_WRAPPERS = tuple(
    w for w in (getattr(typing, n, None) for n in ("Required", "NotRequired", "ReadOnly")) if w
)
SUPPORTED = (
    "str, int, float, bool, list[...], tuple[...], set[...], dict[str, ...], Literal[...], "
    "Optional[...] / X | None, an Enum, a dataclass, a TypedDict or a pydantic model"
)


class Defs:
    """The ``$defs`` of one root schema (pydantic models put theirs here)."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def add(self, schema: dict[str, Any]) -> dict[str, Any]:
        """``schema`` without its ``$defs``, which join this root's (a name taken by
        another schema is renamed, and the references to it follow)."""
        own = schema.pop("$defs", None)
        if not isinstance(own, dict):
            return schema
        renames: dict[str, str] = {}
        for name, sub in own.items():
            new, n = name, 2
            while new in self.defs and self.defs[new] != sub:
                new, n = f"{name}_{n}", n + 1
            if new != name:
                renames[f"#/$defs/{name}"] = f"#/$defs/{new}"
        for name, sub in own.items():
            target = renames.get(f"#/$defs/{name}", f"#/$defs/{name}")[len("#/$defs/") :]
            self.defs[target] = _renamed(sub, renames) if renames else sub
        return _renamed(schema, renames) if renames else schema


def _renamed(node: Any, renames: dict[str, str]) -> Any:
    if isinstance(node, dict):
        return {
            k: renames.get(v, v) if k == "$ref" and isinstance(v, str) else _renamed(v, renames)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_renamed(v, renames) for v in node]
    return node


def pydantic_model(hint: Any) -> bool:
    """Whether ``hint`` is a pydantic model class (pydantic is never imported here: a
    model exists only where its module already imported pydantic)."""
    module = sys.modules.get("pydantic")
    return module is not None and isinstance(hint, type) and issubclass(hint, module.BaseModel)


def typed_dict(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__required_keys__")


def _strip(hint: Any) -> tuple[Any, str | None]:
    """``hint`` without ``Annotated`` / ``Required`` / ``NotRequired``, and the
    description ``Annotated`` gave (a string, or an object's ``description``)."""
    description = None
    while True:
        origin = typing.get_origin(hint)
        if origin is typing.Annotated:
            for meta in hint.__metadata__:
                text = meta if isinstance(meta, str) else getattr(meta, "description", None)
                if isinstance(text, str) and text and description is None:
                    description = text
            hint = typing.get_args(hint)[0]
        elif origin is not None and origin in _WRAPPERS:
            hint = typing.get_args(hint)[0]
        else:
            return hint, description


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also accepts ``null``."""
    t = schema.get("type")
    if isinstance(t, str) and "const" not in schema:
        out = {**schema, "type": [t, "null"]}
        if isinstance(out.get("enum"), list):
            out["enum"] = [*out["enum"], None]
        return out
    if t is None and "enum" in schema:
        return {**schema, "enum": [*schema["enum"], None]}
    return {"anyOf": [schema, {"type": "null"}]}


def schema_of(
    hint: Any, defs: Defs, *, mode: str = "validation", seen: tuple[type, ...] = ()
) -> tuple[dict[str, Any], bool]:
    """JSON Schema of a type hint, and whether ``None`` is allowed; ``mode`` is
    pydantic's (``validation`` for arguments, ``serialization`` for results)."""
    hint, description = _strip(hint)
    schema, is_nullable = _schema(hint, defs, mode, seen)
    if description:
        schema = {**schema, "description": description}
    return schema, is_nullable


def _schema(  # noqa: C901 - one branch per kind of type hint
    hint: Any, defs: Defs, mode: str, seen: tuple[type, ...]
) -> tuple[dict[str, Any], bool]:
    origin = typing.get_origin(hint)
    if hint is Any or hint is inspect.Parameter.empty or hint is object:
        return {}, False
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        is_nullable = len(members) < len(typing.get_args(hint))
        if len(members) == 1:
            return schema_of(members[0], defs, mode=mode, seen=seen)[0], is_nullable
        return {"anyOf": [schema_of(m, defs, mode=mode, seen=seen)[0] for m in members]}, (
            is_nullable
        )
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(hint))}, False
    if origin in (list, tuple, set, frozenset, Sequence) or hint in (tuple, set, frozenset):
        return _array(hint, defs, mode, seen), False
    if origin in (dict, Mapping):
        args = typing.get_args(hint)
        out: dict[str, Any] = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            out["additionalProperties"] = schema_of(args[1], defs, mode=mode, seen=seen)[0]
        return out, False
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = [m.value for m in hint]
        kinds = {_SCALARS.get(type(v)) for v in values}
        out = {"enum": values}
        if len(kinds) == 1 and None not in kinds:
            out = {"type": kinds.pop(), **out}
        return out, False
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}, False
    if pydantic_model(hint):
        return defs.add(hint.model_json_schema(mode=mode)), False
    if dataclasses.is_dataclass(hint) and isinstance(hint, type) or typed_dict(hint):
        if hint in seen:
            raise UsageError(
                f"cannot turn the recursive type {hint.__qualname__} into a JSON Schema; "
                "make it a pydantic model (its schema uses $defs) or break the cycle"
            )
        return _record(hint, defs, mode, (*seen, hint)), False
    raise UsageError(f"cannot turn type hint {hint!r} into a JSON Schema; use {SUPPORTED}")


def _array(hint: Any, defs: Defs, mode: str, seen: tuple[type, ...]) -> dict[str, Any]:
    args = typing.get_args(hint)
    out: dict[str, Any] = {"type": "array"}
    origin = typing.get_origin(hint) or hint
    if origin is tuple and args and (len(args) != 2 or args[1] is not Ellipsis):
        if args == ((),):  # tuple[()]
            return {**out, "maxItems": 0}
        items = [schema_of(a, defs, mode=mode, seen=seen)[0] for a in args]
        return {**out, "prefixItems": items, "minItems": len(items), "maxItems": len(items)}
    if args:
        out["items"] = schema_of(args[0], defs, mode=mode, seen=seen)[0]
    if origin in (set, frozenset):
        out["uniqueItems"] = True
    return out


def record_fields(cls: type) -> list[tuple[str, Any, bool, Any]]:
    """``(name, hint, required, default or MISSING)`` of a dataclass's init fields or a
    TypedDict's keys."""
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except NameError as exc:
        raise UsageError(
            f"cannot resolve the type hints of {cls.__qualname__} ({exc}); define the "
            "types it names at module level"
        ) from exc
    if typed_dict(cls):
        required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        # Under `from __future__ import annotations` the class cannot see NotRequired in
        # its string annotations: the resolved hints say it.
        return [(n, h, _required(h, n in required), dataclasses.MISSING) for n, h in hints.items()]
    out = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        missing = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append((f.name, hints.get(f.name, Any), missing, f.default))
    return out


def _required(hint: Any, default: bool) -> bool:
    while typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    origin = typing.get_origin(hint)
    if origin is typing.NotRequired:
        return False
    return True if origin is typing.Required else default


def _record(cls: type, defs: Defs, mode: str, seen: tuple[type, ...]) -> dict[str, Any]:
    """A dataclass or TypedDict as an object schema (field descriptions from
    ``Annotated``, ``field(metadata={"description": ...})`` or the class docstring)."""
    summary, docs = parse_doc(inspect.getdoc(cls) if cls.__doc__ else None)
    metadata: dict[str, Mapping[Any, Any]] = (
        {f.name: f.metadata for f in dataclasses.fields(cls)}
        if dataclasses.is_dataclass(cls)
        else {}
    )
    props: dict[str, Any] = {}
    required: list[str] = []
    for name, hint, needed, default in record_fields(cls):
        schema, is_nullable = schema_of(hint, defs, mode=mode, seen=seen)
        if is_nullable:
            schema = nullable(schema)
        text = metadata.get(name, {}).get("description") or docs.get(name)
        if text and "description" not in schema:
            schema = {**schema, "description": text}
        if default is not dataclasses.MISSING and plain_json(value := to_json(default)):
            schema = {**schema, "default": value}
        props[name] = schema
        if needed:
            required.append(name)
    out: dict[str, Any] = {"type": "object", "title": cls.__name__}
    if summary and not summary.startswith(f"{cls.__name__}("):  # not the dataclass repr
        out["description"] = summary
    out["properties"] = props
    out["required"] = required
    if dataclasses.is_dataclass(cls):
        out["additionalProperties"] = False  # the constructor takes no other keys
    return out


def plain_json(value: Any) -> bool:
    """Whether ``value`` is plain JSON (a default worth recording)."""
    if value is None or type(value) in (str, int, float, bool):
        return True
    if type(value) in (list, tuple):
        return all(plain_json(v) for v in value)
    if type(value) is dict:
        return all(isinstance(k, str) and plain_json(v) for k, v in value.items())
    return False


# -- JSON -> the hinted type ------------------------------------------------------------


def converter(hint: Any) -> Convert | None:  # noqa: C901 - one branch per kind of type hint
    """A function from a (schema-checked) JSON value to ``hint``'s type, or None when
    the JSON value is already one."""
    hint, _ = _strip(hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = [c for m in typing.get_args(hint) if (c := converter(m)) is not None]
        return _first_of(members) if members else None
    if pydantic_model(hint):
        return hint.model_validate
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint
    if dataclasses.is_dataclass(hint) and isinstance(hint, type) or typed_dict(hint):
        return _record_converter(hint)
    if origin in (list, tuple, set, frozenset, Sequence) or hint in (tuple, set, frozenset):
        return _array_converter(hint)
    if origin in (dict, Mapping):
        args = typing.get_args(hint)
        inner = converter(args[1]) if len(args) == 2 else None
        if inner is None:
            return None
        return lambda v: {k: inner(x) for k, x in v.items()}
    return None


def _first_of(members: list[Convert]) -> Convert:
    def convert(value: Any) -> Any:
        if value is None:
            return None
        for member in members:
            try:
                return member(value)
            except Exception:  # noqa: BLE001, S112 - not this member: try the next
                continue
        return value

    return convert


def _array_converter(hint: Any) -> Convert | None:
    origin = typing.get_origin(hint) or hint
    args = typing.get_args(hint)
    if origin is tuple and args and (len(args) != 2 or args[1] is not Ellipsis):
        each = [converter(a) for a in args]
        return lambda v: tuple(c(x) if c else x for c, x in zip(each, v, strict=False))
    inner = converter(args[0]) if args else None
    make: Callable[[Any], Any] = {tuple: tuple, set: set, frozenset: frozenset}.get(origin, list)
    if inner is None:
        return None if make is list else make
    return lambda v: make(inner(x) for x in v)


def _record_converter(cls: type) -> Convert:
    fields = [(name, converter(hint)) for name, hint, _r, _d in record_fields(cls)]
    convs = {name: c for name, c in fields if c is not None}
    is_dict = typed_dict(cls)

    def convert(value: Any) -> Any:
        if not is_dict and isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"{cls.__name__} needs an object, got {type(value).__name__}")
        data = {k: (convs[k](x) if k in convs and x is not None else x) for k, x in value.items()}
        return data if is_dict else cls(**data)

    return convert


# -- a result -> JSON -------------------------------------------------------------------


def to_json(value: Any) -> Any:
    """``value`` as plain JSON: dataclasses and models as objects, enums as their value,
    tuples and sets as arrays; anything else unchanged."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if pydantic_model(type(value)):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json(v) for v in value]
    return value


def needs_json(value: Any) -> bool:
    """Whether a returned value is not plain JSON at its top (a dataclass, a model...)."""
    return type(value) not in (str, int, float, bool, dict, list, type(None))
