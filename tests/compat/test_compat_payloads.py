"""ai-harness payload keys and decisions on origin-style artifacts (COMPAT §1.2, §2)."""

from __future__ import annotations

from collections.abc import Callable

import harness

Make = Callable[..., harness.Harness]

RUN_COMMAND = """
---
parameters:
  command: {type: string, description: "Shell command", required: true}
script: |
  def run(args):
      return "would run: " + args["command"]
---
Run a shell command.
"""

# As shipped in ai-harness's governed-agent example: reads payload.get("args", {}).
GUARD = """
---
event: tool.pre
priority: 10
script: |
  DANGEROUS = ["rm -rf /", "mkfs", "dd if=", ":(){ :|:& };:"]

  def handle(event, payload):
      if payload.get("name") != "run_command":
          return allow()
      args = payload.get("args", {})
      cmd = args.get("command", "")
      for pattern in DANGEROUS:
          if pattern in cmd:
              return block("dangerous command blocked: " + pattern)
      return allow()
---
Blocks dangerous shell commands.
"""


def test_a_guard_on_args_really_blocks_mkfs(origin: Make) -> None:
    h = origin(
        {
            ".harness/tools/run_command.md": RUN_COMMAND,
            ".harness/hooks/block_dangerous_commands.md": GUARD,
        }
    )
    r = h.call("run_command", {"command": "mkfs.ext4 /dev/sda1"})
    assert r.is_error and r.blocked_by == "block_dangerous_commands"
    assert r.error == (
        'blocked by hook "block_dangerous_commands": dangerous command blocked: mkfs'
    )
    ok = h.call("run_command", {"command": "ls -la"})
    assert not ok.is_error and ok.value == "would run: ls -la"


def test_the_guard_blocks_under_process_isolation_too(origin: Make) -> None:
    h = origin(
        {
            "harness.md": "---\nruntime: {isolation: process}\n---\n",
            ".harness/tools/run_command.md": RUN_COMMAND,
            ".harness/hooks/block_dangerous_commands.md": GUARD,
        }
    )
    assert (
        h.call("run_command", {"command": "dd if=/dev/zero of=x"}).blocked_by
        == "block_dangerous_commands"
    )


def _pre(body: str) -> str:
    lines = "\n".join("      " + ln for ln in body.strip().splitlines())
    return f"---\nevent: tool.pre\nscript: |\n  def handle(event, payload):\n{lines}\n---\nh\n"


def _post(body: str) -> str:
    return _pre(body).replace("event: tool.pre", "event: tool.post")


def test_modify_of_args_changes_the_call_and_is_validated(origin: Make) -> None:
    h = origin(
        {
            ".harness/tools/run_command.md": RUN_COMMAND,
            ".harness/hooks/quote.md": _pre(
                'a = dict(payload["args"])\na["command"] = a["command"] + " --dry-run"\n'
                'return modify({"args": a})'
            ),
            ".harness/hooks/see.md": _pre(
                # runs after "quote" (name order): both names carry the new value
                'if payload["args"] != payload["arguments"]:\n'
                '    return block("out of sync")\nreturn None'
            ).replace("event: tool.pre", "event: tool.pre\npriority: 200"),
        }
    )
    assert h.call("run_command", {"command": "make"}).value == "would run: make --dry-run"


def test_modify_of_args_to_an_invalid_value_fails_closed(origin: Make) -> None:
    h = origin(
        {
            ".harness/tools/run_command.md": RUN_COMMAND,
            ".harness/hooks/breaker.md": _pre('return modify({"args": {"command": 7}})'),
        }
    )
    r = h.call("run_command", {"command": "make"})
    assert r.blocked_by == "breaker"
    assert "modified arguments are invalid" in (r.error or "")
    assert '$.command: 7 is not of type "string"' in (r.error or "")


def test_modify_of_args_and_arguments_to_different_values_fails(origin: Make) -> None:
    h = origin(
        {
            ".harness/tools/run_command.md": RUN_COMMAND,
            ".harness/hooks/both.md": _pre(
                'return modify({"args": {"command": "a"}, "arguments": {"command": "b"}})'
            ),
        }
    )
    r = h.call("run_command", {"command": "make"})
    assert r.blocked_by == "both" and "different values" in (r.error or "")


def test_post_hooks_see_call_id_and_content(origin: Make) -> None:
    h = origin(
        {
            ".harness/tools/run_command.md": RUN_COMMAND,
            ".harness/hooks/show.md": _post(
                'return block(payload["call_id"] + "|" + payload["content"])'
            ),
        }
    )
    r = h.call("run_command", {"command": "ls"}, id="c-42")
    assert r.error == 'result withheld by hook "show": c-42|would run: ls'


def test_a_post_hook_rewriting_content_changes_what_the_model_sees(origin: Make) -> None:
    # ai-harness's detect_secrets style: redact in payload["content"].
    h = origin(
        {
            ".harness/tools/run_command.md": RUN_COMMAND,
            ".harness/hooks/detect_secrets.md": _post(
                'text = payload.get("content", "")\n'
                'if "sk-" in text:\n'
                '    return modify({"content": re.sub("sk-[A-Za-z0-9]+", "[REDACTED]",'
                " text)})\n"
                "return allow()"
            ),
        }
    )
    r = h.call("run_command", {"command": "echo sk-abc123"})
    assert not r.is_error and r.text == "would run: echo [REDACTED]"


def test_dict_decisions_as_ai_harness_reads_them(origin: Make) -> None:
    cases = {
        '{"action": "continue"}': "would run: x",
        '{"reason": "no action means allow"}': "would run: x",
        '{"action": "allow", "request": {"task": "ignored extra key"}}': "would run: x",
        # modify without "payload": the dict itself is the new payload
        '{"action": "modify", "args": {"command": "y"}}': "would run: y",
    }
    for i, (decision, want) in enumerate(cases.items()):
        h = origin(
            {
                ".harness/tools/run_command.md": RUN_COMMAND,
                ".harness/hooks/d.md": _pre(f"return {decision}"),
            },
            sub=f"d{i}",
        )
        r = h.call("run_command", {"command": "x"})
        assert (r.is_error, r.text) == (False, want), decision


def test_unknown_actions_still_fail_closed(origin: Make) -> None:
    h = origin(
        {
            ".harness/tools/run_command.md": RUN_COMMAND,
            # Not a literal: validate refuses a literal unknown action (guard-decision-form),
            # so the run-time refusal is reached with an action computed at run time.
            ".harness/hooks/d.md": _pre(
                'action = "dele" + "gate"\nreturn {"action": action, "request": {}}'
            ),
        }
    )
    r = h.call("run_command", {"command": "x"})
    assert r.blocked_by == "d" and "invalid decision" in (r.error or "")
