"""Static Starlark checks: real starlark-pyo3, file positions."""

from __future__ import annotations

from harness.runtime.static import check_script


def codes(source: str, kind: str = "tool", line: int = 1) -> list[tuple[str, int]]:
    return [(p.code, p.line) for p in check_script(source, "f.md", line, kind)]


def test_clean_tool_and_hook() -> None:
    tool = (
        "def run(args):\n    x = struct(a=1)\n    print(x)\n    if not args:\n"
        '        fail("no args")\n'
        '    return json.encode({"h": hash.sha256("x"), "t": time.now()})\n'
    )
    assert codes(tool) == []
    hook = (
        "def handle(event, payload):\n    if payload:\n        return block('no')\n"
        "    return modify(payload)\n"
    )
    assert codes(hook, "hook") == []
    assert codes('payload["name"] == "x" and event == "tool.pre"', "when") == []


def test_positions_are_file_lines() -> None:
    problems = check_script("def run(args):\n    return nope\n", "f.md", 10, "tool", first_column=3)
    (p,) = problems
    assert (p.code, p.line, p.column) == ("script-undefined", 11, 14)


def test_undefined_at_top_level_is_named() -> None:
    (p,) = check_script("x = missing_thing\ndef run(args):\n    return x\n", "f.md", 1, "tool")
    assert p.code == "script-undefined" and '"missing_thing"' in p.message


def test_module_functions_are_checked_per_kind() -> None:
    assert codes("def run(args):\n    return http.gett('u')\n") == [("script-unknown-function", 2)]
    assert codes("def handle(event, payload):\n    return fs.write('a', 'b')\n", "hook") == [
        ("script-unavailable", 2)
    ]
    assert codes("fs.read('x')", "when") == [("script-unavailable", 1)]
    # inside strings and comments nothing is checked; a rebound name is the user's own
    assert codes("def run(args):\n    # fs.nothing\n    return 'fs.nope'\n") == []
    assert codes("def run(args):\n    fs = struct(x=1)\n    return fs.x\n") == []


def test_entry_points() -> None:
    assert codes("def main(args):\n    return 1\n") == [("script-entry-missing", 1)]
    assert codes("def run(a, b):\n    return 1\n") == [("script-entry-arity", 1)]
    assert codes("def run(args, extra=1):\n    return 1\n") == []
    assert codes("def handle(event, payload, more):\n    return 1\n", "hook") == [
        ("script-entry-arity", 1)
    ]


def test_syntax_lint_and_load() -> None:
    assert codes("def run(args):\n  return (\n") == [("script-syntax", 2)]
    assert codes("def run(args):\n    while True:\n        pass\n")[0][0] == "script-syntax"
    assert ("script-load", 1) in codes('load("x.star", "y")\ndef run(args):\n    return y\n')
    assert ("script-lint-duplicate-key", 2) in codes(
        'def run(args):\n    return {"a": 1, "a": 2}\n'
    )
    assert codes("payload[", "when")[0][0] == "script-syntax"
