"""Constructors for objects made on every call, derived from the class definition.

A frozen slots dataclass's ``__init__`` parses keywords and goes through
``object.__setattr__`` per field; a NamedTuple's ``__new__`` is Python code. These
makers build the very same objects by writing the slots (or ``tuple.__new__``)
directly, about twice as fast, and read the fields from the class, so a field added to
the class is never forgotten. Equality with the ordinary constructor is tested in
``tests/core/test_hotpath.py``. Imports nothing from harness.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def slot_maker(cls: type[T], *params: str) -> Callable[..., T]:
    """A function ``make(*params)`` that returns what ``cls(**dict(zip(params, ...)))``
    returns, every field not in ``params`` set to its declared default (a
    ``default_factory`` is called per object). Without ``params``: every field, in
    declaration order; trailing parameters with a plain default may be left out (a
    field added at the end keeps old callers working). ``cls`` must be a slots
    dataclass without ``__post_init__``.
    """
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a slots dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has __post_init__, which a slot maker would skip")
    fields = dataclasses.fields(cls)
    names = params or tuple(f.name for f in fields)
    unknown = [n for n in names if n not in {f.name for f in fields}]
    if unknown or len(set(names)) != len(names):
        raise TypeError(f"{cls.__name__}: unknown or repeated fields {unknown or list(names)}")
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    body = []
    for i, f in enumerate(fields):
        scope[f"_set{i}"] = cls.__dict__[f.name].__set__
        if f.name in names:
            value = f"_p{names.index(f.name)}"
        elif f.default is not dataclasses.MISSING:
            scope[f"_default{i}"] = f.default
            value = f"_default{i}"
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"_factory{i}"] = f.default_factory
            value = f"_factory{i}()"
        else:
            raise TypeError(f"{cls.__name__}.{f.name} has no default: pass it")
        body.append(f"    _set{i}(obj, {value})")
    # A trailing run of parameters whose fields have a plain default may be left out.
    by_name = {f.name: f for f in fields}
    params_src = [f"_p{i}" for i in range(len(names))]
    for i in range(len(names) - 1, -1, -1):
        default = by_name[names[i]].default
        if default is dataclasses.MISSING:
            break
        scope[f"_pdefault{i}"] = default
        params_src[i] += f"=_pdefault{i}"
    args = ", ".join(params_src)
    source = "\n".join([f"def make({args}):", "    obj = _new(_cls)", *body, "    return obj"])
    exec(source, scope)  # noqa: S102 - generated from field names, nothing else
    make: Callable[..., T] = scope["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    make.__doc__ = f"{cls.__name__}({', '.join(names)}) without __init__ (harness.hotpath)."
    return make


def tuple_maker(cls: type[T]) -> Callable[[tuple[Any, ...]], T]:
    """``make(values)`` returns ``cls(*values)`` for a NamedTuple ``cls``, skipping its
    Python-level ``__new__`` (one C call; ``values`` must hold every field)."""
    if not (issubclass(cls, tuple) and hasattr(cls, "_fields")):
        raise TypeError(f"{cls.__name__} is not a NamedTuple")
    return functools.partial(tuple.__new__, cls)
