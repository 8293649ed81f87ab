"""Parameter descriptions from Google, NumPy and Sphinx docstrings (harness/docstrings.py)."""

from __future__ import annotations

from harness.docstrings import parse


def test_google_sections_end_at_the_next_heading() -> None:
    doc = (
        "Summary line.\n\nLonger text.\n\nArgs:\n    a (int): First.\n    *args: Ignored.\n"
        "    b: Second,\n        continued.\n\nReturns:\n    Something.\n"
    )
    description, params = parse(doc)
    assert params == {"a": "First.", "args": "Ignored.", "b": "Second, continued."}
    assert description == "Summary line.\n\nLonger text.\n\nReturns:\n    Something."


def test_numpy_sections_end_at_the_next_underlined_heading() -> None:
    doc = (
        "Summary.\n\nParameters\n----------\nx : int\n    The x.\n\n"
        "y\n    The y,\n    two lines.\n\n"
        "Returns\n-------\nint\n    The sum.\n"
    )
    description, params = parse(doc)
    assert params == {"x": "The x.", "y": "The y, two lines."}
    assert description == "Summary.\n\nReturns\n-------\nint\n    The sum."


def test_sphinx_fields_and_nothing_to_parse() -> None:
    doc = (
        "Do it.\n\n:param str path: Where.\n:type path: str\n"
        ":keyword force: Even if.\n:raises X: never"
    )
    description, params = parse(doc)
    assert params == {"path": "Where.", "force": "Even if."}
    assert description == "Do it.\n\n:raises X: never"
    assert parse(None) == ("", {})
    assert parse("Just text.\n\nArguments are nice.") == ("Just text.\n\nArguments are nice.", {})
