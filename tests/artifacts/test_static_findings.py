"""Checks yield location-free findings; ``check_script`` alone maps them to the file."""

from __future__ import annotations

from harness.runtime.static import Finding, check_script, findings, located

BROKEN = 'x = fs.nope("a")\ndef run(args):\n    return missing + fs("b")\n'


def test_findings_are_located_in_the_script() -> None:
    found = list(findings(BROKEN, "tool"))
    assert all(isinstance(f, Finding) for f in found)
    codes = {(f.code, f.line) for f in found}
    assert ("script-unknown-function", 1) in codes
    assert ("script-undefined", 3) in codes
    assert ("script-module-call", 3) in codes
    assert all(not f.message.startswith('tool "') for f in found)


def test_one_driver_adds_file_position_and_owner() -> None:
    at_top = check_script(BROKEN, "a.md", 1, "tool")
    moved = check_script(BROKEN, "b.md", 20, "tool", first_column=5, owner='tool "t"')
    assert len(at_top) == len(moved) > 0
    for p, q in zip(at_top, moved, strict=True):
        assert (q.path, q.line, q.column, q.code) == ("b.md", p.line + 19, p.column + 4, p.code)
        assert q.message == f'tool "t" {p.message}'


def test_when_positions_leave_the_wrapper_out() -> None:
    (f,) = findings('payload["a"] == 1 +', "when")
    assert (f.code, f.line) == ("script-syntax", 1)
    (p,) = check_script('payload["a"],\n  1', "h.md", 4, "when", first_column=7)
    assert (p.line, p.column) == (4, 7 + len('payload["a"]'))
    # a continuation line of an indented block is indented like the first one
    (p,) = check_script('payload["a"] and (\n1)), 2', "h.md", 4, "when", first_column=7)
    assert (p.line, p.column) == (5, 3 + 6)


def test_located_maps_any_findings() -> None:
    (p,) = located([Finding(2, 3, "c", "m", "warning")], "f.md", 10, 4, 'hook "h"')
    assert (p.path, p.line, p.column, p.code, p.message, p.severity) == (
        "f.md",
        11,
        6,
        "c",
        'hook "h" m',
        "warning",
    )
