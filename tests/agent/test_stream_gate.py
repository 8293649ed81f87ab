"""Nothing a hook can refuse reaches the user first (issue 23 class 5).

``harness run`` streamed model text to stdout (and ``on_text``) as it arrived, before the
``completion.post``, ``agent.stop`` and ``turn.end`` hooks ran: a reply blocked for a
password was printed, then the error; a ``turn.end`` redaction changed only the returned
text; a draft ``agent.stop`` rejected was printed run together with the next answer.

Each test reads the stdout of a real ``harness run`` process talking to a fake model
server in each provider's wire format (text streamed in small deltas).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from harness.testing import FakeModelServer, Reply, ToolUse

PROVIDERS = ["openai", "anthropic"]

ADD = """---
parameters:
  a: {type: integer, required: true}
  b: {type: integer, required: true}
script: |
  def run(args):
      return args["a"] + args["b"]
---
Add two integers.
"""

NO_PASSWORDS = """---
event: completion.post
script: |
  def handle(event, payload):
      if "hunter2" in payload["text"]:
          return block("the reply contains a password")
      return allow()
---
Refuses replies that contain a password.
"""

REDACT = """---
event: turn.end
script: |
  def handle(event, payload):
      return modify({"response": payload["response"].replace("hunter2", "[REDACTED]")})
---
Redacts the password from the answer.
"""

FINISH = """---
event: agent.stop
script: |
  def handle(event, payload):
      if "DONE" not in payload["response"]:
          return block("finish the job and say DONE")
      return allow()
---
Keeps the agent going until it says DONE.
"""

COUNT_CALLS = """---
event: tool.pre
script: |
  def handle(event, payload):
      return allow()
---
Not a hook that can refuse text.
"""


def project(root: Path, provider: str, hooks: dict[str, str]) -> Path:
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / ".harness" / "tools" / "add.md").write_text(ADD)
    if hooks:
        (root / ".harness" / "hooks").mkdir(parents=True)
    for name, text in hooks.items():
        (root / ".harness" / "hooks" / f"{name}.md").write_text(text)
    (root / "harness.md").write_text(
        f"---\nmodel:\n  provider: {provider}\n  name: fake-model\n"
        "runtime:\n  isolation: inprocess\n---\nYou help.\n"
    )
    return root


def harness_run(root: Path, replies: list[Reply], provider: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "harness"
    with FakeModelServer(provider, replies) as server:
        return subprocess.run(
            [str(exe), "run", "go", "--root", str(root), "--base-url", server.base_url],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": os.environ.get("PATH", "")},  # loopback: no key needed
        )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_reply_completion_post_blocks_is_never_printed(tmp_path: Path, provider: str) -> None:
    root = project(tmp_path, provider, {"no_passwords": NO_PASSWORDS})
    proc = harness_run(root, [Reply(text="The password is hunter2, keep it.", chunk=3)], provider)
    assert proc.returncode != 0, proc.stdout
    assert "hunter2" not in proc.stdout, proc.stdout
    assert proc.stdout == "", proc.stdout
    assert "the reply contains a password" in proc.stderr, proc.stderr


@pytest.mark.parametrize("provider", PROVIDERS)
def test_what_turn_end_redacts_is_what_is_printed(tmp_path: Path, provider: str) -> None:
    root = project(tmp_path, provider, {"redact": REDACT})
    replies = [
        Reply(text="Adding. ", chunk=2, tools=[ToolUse("add", {"a": 1, "b": 2})]),
        Reply(text="The password is hunter2.", chunk=3),
    ]
    proc = harness_run(root, replies, provider)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Adding. \nThe password is [REDACTED].\n", proc.stdout
    assert '[tool] add {"a": 1, "b": 2} -> ok: 3' in proc.stderr


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_draft_agent_stop_rejects_is_never_shown(tmp_path: Path, provider: str) -> None:
    root = project(tmp_path, provider, {"finish": FINISH})
    replies = [
        Reply(text="Half an answer.", chunk=4),
        Reply(text="The whole answer. DONE", chunk=4),
    ]
    proc = harness_run(root, replies, provider)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "The whole answer. DONE\n", proc.stdout


@pytest.mark.parametrize("provider", PROVIDERS)
def test_without_such_hooks_text_streams_as_it_arrives(tmp_path: Path, provider: str) -> None:
    root = project(tmp_path, provider, {"count_calls": COUNT_CALLS})
    replies = [Reply(text="Hello there, world", chunk=5)]
    proc = harness_run(root, replies, provider)
    assert proc.returncode == 0 and proc.stdout == "Hello there, world\n", proc.stderr
    # on_text gets the deltas as they arrive (no hook can refuse them) ...
    seen: list[str] = []
    with FakeModelServer(provider, replies) as server, harness.load(root) as h:
        h.run("go", base_url=server.base_url, on_text=seen.append, environ={})
    assert seen == ["Hello", " ther", "e, wo", "rld"], seen


@pytest.mark.parametrize("provider", PROVIDERS)
def test_on_text_gets_only_what_the_hooks_allowed(tmp_path: Path, provider: str) -> None:
    # ... and with a hook that can refuse text, only what the hooks let through.
    root = project(tmp_path, provider, {"redact": REDACT, "finish": FINISH})
    replies = [
        Reply(text="Step one. ", chunk=2, tools=[ToolUse("add", {"a": 1, "b": 2})]),
        Reply(text="hunter2 draft", chunk=2),
        Reply(text="hunter2 is it. DONE", chunk=2),
    ]
    seen: list[str] = []
    with FakeModelServer(provider, replies) as server, harness.load(root) as h:
        result = h.run("go", base_url=server.base_url, on_text=seen.append, environ={})
    assert seen == ["Step one. ", "[REDACTED] is it. DONE"], seen
    assert result.text == "[REDACTED] is it. DONE"
