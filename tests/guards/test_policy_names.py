"""``tools_policy`` entries that match no tool (issue 23): before, ``deny: [run_comand]``
validated clean and denied nothing; now validate names harness.md:line:column, the entry
and the tool it probably meant."""

from __future__ import annotations

import shutil
from pathlib import Path

import harness
from harness.plans import policy_allows
from harness.validation import check_project

TOOLS = Path(__file__).parent / "tools"


def project(tmp: Path, config: str) -> Path:
    root = tmp / "p"
    shutil.copytree(TOOLS, root / ".harness" / "tools")
    (root / "harness.md").write_text(
        f"---\nruntime: {{isolation: inprocess}}\n{config}---\nYou help.\n"
    )
    return root


def policy(root: Path) -> list[harness.Problem]:
    return [p for p in harness.check(root) if p.code == "policy-unknown-tool"]


def test_a_misspelt_deny_is_an_error_at_its_position(tmp_path: Path) -> None:
    root = project(tmp_path, 'tools_policy: {deny: [run_comand, "wrte*"]}\n')
    # What the entry does at run time: nothing; the policy the pipeline applies
    # (plans.policy_allows) lets run_command through.
    config = check_project(root).config
    assert policy_allows(config, "run_command") and policy_allows(config, "write_file")
    found = policy(root)
    assert [(p.line, p.column, p.severity) for p in found] == [(3, 23, "error"), (3, 35, "error")]
    assert '"run_comand" matches no tool' in found[0].message
    assert 'did you mean "run_command"' in found[0].message
    assert 'did you mean "writ*", matching "write_file"' in found[1].message
    assert found[0].path == "harness.md"


def test_allow_entries_are_checked_too(tmp_path: Path) -> None:
    root = project(tmp_path, 'tools_policy: {allow: ["echo", "reprt"]}\n')
    found = policy(root)
    assert (
        len(found) == 1 and '"reprt"' in found[0].message and "allows nothing" in (found[0].message)
    )


def test_names_from_every_source_count(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        "mcp_servers:\n  time: {command: [mcp-server-time]}\n"
        'tools_policy: {deny: [run_command, "write_*", time_now, "time.*", read_output, "*"]}\n',
    )
    assert policy(root) == []


def test_with_meta_enabled_it_is_a_warning(tmp_path: Path) -> None:
    root = project(tmp_path, "meta: {enabled: true}\ntools_policy: {deny: [made_later]}\n")
    found = policy(root)
    assert [p.severity for p in found] == ["warning"]
    assert "meta.enabled may register it" in found[0].message
