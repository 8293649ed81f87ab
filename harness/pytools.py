"""Python functions as tools: a typed function becomes a ToolSpec (schema from its type
hints) and a handler (``Harness.tool``)."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.artifacts.model import Parameter, Source, ToolSpec
from harness.errors import UsageError
from harness.plans import Handler

_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}


def _hint_schema(hint: Any) -> tuple[dict[str, Any], bool]:
    """JSON Schema of a type hint, and whether None is allowed."""
    origin = typing.get_origin(hint)
    if hint is Any or hint is inspect.Parameter.empty:
        return {}, False
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = len(members) < len(typing.get_args(hint))
        if len(members) == 1:
            return _hint_schema(members[0])[0], nullable
        return {"anyOf": [_hint_schema(m)[0] for m in members]}, nullable
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(hint))}, False
    if origin in (list, tuple, set, frozenset, Sequence):
        args = typing.get_args(hint)
        schema: dict[str, Any] = {"type": "array"}
        if args and args[0] is not Ellipsis:
            schema["items"] = _hint_schema(args[0])[0]
        return schema, False
    if origin in (dict, Mapping):
        return {"type": "object"}, False
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}, False
    raise UsageError(
        f"cannot turn type hint {hint!r} into a JSON Schema; use str, int, float, "
        "bool, list[...], dict, Literal[...] or Optional[...]"
    )


def tool_from_function(
    func: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> tuple[ToolSpec, Handler]:
    hints = typing.get_type_hints(func)
    sig = inspect.signature(func)
    props: dict[str, Any] = {}
    required: list[str] = []
    params = []
    for pname, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        schema, nullable = _hint_schema(hints.get(pname, Any))
        if p.default is not p.empty and p.default is not None:
            schema["default"] = p.default
        if p.default is p.empty and not nullable:
            required.append(pname)
        props[pname] = schema
        params.append(
            Parameter(
                name=pname,
                type=str(schema.get("type", "")),
                required=pname in required,
                schema=schema,
            )
        )
    tool_name = name or func.__name__
    doc = description or inspect.getdoc(func) or tool_name
    try:
        source = inspect.getsourcefile(func) or "<python>"
    except TypeError:
        source = "<python>"
    takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    input_schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if takes_any:
        # **kwargs welcomes other names: they are not "unknown" (harness/arguments.py).
        input_schema["additionalProperties"] = True
    spec = ToolSpec(
        name=tool_name,
        description=doc,
        parameters=tuple(params),
        input_schema=input_schema,
        source=Source(path=source, layer="python"),
    )

    def handler(args: dict[str, Any]) -> Any:
        # Undeclared keys pass validation (docs/spec.md §9); they reach the function only when
        # it asks for them with **kwargs. An async function's coroutine is awaited by
        # the pipeline.
        if takes_any:
            return func(**args)
        return func(**{k: v for k, v in args.items() if k in props})

    return spec, handler
