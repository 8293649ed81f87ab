"""One fixture per rule (tests/fixtures/load/<case>/): code, line and message of each problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.validation import check_project

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "load"
T = ".harness/tools/t.md"
H = ".harness/hooks/h.md"

# case -> [(path, line, code, severity, text the message must contain)]; nothing else allowed.
CASES: dict[str, list[tuple[str, int, str, str, str]]] = {
    "good": [],
    "bom_crlf": [],
    "empty_frontmatter": [(T, 1, "tool-no-script", "warning", 'tool "t" has no script')],
    "missing_open": [
        (
            T,
            1,
            "frontmatter-missing",
            "error",
            "parse tool t.md: missing --- frontmatter delimiter on line 1",
        )
    ],
    "unclosed": [
        (T, 1, "frontmatter-unclosed", "error", "parse tool t.md: no closing --- delimiter")
    ],
    "yaml_error": [(T, 8, "yaml-syntax", "error", "parse tool t.md: yaml: line 8: did not find")],
    "yaml_alias": [
        (T, 3, "yaml-alias", "error", "parse tool t.md: yaml: line 3: anchors (&p) are not allowed")
    ],
    "not_mapping": [(T, 2, "frontmatter-not-mapping", "error", "frontmatter must be a mapping")],
    "bad_utf8": [
        (T, 2, "encoding-invalid", "error", "parse tool t.md: not valid UTF-8 at byte offset 13")
    ],
    "unknown_key": [
        (
            T,
            2,
            "unknown-key",
            "error",
            'tool "t" has unknown key "timeout_msec"; rename it (did you mean "timeout_ms"?)',
        )
    ],
    "timeout_negative": [(T, 2, "timeout-negative", "error", 'tool "t" timeout_ms must be >= 0')],
    "duplicate": [
        (
            T,
            1,
            "duplicate-name",
            "error",
            'tool "t" is defined more than once: in harness.md:3 and in .harness/tools/t.md:1',
        )
    ],
    "duplicate_bundles": [
        (
            ".harness/plugins/b.md",
            3,
            "duplicate-name",
            "error",
            'tool "t" is defined more than once: in .harness/builtins/a.md:3 and in '
            ".harness/plugins/b.md:3",
        )
    ],
    "override_nothing": [
        (
            ".harness/overrides/o.md",
            3,
            "override-unused",
            "error",
            'override of tool "ghost" replaces nothing',
        )
    ],
    "override_twice": [
        (
            ".harness/overrides/b.md",
            3,
            "override-duplicate",
            "error",
            'tool "t" is overridden more than once: in .harness/overrides/a.md:3',
        )
    ],
    "invalid_name": [
        (
            ".harness/tools/9lives.md",
            1,
            "tool-name-invalid",
            "error",
            'tool name "9lives" is invalid: it must start with a letter',
        )
    ],
    "name_collision": [
        (
            ".harness/tools/a_b.md",
            1,
            "tool-name-collision",
            "error",
            'tool "a_b" and tool "a.b" (.harness/tools/a.b.md:1) both export as "a_b"',
        )
    ],
    "param_type_invalid": [
        (
            T,
            4,
            "parameter-type-invalid",
            "error",
            'parameter "n" type must be one of string, number, integer, boolean, '
            'object, array; got "integr" (did you mean "integer"?)',
        )
    ],
    "param_type_missing": [(T, 3, "parameter-type-missing", "error", 'parameter "n" has no type')],
    "param_schema_invalid": [
        (
            T,
            5,
            "parameters-schema-invalid",
            "error",
            'tool "t" parameters are not a valid JSON Schema at $.n.minimum',
        )
    ],
    "param_required_invalid": [
        (
            T,
            5,
            "parameter-required-invalid",
            "error",
            'parameter "n" required must be true or false',
        )
    ],
    "returns_invalid": [
        (T, 3, "returns-invalid", "error", 'tool "t" returns is not a valid JSON Schema at $.type')
    ],
    "field_types": [
        (T, 2, "field-type", "error", 'tool "t" async must be true or false'),
        (T, 3, "field-type", "error", 'tool "t" enabled must be true or false, got 1'),
        (T, 4, "loading-invalid", "error", 'tool "t" loading must be one of always, deferred'),
        (
            T,
            6,
            "annotations-invalid",
            "error",
            'tool "t" annotations.read_only must be true or false',
        ),
        (T, 7, "annotation-unknown-key", "warning", '(did you mean "read_only"?)'),
    ],
    "no_script": [(T, 1, "tool-no-script", "warning", "Harness.bind()")],
    "hook_no_event": [(H, 1, "event-missing", "error", 'hook "h" has no event; add `event:`')],
    "hook_unknown_event": [
        (
            H,
            2,
            "event-unknown",
            "error",
            'hook "h" event "tool.prex" is unknown (did you mean "tool.pre"?)',
        )
    ],
    "hook_no_script": [(H, 1, "hook-script-missing", "error", 'hook "h" has no script')],
    "hook_fields": [
        (H, 3, "field-type", "error", 'hook "h" priority must be an integer'),
        (H, 4, "on-error-invalid", "error", 'hook "h" on_error must be one of block, allow'),
        (H, 5, "timeout-negative", "error", 'hook "h" timeout_ms must be >= 0'),
    ],
    "hook_handle_arity": [
        (H, 4, "script-entry-arity", "error", "it must be `def handle(event, payload):`")
    ],
    "hook_exec": [
        (
            H,
            5,
            "script-unavailable",
            "error",
            'uses "exec", which is not available in hook scripts',
        ),
        (
            H,
            6,
            "script-unavailable",
            "error",
            "calls fs.write, which is not available in hook scripts",
        ),
    ],
    "when_syntax": [(H, 3, "script-syntax", "error", 'hook "h" when expression does not parse')],
    "when_undefined": [
        (H, 3, "script-undefined", "error", 'hook "h" when expression uses undefined name "target"')
    ],
    "script_syntax": [
        (T, 4, "script-syntax", "error", 'tool "t" script does not parse: Parse error')
    ],
    "script_no_run": [(T, 3, "script-entry-missing", "error", "does not define `def run(args):`")],
    "script_undefined": [
        (T, 4, "script-undefined", "error", 'uses undefined name "lenn" (did you mean "len"?)')
    ],
    "script_unknown_function": [
        (
            T,
            4,
            "script-unknown-function",
            "error",
            'calls fs.reed, which does not exist (did you mean "read"?)',
        )
    ],
    "script_load": [
        (T, 3, "script-load", "error", 'uses load("lib.star"): load statements are not')
    ],
    "config_invalid": [
        (
            "harness.md",
            3,
            "config-invalid",
            "error",
            "config limits.max_output_bytes must be an integer",
        ),
        ("harness.md", 4, "config-unknown-key", "error", '(did you mean "max_output_bytes"?)'),
        ("harness.md", 6, "config-invalid", "error", "config runtime.isolation must be one of"),
        (
            "harness.md",
            7,
            "config-unknown-key",
            "error",
            '"workspce" (did you mean "workspace"?)',
        ),
    ],
    "file_ignored": [
        (".harness/tools/T.MD", 0, "file-ignored", "error", 'rename it to ".harness/tools/T.md"'),
        (
            ".harness/tools/u.markdown",
            0,
            "file-ignored",
            "error",
            'rename it to ".harness/tools/u.md"',
        ),
    ],
    "bundle_invalid": [
        (
            ".harness/builtins/empty.md",
            1,
            "bundle-empty",
            "warning",
            "has no tools: or hooks: list",
        ),
        (".harness/plugins/p.md", 2, "bundle-invalid", "error", "tools must be a list of entries"),
        (".harness/plugins/p.md", 4, "entry-name-missing", "error", "hooks[0] has no name"),
        # the nameless entry's own problems are still reported
        (
            ".harness/plugins/p.md",
            4,
            "hook-script-missing",
            "error",
            'hook "hooks[0]" has no script',
        ),
        (".harness/plugins/p.md", 5, "entry-invalid", "error", "hooks[1] must be a mapping"),
    ],
    "yaml_deep": [
        (
            T,
            3,
            "yaml-too-deep",
            "error",
            "parse tool t.md: yaml: line 3: collections nest deeper than 200 levels",
        ),
        (
            ".harness/tools/u.md",
            3,
            "yaml-too-deep",
            "error",
            "parse tool u.md: yaml: line 3: collections nest deeper than 200 levels",
        ),
    ],
    "yaml_duplicate_key": [
        (
            T,
            5,
            "yaml-duplicate-key",
            "error",
            'parse tool t.md: yaml: line 5: duplicate key "n" in parameters (first on line 3)',
        ),
        (
            T,
            10,
            "yaml-duplicate-key",
            "error",
            'parse tool t.md: yaml: line 10: duplicate key "script" (first on line 7)',
        ),
    ],
    "schema_compile": [
        (
            T,
            5,
            "parameters-schema-invalid",
            "error",
            'tool "t" parameters are not a valid JSON Schema at $.code.pattern: "(" is not a '
            "valid regular expression",
        ),
        (
            T,
            8,
            "parameters-schema-invalid",
            "error",
            'tool "t" parameters are not a valid JSON Schema at $.ref.$ref: "#/$defs/nope" '
            "points to nothing",
        ),
        (
            T,
            11,
            "parameters-schema-invalid",
            "error",
            'tool "t" parameters are not a valid JSON Schema at $.remote.$ref: '
            '"https://example.com/schemas/thing.json" is a remote reference',
        ),
        (
            T,
            15,
            "returns-invalid",
            "error",
            'tool "t" returns is not a valid JSON Schema at $.patternProperties: "[a-" is not a '
            "valid regular expression",
        ),
    ],
    "hook_no_handle": [
        (
            H,
            4,
            "script-entry-missing",
            "error",
            'hook "h" script does not define `def handle(event, payload):`',
        ),
    ],
    "script_run_lambda": [],
    "when_not_single": [
        (H, 3, "script-syntax", "error", 'hook "h" when expression is not a single expression'),
    ],
    "script_not_text": [
        (
            T,
            2,
            "field-type",
            "error",
            'tool "t" script must be Starlark source text (use `script: |` and indent the code), '
            "got an integer",
        ),
    ],
    "param_unknown_keyword": [
        (T, 3, "parameter-unknown-key", "warning", '"exmaple" (did you mean "examples"?)'),
    ],
    "description_key": [
        (
            T,
            2,
            "unknown-key",
            "error",
            'tool "t" has unknown key "descripton" (did you mean "description"?); the description '
            "of a tool file is its Markdown body; move it there",
        ),
    ],
    "entry_name_type": [
        (
            ".harness/plugins/p.md",
            3,
            "field-type",
            "error",
            "tools[0] name must be a string, got an integer (5)",
        ),
    ],
    "workspace_missing": [
        (
            "harness.md",
            2,
            "config-invalid",
            "error",
            'config workspace "no/such/dir" does not exist',
        ),
    ],
    "config_types": [
        (
            "harness.md",
            3,
            "config-invalid",
            "error",
            "config limits.max_output_bytes must be an integer, got a string",
        ),
        (
            "harness.md",
            5,
            "config-invalid",
            "error",
            "config meta.enabled must be a boolean (true or false), got a string",
        ),
        (
            "harness.md",
            7,
            "config-invalid",
            "error",
            "config exec.env must be a list of strings, got a string",
        ),
        (
            "harness.md",
            9,
            "config-invalid",
            "error",
            "config runtime.isolation must be one of process, inprocess; got an integer",
        ),
        (
            "harness.md",
            10,
            "config-invalid",
            "error",
            "config network must be a mapping, got a list",
        ),
    ],
}


def test_every_fixture_has_a_case() -> None:
    assert sorted(p.name for p in FIXTURES.iterdir()) == sorted(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_conformance(case: str) -> None:
    project = check_project(FIXTURES / case)
    got = [(p.path, p.line, p.code, p.severity) for p in project.problems]
    want = [(path, line, code, sev) for path, line, code, sev, _ in CASES[case]]
    assert got == want, "\n".join(p.render() for p in project.problems)
    for problem, (*_, text) in zip(project.problems, CASES[case], strict=True):
        assert text in problem.message
        assert problem.column >= (0 if problem.line == 0 else 1)
    assert project.ok == all(sev == "warning" for *_, sev, _ in CASES[case])


@pytest.mark.parametrize("case", sorted(CASES))
def test_cli_exit_code(case: str) -> None:
    result = CliRunner().invoke(cli, ["validate", "--root", str(FIXTURES / case)])
    want = 0 if all(sev == "warning" for *_, sev, _ in CASES[case]) else 1
    assert result.exit_code == want, result.output
    for path, line, code, _sev, _text in CASES[case]:
        assert f"{path}:{line}:" in result.output and f"[{code}]" in result.output


def test_unknown_keys_are_errors_and_strict_promotes_the_style_warnings() -> None:
    # A misspelt top-level key is an error with or without --strict (issue 23) ...
    for strict in (False, True):
        found = check_project(FIXTURES / "unknown_key", strict=strict)
        assert not found.ok and [p.severity for p in found.problems] == ["error"]
    # ... --strict still turns the remaining style warnings (schema keywords) into errors.
    lenient = check_project(FIXTURES / "param_unknown_keyword")
    strict = check_project(FIXTURES / "param_unknown_keyword", strict=True)
    assert lenient.ok and not strict.ok
    assert [(p.code, p.severity) for p in strict.problems] == [("parameter-unknown-key", "error")]


def test_good_project_contents() -> None:
    project = check_project(FIXTURES / "good")
    assert list(project.tools) == ["hash_it", "inline.echo", "now", "read"]
    assert project.system_prompt == "You are a careful assistant."
    assert project.config.limits.max_output_bytes == 1000
    now = project.tools["now"]
    assert now.description == "Current time (overridden)"
    assert now.source.layer == "overrides" and now.source.path == ".harness/overrides/now.md"
    read = project.tools["read"]
    assert read.description == "Read a file."
    assert read.input_schema == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to read"},
            "limit": {"type": "integer", "minimum": 1, "default": 10},
        },
        "required": ["path"],
    }
    assert (read.script_line, read.script_column) == (12, 3)
    assert project.tools["hash_it"].description == "hash_it"
    assert [h.name for h in project.hooks] == ["allow_reads", "audit"]
    allow = project.hooks[0]
    assert (allow.priority, allow.event, allow.when_line, allow.script_line) == (
        0,
        "tool.pre",
        4,
        6,
    )
    assert project.hooks[1].event == "custom.audit"


def test_bom_crlf_loads() -> None:
    project = check_project(FIXTURES / "bom_crlf")
    tool = project.tools["t"]
    assert tool.description == "A tool."
    assert tool.script == "def run(args):\n    return 1\n"
    assert tool.script_line == 3
