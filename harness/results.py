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
    # Remarks about the call the model should read (e.g. unknown argument names with a
    # did-you-mean; docs/python-api.md); each is also the last line of ``text``.
    notes: tuple[str, ...] = ()


_RESULT_SLOTS = tuple(f.name for f in fields(ToolResult))
_RESULT_SETTERS = tuple(ToolResult.__dict__[name].__set__ for name in _RESULT_SLOTS)


(_S_CALL_ID, _S_NAME, _S_IS_ERROR, _S_VALUE, _S_TEXT, _S_ERROR, _S_DURATION, _S_TRUNCATED,
 _S_BLOCKED_BY, _S_OUTPUT_REF, _S_NOTES) = _RESULT_SETTERS
_new = object.__new__


def make_result(call_id: str, name: str, is_error: bool, value: Any, text: str,
                error: str | None, duration_ms: float, truncated: bool,
                blocked_by: str | None, output_ref: str | None,
                notes: tuple[str, ...] = ()) -> ToolResult:
    """Build a ToolResult on the hot path (same object as the constructor makes).

    A frozen dataclass's ``__init__`` goes through ``object.__setattr__`` per field;
    writing the slots through their descriptors directly is about twice as fast.
    ``tests/core/test_api.py`` checks both ways build equal results.
    """
    obj = _new(ToolResult)
    _S_CALL_ID(obj, call_id)
    _S_NAME(obj, name)
    _S_IS_ERROR(obj, is_error)
    _S_VALUE(obj, value)
    _S_TEXT(obj, text)
    _S_ERROR(obj, error)
    _S_DURATION(obj, duration_ms)
    _S_TRUNCATED(obj, truncated)
    _S_BLOCKED_BY(obj, blocked_by)
    _S_OUTPUT_REF(obj, output_ref)
    _S_NOTES(obj, notes)
    return obj


_CALL_SETTERS = tuple(ToolCall.__dict__[f.name].__set__ for f in fields(ToolCall))


_S_NAME_C, _S_ARGUMENTS_C, _S_ID_C = _CALL_SETTERS


def make_call(name: str, arguments: Mapping[str, Any], id: str) -> ToolCall:
    """Build a ToolCall on the hot path (see :func:`make_result`)."""
    obj = _new(ToolCall)
    _S_NAME_C(obj, name)
    _S_ARGUMENTS_C(obj, arguments)
    _S_ID_C(obj, id)
    return obj
