"""Python functions as tools: a typed function becomes a ToolSpec (schema from its type
hints, descriptions from ``Annotated`` or its docstring) and a handler that turns the
checked JSON arguments into the hinted types and the result back into JSON
(``Harness.tool``; the types are :mod:`harness.pytypes`)."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from harness.artifacts.model import Parameter, Source, ToolSpec
from harness.docstrings import parse as parse_doc
from harness.errors import UsageError
from harness.plans import Handler
from harness.pytypes import (
    Defs,
    converter,
    needs_json,
    nullable,
    plain_json,
    schema_of,
    to_json,
)


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func, include_extras=True)
    except NameError as exc:
        raise UsageError(
            f"cannot resolve the type hints of {getattr(func, '__qualname__', func)!r} "
            f"({exc}); define the types it names at module level"
        ) from exc


def _returns(hint: Any) -> dict[str, Any] | None:
    """The ``returns`` schema of a return annotation; None for none, ``None``, ``Any``
    or a type with no JSON Schema (such a tool declares no ``returns``)."""
    if hint in (None, type(None), Any, inspect.Parameter.empty):
        return None
    defs = Defs()
    try:
        schema, is_nullable = schema_of(hint, defs, mode="serialization")
    except UsageError:
        return None
    if not schema:
        return None
    if is_nullable:
        schema = nullable(schema)
    if defs.defs:
        schema = {**schema, "$defs": defs.defs}
    return schema


def _described(schema: dict[str, Any], doc: str | None, default: Any) -> dict[str, Any]:
    """``schema`` with the docstring's text (``Annotated`` wins) and a JSON default."""
    if doc and "description" not in schema:
        schema = {**schema, "description": doc}
    if default is not inspect.Parameter.empty and default is not None:
        value = to_json(default)
        if plain_json(value):
            schema = {**schema, "default": value}
    return schema


def tool_from_function(
    func: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> tuple[ToolSpec, Handler]:
    hints = _hints(func)
    sig = inspect.signature(func)
    summary, docs = parse_doc(inspect.getdoc(func))
    defs = Defs()
    props: dict[str, Any] = {}
    required: list[str] = []
    params = []
    convert: dict[str, Callable[[Any], Any]] = {}
    fill_none: list[str] = []
    for pname, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        hint = hints.get(pname, Any)
        try:
            schema, is_nullable = schema_of(hint, defs)
        except UsageError as exc:
            raise UsageError(f'tool "{name or func.__name__}" parameter "{pname}": {exc}') from exc
        schema = _described(schema, docs.get(pname), p.default)
        if p.default is p.empty and not is_nullable:
            required.append(pname)
        if p.default is p.empty and is_nullable:
            fill_none.append(pname)  # Optional without a default: None when left out
        if (c := converter(hint)) is not None:
            convert[pname] = c
        props[pname] = schema
        params.append(
            Parameter(
                name=pname,
                type=str(schema.get("type", "")),
                description=str(schema.get("description", "")),
                required=pname in required,
                schema=schema,
            )
        )
    tool_name = name or func.__name__
    doc = description or summary or tool_name
    try:
        source = inspect.getsourcefile(func) or "<python>"
    except TypeError:
        source = "<python>"
    takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    input_schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if takes_any:
        # **kwargs welcomes other names: they are not "unknown" (harness/arguments.py).
        input_schema["additionalProperties"] = True
    if defs.defs:
        input_schema["$defs"] = defs.defs  # pydantic models' own; "#" is this schema
    return_hint = hints.get("return", inspect.Parameter.empty)
    spec = ToolSpec(
        name=tool_name,
        description=doc,
        parameters=tuple(params),
        input_schema=input_schema,
        returns=_returns(return_hint),
        source=Source(path=source, layer="python"),
    )
    return spec, _handler(func, props, takes_any, convert, fill_none, converter(return_hint))


def _handler(
    func: Callable[..., Any],
    props: dict[str, Any],
    takes_any: bool,
    convert: dict[str, Callable[[Any], Any]],
    fill_none: list[str],
    structured_result: Any,
) -> Handler:
    def handler(args: dict[str, Any]) -> Any:
        # Undeclared keys pass validation (docs/spec.md §9); they reach the function only
        # when it asks for them with **kwargs. Checked JSON becomes the hinted types.
        kwargs = args if takes_any else {k: v for k, v in args.items() if k in props}
        for pname in fill_none:
            kwargs.setdefault(pname, None)
        for pname, make in convert.items():
            if kwargs.get(pname) is not None:
                try:
                    kwargs[pname] = make(kwargs[pname])
                except Exception as exc:
                    raise ValueError(f'argument "{pname}": {exc}') from exc
        value = func(**kwargs)
        if inspect.isawaitable(value):
            return _json_later(value)
        if structured_result is not None or needs_json(value):
            return to_json(value)
        return value

    return handler


async def _json_later(awaitable: Any) -> Any:
    """An async function's result, as JSON (the pipeline awaits it)."""
    return to_json(await awaitable)
