"""The public API surface: every name in __all__ resolves, and nothing public is missing."""

from __future__ import annotations

import harness


def test_all_is_sorted_and_complete() -> None:
    assert harness.__all__ == sorted(harness.__all__)
    for name in harness.__all__:
        assert getattr(harness, name) is not None


def test_spec_names_are_exported() -> None:
    for name in ("load", "check", "Harness", "Session", "ToolCall", "ToolResult", "LoadError"):
        assert name in harness.__all__


def test_fast_result_constructor_matches_the_dataclass() -> None:
    from dataclasses import FrozenInstanceError

    import pytest

    from harness.results import ToolResult, make_result

    fields = dict(
        call_id="c",
        name="t",
        is_error=False,
        value={"a": 1},
        text='{"a":1}',
        error=None,
        duration_ms=1.5,
        truncated=False,
        blocked_by=None,
        output_ref=None,
    )
    fast = make_result(*fields.values())
    assert fast == ToolResult(**fields)
    with pytest.raises(FrozenInstanceError):
        fast.text = "x"  # type: ignore[misc]


def test_fast_call_constructor_matches_the_dataclass() -> None:
    from harness.results import ToolCall, make_call

    assert make_call("t", {"a": 1}, "c1") == ToolCall(name="t", arguments={"a": 1}, id="c1")
