"""The guard checker's rules one by one (harness/guards): narrowing, helpers, positions,
what counts as a defined tool, and where it only warns."""

from __future__ import annotations

import textwrap
from pathlib import Path

import harness

RUN = """---
parameters:
  command: {type: string, required: true}
script: |
  def run(args):
      if args["command"] == "x":
          return "text"
      return {"ok": True}
---
Returns a text or an object.
"""


def check(tmp: Path, hook: str, *, tools: dict[str, str] | None = None, md: str = "") -> list:
    root = tmp / "p"
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / ".harness" / "hooks").mkdir(parents=True)
    (root / "harness.md").write_text(f"---\n{md}---\nx\n")
    for name, text in (tools or {"run_command": RUN}).items():
        (root / ".harness" / "tools" / f"{name}.md").write_text(text)
    (root / ".harness" / "hooks" / "h.md").write_text(textwrap.dedent(hook).lstrip())
    return [p for p in harness.check(root) if p.path.startswith(".harness/hooks/")]


def codes(found: list) -> list[tuple[int, int, str, str]]:
    return [(p.line, p.column, p.code, p.severity) for p in found]


def hook(event: str, body: str, when: str = "") -> str:
    script = textwrap.indent(textwrap.dedent(body).strip("\n"), "  ")
    w = f"when: {when}\n" if when else ""
    return f"---\nevent: {event}\n{w}script: |\n{script}\n---\nh\n"


def test_a_type_check_narrows_a_result_of_either_shape(tmp_path: Path) -> None:
    unchecked = """
    def handle(event, payload):
        if "secret" in payload["result"]:
            return block("secret")
        return allow()
    """
    narrowed = """
    def handle(event, payload):
        r = payload["result"]
        if type(r) != "string":
            return allow()
        if "secret" in r:
            return block("secret")
        return allow()
    """
    when = 'payload["name"] == "run_command"'
    assert codes(check(tmp_path / "a", hook("tool.post", unchecked, when))) == [
        (6, 10, "guard-shape", "error")
    ]
    assert check(tmp_path / "b", hook("tool.post", narrowed, when)) == []


def test_if_narrows_none_away_and_keys_are_still_checked(tmp_path: Path) -> None:
    body = """
    def handle(event, payload):
        m = re.search("rm", payload["arguments"]["command"])
        if m:
            return block(m["match"] + str(m["groups"]) + m["nmed"])
        return allow()
    """
    found = check(tmp_path, hook("tool.pre", body, 'payload["name"] == "run_command"'))
    assert codes(found) == [(8, 56, "guard-key-unknown", "error")]
    assert '"nmed"' in found[0].message and 'did you mean "named"' in found[0].message


def test_helpers_are_followed_with_the_payload_they_are_given(tmp_path: Path) -> None:
    body = """
    def mentions(text, word):
        return word in text
    def handle(event, payload):
        if mentions(payload, "forbidden"):
            return block("no")
        if mentions(payload["message"], "forbidden"):
            return block("no")
        return allow()
    """
    found = check(tmp_path, hook("turn.start", body))
    assert codes(found) == [(5, 14, "guard-shape", "error")]  # in the helper, once
    assert 'payload["message"]' in found[0].message


def test_when_problems_point_into_the_when_line(tmp_path: Path) -> None:
    found = check(
        tmp_path,
        hook(
            "tool.pre",
            "def handle(event, payload):\n    return block('x')",
            'payload["name"] == "run_comand"',
        ),
    )
    assert codes(found) == [(3, 26, "guard-tool-unknown", "error")]
    assert found[0].message.startswith('hook "h" when: compares payload["name"] with "run_comand"')
    assert 'did you mean "run_command"' in found[0].message


def test_a_declared_server_defines_its_tools_without_running(tmp_path: Path) -> None:
    body = "def handle(event, payload):\n    return block('no')"
    for name, expected in (
        ("gh.create_issue", []),
        ("gh_create_issue", []),
        ("gx.create", ["guard-tool-unknown"]),
    ):
        root = tmp_path / name
        (root / "p" / ".harness" / "servers").mkdir(parents=True)
        (root / "p" / ".harness" / "servers" / "gh.md").write_text(
            "---\ncommand: [never-started-server]\n---\nGitHub.\n"
        )
        found = check(root, hook("tool.pre", body, f'payload["name"] == "{name}"'))
        assert [p.code for p in found if p.severity == "error"] == expected, found


def test_with_meta_enabled_an_unknown_name_is_a_warning(tmp_path: Path) -> None:
    body = "def handle(event, payload):\n    return block('no')"
    found = check(
        tmp_path,
        hook("tool.pre", body, 'payload["name"] == "made_at_run_time"'),
        md="meta: {enabled: true}\n",
    )
    assert codes(found) == [(3, 26, "guard-tool-unknown", "warning")]


def test_a_result_of_unknown_type_is_a_warning_naming_content(tmp_path: Path) -> None:
    bound = "---\nparameters:\n  q: {type: string}\n---\nA Python-bound tool.\n"
    body = """
    def handle(event, payload):
        if "ghp_" in payload["result"]:
            return block("token")
        return allow()
    """
    found = check(
        tmp_path,
        hook("tool.post", body, 'payload["name"] == "py"'),
        tools={"py": bound},
    )
    assert codes(found) == [(6, 10, "guard-shape-unknown", "warning")]
    assert 'payload["content"]' in found[0].message


def test_a_custom_event_nobody_emits_from_a_script_is_not_guessed(tmp_path: Path) -> None:
    body = """
    def handle(event, payload):
        if "prod" in payload:
            return block("no")
        return allow()
    """
    assert check(tmp_path, hook("custom.fired_from_python", body)) == []


def test_clean_guards_stay_clean(tmp_path: Path) -> None:
    body = """
    ALLOWED = ["ls", "pytest"]
    def handle(event, payload):
        args = payload["arguments"]
        argv = args.get("command", "").split(" ")
        program = argv[0].split("/")[-1] if argv else ""
        if program not in ALLOWED:
            return block("only %s may run here" % ", ".join(ALLOWED))
        if len(args["command"]) > 1000 or "command" not in args:
            return block("too long")
        return allow()
    """
    assert check(tmp_path, hook("tool.pre", body, 'payload["name"] == "run_command"')) == []


def test_a_key_test_on_an_object_result_is_allowed_a_text_search_is_not(tmp_path: Path) -> None:
    report = (Path(__file__).parent / "tools" / "report.md").read_text()
    key = """
    def handle(event, payload):
        if "text" in payload["result"]:
            return modify({"content": payload["result"]["text"]})
        return allow()
    """
    text = key.replace('"text" in', '"ghp_" in')
    when = 'payload["name"] == "report"'
    assert check(tmp_path / "a", hook("tool.post", key, when), tools={"report": report}) == []
    found = check(tmp_path / "b", hook("tool.post", text, when), tools={"report": report})
    assert codes(found) == [(6, 10, "guard-shape", "error")]


def test_tool_names_in_a_constant_list_are_checked_and_narrow(tmp_path: Path) -> None:
    body = """
    GUARDED = ["run_command", "run_comand"]
    def handle(event, payload):
        if payload["name"] in GUARDED:
            if "rm" in payload["arguments"].get("cmd", ""):
                return block("no")
        return allow()
    """
    found = check(tmp_path, hook("tool.pre", body))
    assert [(p.line, p.code) for p in found] == [
        (6, "guard-tool-unknown"),
        (7, "guard-argument-unknown"),
    ]
    assert '"run_comand" (did you mean "run_command"?)' in found[0].message
