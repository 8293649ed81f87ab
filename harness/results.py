"""What a call is and what it returns (docs/spec.md §9, §12)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.hotpath import slot_maker


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
    # Reference of the full output kept for the session when ``truncated`` (docs/spec.md §8.6).
    output_ref: str | None = None
    # Remarks about the call the model should read (e.g. unknown argument names with a
    # did-you-mean; docs/python-api.md); each is also the last line of ``text``.
    notes: tuple[str, ...] = ()


# make_result(call_id, name, is_error, value, text, error, duration_ms, truncated,
# blocked_by, output_ref, notes) and make_call(name, arguments, id): the same objects as
# the constructors make, built on the hot path without __init__ (harness.hotpath).
make_result: Callable[..., ToolResult] = slot_maker(ToolResult)
make_call: Callable[[str, Mapping[str, Any], str], ToolCall] = slot_maker(ToolCall)
