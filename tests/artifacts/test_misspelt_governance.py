"""Misspelt governance is an error by default (issue 23 class 4).

A typo in a key that governs behaviour (``paramaters:``, ``tool_policy:``,
``tools_policy: {denyy: ...}``, a test case's ``exepct:``) used to be a warning: the file
validated, then did nothing. Each is now an error naming the file, the line and the key
it meant; ``x-`` keys and an ``extensions:`` map stay allowed for people's own metadata.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import cli
from harness.validation import check_project

TOOL = """\
---
parameters:
  path: {type: string, required: true}
script: |
  def run(args):
      return args["path"]
---
Echo a path.
"""
HOOK = """\
---
event: tool.pre
script: |
  def handle(event, payload):
      return allow()
---
Allow all.
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def validate(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["validate", "--root", str(root), *args])
    return result.exit_code, result.output


def errors(root: Path) -> list[tuple[str, int, str, str]]:
    return [
        (p.path, p.line, p.code, p.message)
        for p in check_project(root).problems
        if p.severity == "error"
    ]


# -- top-level keys ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel,text,line,want",
    [
        (
            ".harness/tools/t.md",
            "---\nparamaters:\n  path: {type: string}\nscript: |\n  def run(args):\n"
            "      return 1\n---\nT.\n",
            2,
            'tool "t" has unknown key "paramaters"; rename it (did you mean "parameters"?)',
        ),
        (
            ".harness/hooks/h.md",
            "---\nevent: tool.pre\npriorty: 5\nscript: |\n  def handle(event, payload):\n"
            "      return allow()\n---\nH.\n",
            3,
            'hook "h" has unknown key "priorty"; rename it (did you mean "priority"?)',
        ),
        (
            ".harness/plugins/p.md",
            "---\ntools:\n  - name: a\n    script: |\n      def run(args):\n          return 1\n"
            "hoks: []\n---\n",
            7,
            'bundle .harness/plugins/p.md has unknown key "hoks" (did you mean "hooks"?)',
        ),
        (
            ".harness/plugins/p.md",
            "---\ntools:\n  - name: a\n    timeout_msec: 5\n    script: |\n"
            "      def run(args):\n          return 1\n---\n",
            4,
            'tool "a" has unknown key "timeout_msec"; rename it (did you mean "timeout_ms"?)',
        ),
        (
            ".harness/servers/s.md",
            "---\ncommand: [x]\ntimeout_msec: 5\n---\n",
            3,
            'server "s" has unknown key "timeout_msec"; rename it (did you mean "timeout_ms"?)',
        ),
        (
            "harness.md",
            "---\ntool_policy:\n  deny: [run_command]\n---\nPrompt.\n",
            2,
            'harness.md has unknown key "tool_policy" (did you mean "tools_policy"?)',
        ),
        (
            "harness.md",
            "---\ntools_policy:\n  denied: [run_command]\n---\nPrompt.\n",
            3,
            'unknown config key tools_policy.denied (did you mean "deny"?)',
        ),
        (
            "harness.md",
            "---\nlimits:\n  max_output: 5\n---\nPrompt.\n",
            3,
            'unknown config key limits.max_output (did you mean "max_output_bytes"?)',
        ),
    ],
)
def test_a_misspelt_key_is_an_error(
    tmp_path: Path, rel: str, text: str, line: int, want: str
) -> None:
    write(tmp_path, {rel: text})
    found = errors(tmp_path)
    assert any(p == rel and n == line and want in m for p, n, _c, m in found), found
    code, out = validate(tmp_path)
    assert code == 1, out
    assert f"{rel}:{line}:" in out and want in out, out


def test_a_misspelt_deny_list_denies_nothing_so_it_must_not_validate(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "harness.md": "---\ntool_policy: {deny: [t]}\n---\nPrompt.\n",
            ".harness/tools/t.md": TOOL,
        },
    )
    project = check_project(tmp_path)
    assert project.config.tools_policy.deny == ()  # what would have run: nothing denied
    assert not project.ok
    # Every command that loads the project refuses it, naming the key to write.
    result = CliRunner().invoke(cli, ["call", "t", '{"path": "a"}', "--root", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert 'did you mean "tools_policy"?' in result.output


def test_own_metadata_is_allowed_with_x_prefix_or_extensions(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "harness.md": "---\nx-team: infra\nextensions: {owner: ops, ticket: 12}\n"
            "limits: {x-note: raised for CI, max_output_bytes: 1000}\n"
            "tools:\n  - name: inline\n    x-reviewed: true\n    script: |\n"
            "      def run(args):\n          return 1\n---\nPrompt.\n",
            ".harness/tools/t.md": TOOL.replace("---\nparameters", "---\nx-owner: me\nparameters"),
            ".harness/hooks/h.md": HOOK.replace("---\nevent", "---\nextensions: {a: 1}\nevent"),
            ".harness/plugins/p.md": "---\nx-source: vendor\ntools:\n  - name: b\n"
            "    extensions: {c: 2}\n    script: |\n      def run(args):\n"
            "          return 1\n---\n",
            ".harness/servers/s.md": "---\ncommand: [x]\nx-doc: https://example.invalid\n---\n",
            ".harness/tests/t.md": "---\nx-area: paths\ncases:\n  - call: t\n    x-why: smoke\n"
            "    args: {path: a}\n    expect: {ok: true}\n---\n",
            ".harness/evals/e.md": "---\nextensions: {suite: nightly}\ncases:\n"
            "  - name: e\n    x-owner: me\n    turns: [hi]\n    grade: {no_errors: true}\n---\n",
        },
    )
    code, out = validate(tmp_path)
    assert code == 0, out
    assert "unknown key" not in out, out
    assert check_project(tmp_path).config.limits.max_output_bytes == 1000


def test_extensions_must_be_a_mapping(tmp_path: Path) -> None:
    write(
        tmp_path,
        {".harness/tools/t.md": TOOL.replace("---\nparameters", "---\nextensions: 5\nparameters")},
    )
    found = errors(tmp_path)
    assert any(
        p == ".harness/tools/t.md" and n == 2 and "extensions must be a mapping" in m
        for p, n, _c, m in found
    ), found


# -- harness.yaml, the origin's file name --------------------------------------------------


@pytest.mark.parametrize("name", ["harness.yaml", "harness.yml"])
def test_harness_yaml_beside_no_harness_md_is_an_error(tmp_path: Path, name: str) -> None:
    write(tmp_path, {name: "tools_policy:\n  deny: [t]\n", ".harness/tools/t.md": TOOL})
    code, out = validate(tmp_path)
    assert code == 1, out
    assert f"{name}:1:1: error:" in out, out
    assert "harness.md" in out and "between --- lines" in out, out
    for args in (["list"], ["call", "t", '{"path": "a"}']):
        result = CliRunner().invoke(cli, [*args, "--root", str(tmp_path)])
        assert result.exit_code == 2, (args, result.output)
        assert f"{name}:1:1: error:" in result.output, (args, result.output)


def test_harness_yaml_is_found_from_a_subdirectory(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path, {"harness.yaml": "limits: {max_output_bytes: 10}\n", "src/a.txt": "a"})
    monkeypatch.chdir(tmp_path / "src")
    result = CliRunner().invoke(cli, ["validate"])
    assert result.exit_code == 1, result.output
    assert "harness.yaml:1:1: error:" in result.output, result.output


def test_harness_yaml_beside_harness_md_is_a_warning(tmp_path: Path) -> None:
    write(tmp_path, {"harness.yaml": "x: 1\n", "harness.md": "---\n---\nPrompt.\n"})
    code, out = validate(tmp_path)
    assert code == 0, out
    assert "harness.yaml:1:1: warning:" in out and "never read" in out, out


# -- default: against its own parameter schema ---------------------------------------------


def test_a_default_that_breaks_its_own_schema_is_an_error(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".harness/tools/t.md": """\
                ---
                parameters:
                  count: {type: integer, default: "3"}
                  mode:
                    type: string
                    enum: [fast, slow]
                    default: quick
                  depth: {type: integer, minimum: 1, default: 0}
                  fine: {type: integer, default: 3}
                  tags: {type: array, items: {type: string}, default: [a, 1]}
                script: |
                  def run(args):
                      return args
                ---
                T.
                """
        },
    )
    found = [(n, m) for p, n, c, m in errors(tmp_path) if c == "parameter-default-invalid"]
    assert [n for n, _ in found] == [3, 7, 8, 10], found
    text = " | ".join(m for _, m in found)
    assert 'tool "t" parameter "count" default "3" does not match its own schema' in text
    assert 'parameter "mode" default "quick"' in text
    assert 'parameter "depth" default 0' in text
    assert "every call that leaves it out would fail" in text
    code, out = validate(tmp_path)
    assert code == 1 and ".harness/tools/t.md:3:" in out, out


# -- test and eval files -------------------------------------------------------------------


def test_a_misspelt_expect_in_a_test_case_is_an_error(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".harness/tools/t.md": TOOL,
            ".harness/tests/t.md": """\
                ---
                cases:
                  - call: t
                    args: {path: a}
                    exepct: {ok: false}
                ---
                """,
        },
    )
    code, out = validate(tmp_path)
    assert code == 1, out
    assert (
        '.harness/tests/t.md:5:5: error: unknown key "exepct" in case 1 (did you mean "expect"?)'
    ) in out, out
    result = CliRunner().invoke(cli, ["test", "--root", str(tmp_path)])
    assert result.exit_code == 2, result.output  # not run: it would pass, checking nothing
    assert 'unknown key "exepct"' in result.output


def test_a_misspelt_key_in_an_eval_file_is_an_error(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".harness/tools/t.md": TOOL,
            ".harness/evals/e.md": """\
                ---
                cases:
                  - name: e
                    turns: [hi]
                    grades: {no_errors: true}
                    grade: {no_errors: true}
                ---
                """,
        },
    )
    code, out = validate(tmp_path)
    assert code == 1, out
    assert (
        '.harness/evals/e.md:5:5: error: unknown key "grades" in eval case 1 '
        '(did you mean "grade"?)'
    ) in out, out


# -- --strict keeps its meaning for the remaining style warnings ------------------------------


def test_strict_still_turns_the_remaining_unknown_key_warnings_into_errors(
    tmp_path: Path,
) -> None:
    write(
        tmp_path,
        {
            ".harness/tools/t.md": TOOL.replace(
                "path: {type: string, required: true}",
                "path: {type: string, required: true, minLenght: 1}",
            )
        },
    )
    code, out = validate(tmp_path)
    assert code == 0 and "warning:" in out and "[parameter-unknown-key]" in out, out
    code, out = validate(tmp_path, "--strict")
    assert code == 1 and "error:" in out and "[parameter-unknown-key]" in out, out


# -- the repository's own files still validate -----------------------------------------------


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("root", [REPO, REPO / "harness" / "starter"])
def test_the_repository_and_the_starter_validate(root: Path) -> None:
    code, out = validate(root)
    assert code == 0, out


# -- ai-harness's typed metadata: not a typo, and nothing reads it in either tool -----------


def test_origin_metadata_keys_warn_but_behavioural_ones_are_errors(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            ".harness/plugins/team.md": "---\nname: team-tools\ntype: plugin\nversion: 1.2.0\n"
            "author: ops\ntags: [shell]\ntools:\n  - name: a\n    script: |\n"
            "      def run(args):\n          return 1\n---\nTeam tools.\n",
            ".harness/plugins/gated.md": "---\ntype: plugin\ncondition: 'turn > 2'\n"
            "depends_on: [team-tools]\nhooks: []\n---\n",
        },
    )
    problems = check_project(tmp_path).problems
    team = [(p.line, p.severity) for p in problems if p.path.endswith("team.md")]
    assert team == [(2, "warning"), (3, "warning"), (4, "warning"), (5, "warning"), (6, "warning")]
    warn = next(p for p in problems if p.path.endswith("team.md") and p.line == 4)
    assert 'ai-harness metadata "version"' in warn.message and "x-version" in warn.message
    gated = [(p.line, p.severity) for p in problems if p.path.endswith("gated.md")]
    assert gated == [(2, "warning"), (3, "error"), (4, "error")], problems
    code, out = validate(tmp_path, "--strict")
    assert code == 1 and "team.md:4:1: error:" in out, out


def test_every_settings_section_of_config_is_a_known_key() -> None:
    # Unknown keys are errors, so a section added to Config must be known without a
    # second hand-kept list: KNOWN_KEYS, the parser and the schema derive from Config.
    from dataclasses import fields, is_dataclass
    from typing import get_type_hints

    from harness.artifacts.published import frontmatter_schema
    from harness.config import KNOWN_KEYS, Config

    hints = get_type_hints(Config)
    sections = {f.name for f in fields(Config) if is_dataclass(hints[f.name])}
    assert sections and sections <= set(KNOWN_KEYS)
    assert sections <= set(frontmatter_schema("harness")["properties"])
