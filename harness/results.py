"""What a call is and what it returns (SPEC §9, §12)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """The outcome of one call. ``text`` is what the model sees (capped)."""

    call_id: str
    name: str
    is_error: bool = False
    value: Any = None
    text: str = ""
    error: str | None = None
    duration_ms: float = 0.0
    truncated: bool = False
    blocked_by: str | None = None
    # Reference of the full output kept for the session when ``truncated`` (SPEC §8.6).
    output_ref: str | None = None


_RESULT_SLOTS = tuple(f.name for f in fields(ToolResult))
_RESULT_SETTERS = tuple(ToolResult.__dict__[name].__set__ for name in _RESULT_SLOTS)


def make_result(call_id: str, name: str, is_error: bool, value: Any, text: str,
                error: str | None, duration_ms: float, truncated: bool,
                blocked_by: str | None, output_ref: str | None) -> ToolResult:
    """Build a ToolResult on the hot path (same object as the constructor makes).

    A frozen dataclass's ``__init__`` goes through ``object.__setattr__`` per field
    (~2.5 µs for eleven); writing the slots through their descriptors costs a fifth of
    that. ``tests/core/test_api.py`` checks both ways build equal results.
    """
    obj = object.__new__(ToolResult)
    for setter, value_ in zip(_RESULT_SETTERS, (call_id, name, is_error, value, text, error,
                                                 duration_ms, truncated, blocked_by,
                                                 output_ref), strict=True):
        setter(obj, value_)
    return obj


_CALL_SETTERS = tuple(ToolCall.__dict__[f.name].__set__ for f in fields(ToolCall))


def make_call(name: str, arguments: Mapping[str, Any], id: str) -> ToolCall:
    """Build a ToolCall on the hot path (see :func:`make_result`); fields in order."""
    obj = object.__new__(ToolCall)
    for setter, value_ in zip(_CALL_SETTERS, (name, arguments, id), strict=True):
        setter(obj, value_)
    return obj
