"""Hostile inputs found in review: deep YAML, duplicate keys, schemas that only fail compiled,
entry points the old regex missed, odd file names, and message wording."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.artifacts.frontmatter import MAX_NESTING, split
from harness.runtime.static import check_script
from harness.validation import check_project


def _write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("shape", ["- ", "? ", "- ? "])
def test_deep_block_nesting_in_a_new_process_is_refused_not_a_crash(
    shape: str, tmp_path: Path
) -> None:
    # The reported case: ~200 KB, under the cap; used to die with SIGSEGV in the C composer.
    text = "---\nx:\n" + shape * (200_000 // len(shape)) + "\n---\nDeep.\n"
    assert len(text.encode()) < 256 * 1024
    _write(tmp_path, ".harness/tools/t.md", text)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from harness.cli.main import cli; cli()",
            "validate",
            "--root",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "[yaml-too-deep]" in done.stdout


@pytest.mark.parametrize("shape", ["- ", "? ", "- ? ", "? - "])
def test_block_nesting_limit_is_exact(shape: str) -> None:
    def depth_of(levels: int) -> str:
        # the top-level mapping is one level; "x:" holds the nested collections
        per = shape.count("-") + shape.count("?")
        return "---\nx:\n" + shape * (levels // per) + "1\n---\n"

    ok = split(depth_of(MAX_NESTING - 2), "t.md")
    # "? ? 1" is a mapping used as a key: refused, but not for its depth
    assert "yaml-too-deep" not in [p.code for p in ok[3]]
    assert ok[0] or shape != "- "
    bad = split(depth_of(MAX_NESTING + 2), "t.md")
    assert [p.code for p in bad[3]] == ["yaml-too-deep"]


def test_flow_nesting_limit_and_brackets_in_strings() -> None:
    inside = "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1)
    assert split(f"---\nx: {inside}\n---\n", "t.md")[3] == []
    deep = "[" * (MAX_NESTING + 5) + "]" * (MAX_NESTING + 5)
    assert [p.code for p in split(f"---\nx: {deep}\n---\n", "t.md")[3]] == ["yaml-too-deep"]
    # Brackets inside a string are not nesting.
    text = "---\nx: '" + "[" * 5000 + "'\n---\n"
    mapping, _b, _l, problems = split(text, "t.md")
    assert problems == [] and mapping["x"] == "[" * 5000


def test_deep_nesting_with_an_anchor_reports_the_first_finding_only() -> None:
    anchor_first = "---\nx: &a\n" + "- " * 5000 + "\n---\n"
    assert [p.code for p in split(anchor_first, "t.md")[3]] == ["yaml-alias"]
    deep_first = "---\nx:\n" + "- " * 5000 + "&a 1\n---\n"
    assert [p.code for p in split(deep_first, "t.md")[3]] == ["yaml-too-deep"]


def test_builder_depth_stays_far_below_the_recursion_limit() -> None:
    # The builder recurses once per level; MAX_NESTING bounds it well below Python's limit.
    assert MAX_NESTING * 2 < sys.getrecursionlimit()
    text = "---\nx:\n" + "- " * (MAX_NESTING - 2) + "1\n---\n"
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(MAX_NESTING + 150)
    try:
        mapping, _b, _l, problems = split(text, "t.md")
    finally:
        sys.setrecursionlimit(old)
    assert problems == []
    depth, value = 0, mapping["x"]
    while isinstance(value, list):
        depth, value = depth + 1, value[0]
    assert (depth, value) == (MAX_NESTING - 2, 1)


def test_duplicate_keys_in_a_bundle_entry_and_in_harness_md(tmp_path: Path) -> None:
    _write(
        tmp_path,
        ".harness/plugins/p.md",
        "---\ntools:\n  - name: a\n    script: 'def run(args): return 1'\n    name: b\n---\n",
    )
    _write(tmp_path, "harness.md", "---\nlimits: {}\nlimits:\n  max_concurrency: 2\n---\n")
    problems = [(p.path, p.line, p.code, p.message) for p in check_project(tmp_path).problems]
    assert (
        ".harness/plugins/p.md",
        5,
        "yaml-duplicate-key",
        'parse bundle p.md: yaml: line 5: duplicate key "name" in tools[0] (first on line 3); '
        "YAML keeps only the last one: remove or rename one",
    ) in problems
    assert ("harness.md", 3, "yaml-duplicate-key") in [p[:3] for p in problems]
    # equal as Python keys, not as text: 1 and true
    mapping, _b, _l, found = split("---\nx:\n  1: a\n  true: b\n---\n", "t.md")
    assert [p.code for p in found] == ["yaml-duplicate-key"]


def test_valid_refs_and_patterns_are_accepted(tmp_path: Path) -> None:
    _write(
        tmp_path,
        ".harness/tools/t.md",
        "---\nparameters:\n  a:\n    type: string\n    pattern: '^\\p{L}+$'\n"
        "  b:\n    type: object\n    $ref: '#/properties/a'\n"
        "  c:\n    type: object\n    $ref: 'https://json-schema.org/draft/2020-12/schema'\n"
        "returns:\n  type: object\n  $defs:\n    x: {type: string}\n"
        "  properties:\n    y: {$ref: '#/$defs/x'}\n"
        "script: |\n  def run(args):\n      return {}\n---\n",
    )
    assert [p.render() for p in check_project(tmp_path).problems] == []


def test_compiled_schema_problem_without_a_precise_place(tmp_path: Path) -> None:
    # An $id changes the base URI: the relative ref is then remote, found only by compiling.
    _write(
        tmp_path,
        ".harness/tools/t.md",
        "---\nreturns:\n  $id: 'https://example.com/r.json'\n  items: {$ref: 'other.json'}\n"
        "script: |\n  def run(args):\n      return {}\n---\n",
    )
    (problem,) = check_project(tmp_path).problems
    assert problem.code == "returns-invalid"
    assert "other.json" in problem.message and "does not fetch" in problem.message


# -- static checks ---------------------------------------------------------------------------


def codes(source: str, kind: str = "tool") -> list[str]:
    return [p.code for p in check_script(source, "t.md", 1, kind)]


@pytest.mark.parametrize(
    "source",
    [
        "run = lambda args: 7",
        "run = lambda args, extra=1: 7",
        "def _impl(args):\n    return 1\nrun = _impl\n",
        "def run(args, limit=10):\n    return limit\n",
        "def run(*args):\n    return args\n",
        "def run(\n    args,\n):\n    return 1\n",
        'def run(args, sep=")"):\n    return sep\n',
        'def run(args, sep="("):  # run(a, b)\n    return sep\n',
    ],
)
def test_entry_points_that_exist(source: str) -> None:
    assert "script-entry-missing" not in codes(source)
    assert "script-entry-arity" not in codes(source)


@pytest.mark.parametrize(
    "source,code",
    [
        ('x = """\ndef run(args):\n    pass\n"""\n', "script-entry-missing"),
        ("# def run(args):\nx = 1\n", "script-entry-missing"),
        ("x = '''\ndef run(args):\n    pass\n'''\n", "script-entry-missing"),
        ('def run(a, b, c=")"):\n    return 1\n', "script-entry-arity"),
        ("x = dict(\nrun = 1)\n", "script-entry-missing"),
        ("def main(args):\n    run = 1\n    return run\n", "script-entry-missing"),
        ("run = lambda: 7", "script-entry-arity"),
        ("run = lambda a, b: 7", "script-entry-arity"),
        ("def _impl(a, b):\n    return 1\nrun = _impl\n", "script-entry-arity"),
    ],
)
def test_entry_points_that_do_not_exist(source: str, code: str) -> None:
    assert code in codes(source)


@pytest.mark.parametrize("when", ["True), (1", "True, False", "(True))", "payload), fail('x'"])
def test_when_must_be_one_expression(when: str) -> None:
    problems = check_script(when, "h.md", 3, "when", first_column=7, owner='hook "h"')
    assert [p.code for p in problems] == ["script-syntax"]
    assert "is not a single expression" in problems[0].message
    assert problems[0].line == 3


@pytest.mark.parametrize(
    "when",
    [
        "(True)",
        'payload["name"] in ("a", "b")',
        'len(")") == 1',
        "[1, 2] == [1, 2]  # a, b",
        "payload.get(\n  'x', 1) == 1",
    ],
)
def test_when_single_expressions_still_pass(when: str) -> None:
    assert codes(when, "when") == []


def test_non_utf8_file_name_gives_no_spurious_syntax_error(tmp_path: Path) -> None:
    name = b"t\xff.md"
    folder = tmp_path / ".harness" / "tools"
    folder.mkdir(parents=True)
    with open(os.path.join(os.fsencode(folder), name), "wb") as handle:
        handle.write(b"---\nscript: |\n  def run(args):\n      return 1\n---\nA tool.\n")
    problems = check_project(tmp_path).problems
    assert [p.code for p in problems] == ["tool-name-invalid"]
    assert check_script("def run(args):\n    return 1\n", "t\udcff.md") == []


# -- messages ------------------------------------------------------------------------------


def test_script_wrong_type_reports_once_with_the_right_article(tmp_path: Path) -> None:
    _write(tmp_path, ".harness/hooks/h.md", "---\nevent: tool.pre\nscript: [1]\nwhen: 3\n---\n")
    messages = [(p.code, p.message) for p in check_project(tmp_path).problems]
    assert messages == [
        (
            "field-type",
            'hook "h" script must be Starlark source text (use `script: |` and '
            "indent the code), got a list",
        ),
        (
            "field-type",
            'hook "h" when must be Starlark source text (use `when: |` and indent '
            "the code), got an integer",
        ),
    ]


def test_hook_description_key_points_to_the_body(tmp_path: Path) -> None:
    _write(
        tmp_path,
        ".harness/hooks/h.md",
        "---\nevent: tool.pre\ndescription: x\nscript: 'def handle(event, payload): return'\n---\n",
    )
    (problem,) = check_project(tmp_path).problems
    assert problem.message.endswith(
        "the description of a hook file is its Markdown body; move it there"
    )


def test_workspace_that_is_a_file(tmp_path: Path) -> None:
    _write(tmp_path, "notes.txt", "x")
    _write(tmp_path, "harness.md", "---\nworkspace: notes.txt\n---\n")
    (problem,) = check_project(tmp_path).problems
    assert problem.code == "config-invalid" and "is not a directory" in problem.message


def test_workspace_that_exists_is_used(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    _write(tmp_path, "harness.md", "---\nworkspace: src\n---\n")
    project = check_project(tmp_path)
    assert project.problems == () and project.config.workspace == (tmp_path / "src").resolve()
