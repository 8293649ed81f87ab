"""Declaring upstream servers: parsing, layering, duplicates, problems with file and line.
All offline: nothing here starts a server."""

from __future__ import annotations

from pathlib import Path

from harness.artifacts.servers import DEFAULT_RETRY, RetrySpec
from harness.validation import check_project


def project(root: Path, harness_md: str = "", files: dict[str, str] | None = None):
    root.mkdir(parents=True, exist_ok=True)
    if harness_md:
        (root / "harness.md").write_text(harness_md)
    for name, text in (files or {}).items():
        folder = root / ".harness" / "servers"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return check_project(root)


def codes(p) -> list[tuple[str, int, str, str]]:
    return [(x.path, x.line, x.severity, x.code) for x in p.problems]


def test_file_declaration(tmp_path: Path) -> None:
    p = project(
        tmp_path,
        files={
            "git.md": (
                "---\ncommand: [uvx, mcp-server-git, --repository, .]\n"
                "env: {GIT_TOKEN: '${env:TOK}'}\n"
                "cwd: sub\ntools: {allow: ['git_*'], deny: [git_push]}\ntimeout_ms: 5000\n"
                "loading: eager\nretry: {max_attempts: 3}\nper_tool: {git_log: {timeout_ms: 100}}\n"
                "---\nThe git server.\n"
            )
        },
    )
    assert p.ok, p.problems
    spec = p.servers["git"]
    assert spec.transport == "stdio" and spec.command[:2] == ("uvx", "mcp-server-git")
    assert spec.env == {"GIT_TOKEN": "${env:TOK}"} and spec.cwd == "sub"
    assert spec.allow == ("git_*",) and spec.deny == ("git_push",)
    assert spec.loading == "eager" and spec.description == "The git server."
    assert spec.timeout_for("git_log") == 100 and spec.timeout_for("git_status") == 5000
    assert spec.source.path == ".harness/servers/git.md"


def test_inline_declaration_and_http(tmp_path: Path) -> None:
    p = project(
        tmp_path,
        "---\nmcp_servers:\n  remote:\n    url: https://mcp.example.com/mcp\n"
        "    headers: {Authorization: 'Bearer ${env:REMOTE_TOKEN}'}\n---\n",
    )
    assert p.ok, p.problems
    spec = p.servers["remote"]
    assert spec.transport == "http" and spec.headers["Authorization"].startswith("Bearer ")
    assert spec.source.path == "harness.md" and spec.source.line == 3


def test_a_server_declared_twice_is_an_error_naming_both(tmp_path: Path) -> None:
    p = project(
        tmp_path,
        "---\nmcp_servers:\n  git: {command: [a]}\n---\n",
        {"git.md": "---\ncommand: [b]\n---\n"},
    )
    (dup,) = [x for x in p.problems if x.code == "duplicate-name"]
    assert dup.path == ".harness/servers/git.md"
    assert dup.message == (
        'server "git" is declared more than once: in harness.md:3 and in '
        ".harness/servers/git.md:1; remove or rename one"
    )


def test_bad_declarations_name_file_and_line(tmp_path: Path) -> None:
    p = project(
        tmp_path,
        files={
            "both.md": "---\ncommand: [x]\nurl: http://h/mcp\n---\n",
            "none.md": "---\ntimeout_msec: 5\n---\n",
            "hdr.md": "---\ncommand: [x]\nheaders: {A: b}\n---\n",
            "bad.name.md": "---\ncommand: [x]\n---\n",
            "retry.md": "---\ncommand: [x]\nper_tool:\n  t:\n    retry: {retry_on: [5xx, nope]}\n"
            "    timeout: 3\n---\n",
        },
    )
    got = codes(p)
    assert (".harness/servers/both.md", 3, "error", "field-invalid") in got
    assert (".harness/servers/none.md", 1, "error", "server-transport") in got
    assert (".harness/servers/none.md", 2, "error", "unknown-key") in got
    assert (".harness/servers/hdr.md", 3, "error", "field-invalid") in got
    assert (".harness/servers/bad.name.md", 1, "error", "name-invalid") in got
    assert (".harness/servers/retry.md", 5, "error", "field-invalid") in got
    assert (".harness/servers/retry.md", 6, "error", "field-invalid") in got
    msgs = " | ".join(x.message for x in p.problems)
    assert 'unknown key "timeout_msec"; rename it (did you mean "timeout_ms"?)' in msgs
    assert 'per_tool.t.retry.retry_on has unknown failure class "nope"' in msgs


def test_validate_is_offline(tmp_path: Path) -> None:
    # The program does not exist: only --connect (or a call) would find out.
    p = project(tmp_path, "---\nmcp_servers:\n  x: {command: [no-such-program-xyz]}\n---\n")
    assert p.ok and not p.problems


def test_retry_fields_left_out_keep_their_own_default() -> None:
    server = RetrySpec(max_attempts=4, retry_on=("timeout",))
    tool = RetrySpec(backoff_ms=5)
    merged = tool.over(server).over(DEFAULT_RETRY)
    assert merged == RetrySpec(
        max_attempts=4, retry_on=("timeout",), backoff_ms=5, retry_non_idempotent=False
    )
    assert RetrySpec().over(DEFAULT_RETRY) == DEFAULT_RETRY
    assert DEFAULT_RETRY.max_attempts == 1  # no retry unless asked for


def test_per_tool_retry_over_server_retry(tmp_path: Path) -> None:
    p = project(
        tmp_path,
        files={
            "s.md": (
                "---\ncommand: [x]\nretry: {max_attempts: 3, backoff_ms: 50}\n"
                "per_tool: {t: {retry: {retry_on: [timeout]}}}\n---\n"
            )
        },
    )
    spec = p.servers["s"]
    assert spec.retry_for("t") == RetrySpec(
        max_attempts=3, retry_on=("timeout",), backoff_ms=50, retry_non_idempotent=False
    )
    assert spec.retry_for("other").retry_on == ("transient", "5xx")


def test_published_server_schema_agrees_with_validate(tmp_path: Path) -> None:
    import json

    import jsonschema_rs

    import harness
    from harness.artifacts.frontmatter import split
    from harness.artifacts.published import frontmatter_schema

    schemas = Path(harness.__file__).parent / "schemas"
    published = json.loads((schemas / "server.schema.json").read_text())
    assert published == frontmatter_schema("server")
    jsonschema_rs.meta.validate(published)
    server = jsonschema_rs.validator_for(published)
    good = (
        "---\ncommand: [x, --flag]\nenv: {A: '${env:B}'}\nretry: {max_attempts: 2, "
        "retry_on: [timeout]}\nsandbox: off\nper_tool: {t: {timeout_ms: 5}}\n---\n"
    )
    bad = "---\ncommand: [x]\nretry: {retry_on: [flaky]}\nloading: lazy\n---\n"
    assert project(tmp_path / "g", files={"s.md": good}).ok
    assert not project(tmp_path / "b", files={"s.md": bad}).ok
    assert server.is_valid(split(good.encode(), "s.md")[0])
    assert not server.is_valid(split(bad.encode(), "s.md")[0])
    whole = jsonschema_rs.validator_for(json.loads((schemas / "harness.schema.json").read_text()))
    assert whole.is_valid({"mcp_servers": {"git": {"command": ["mcp-server-git"]}}})
    assert not whole.is_valid({"mcp_servers": {"git": {"command": ["x"], "loading": "lazy"}}})
