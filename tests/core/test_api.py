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
