"""A session.start block refuses the session (issue 23, "decisions are never ignored"):
every call and run in it fails with the hook's reason — through the Python API,
`harness call`, `harness run` and each client of `harness serve`."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from click.testing import CliRunner

import harness
from harness.agent import AgentError
from harness.cli.main import cli

sys.path.insert(0, str(Path(__file__).parents[1] / "serve"))
from serve_helpers import stdio_session, tool_text  # noqa: E402

from harness.testing import FakeModelServer, Reply  # noqa: E402

ECHO = (Path(__file__).parent / "tools" / "echo.md").read_text()
FREEZE = """---
event: session.start
{extra}script: |
  def handle(event, payload):
      if fs.exists("FREEZE"):
          return block("the repository is frozen")
      return allow()
---
Refuse every session while FREEZE exists.
"""
REASON = 'session refused: blocked by hook "freeze": the repository is frozen'


def project(root: Path, *, frozen: bool = True, extra: str = "") -> Path:
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / ".harness" / "hooks").mkdir(parents=True)
    (root / ".harness" / "tools" / "echo.md").write_text(ECHO)
    (root / ".harness" / "hooks" / "freeze.md").write_text(FREEZE.format(extra=extra))
    (root / "harness.md").write_text(
        "---\nmodel: {provider: openai, name: fake-model, api_key_env: SR_KEY}\n"
        "runtime: {isolation: inprocess}\n---\nYou help.\n"
    )
    if frozen:
        (root / "FREEZE").write_text("")
    return root


def test_every_call_of_a_refused_session_fails_with_the_reason(tmp_path: Path) -> None:
    root = project(tmp_path)
    with harness.load(root) as h:
        first = h.call("echo", {"text": "hi"})
        with h.session() as session:
            again = [session.call("echo", {"text": "hi"}) for _ in range(2)]
            many = session.call_many(
                [
                    harness.ToolCall(name="echo", arguments={"text": "a"}),
                    harness.ToolCall(name="echo", arguments={"text": "b"}),
                ]
            )
        for result in (first, *again, *many):
            assert result.is_error and result.text == REASON and result.blocked_by == "freeze"
        (root / "FREEZE").unlink()
        with h.session() as session:  # the hook decides again for each new session
            assert session.call("echo", {"text": "hi"}).text == "hi"


def test_a_failing_session_start_hook_refuses_unless_it_allows_errors(tmp_path: Path) -> None:
    broken = """---
event: session.start
{extra}script: |
  def handle(event, payload):
      fail("cannot check the freeze")
---
x
"""
    for extra, refused in (("", True), ("on_error: allow\n", False)):
        root = tmp_path / str(refused)
        project(root, frozen=False)
        (root / ".harness" / "hooks" / "freeze.md").write_text(broken.format(extra=extra))
        with harness.load(root) as h:
            result = h.call("echo", {"text": "hi"})
        assert result.is_error is refused, result
        if refused:
            assert result.text.startswith('session refused: hook "freeze" failed')


def test_harness_call_and_harness_run_fail_with_the_reason(tmp_path: Path) -> None:
    root = project(tmp_path)
    runner = CliRunner()
    called = runner.invoke(cli, ["call", "echo", '{"text": "hi"}', "--root", str(root)])
    assert called.exit_code != 0 and REASON in called.output
    with FakeModelServer("openai", [Reply(text="the model must not be asked")]) as server:
        ran = runner.invoke(
            cli,
            ["run", "hello", "--root", str(root), "--base-url", server.base_url],
            env={"SR_KEY": "k"},
        )
        assert server.requests == []
    assert ran.exit_code != 0 and REASON in ran.output
    assert "the model must not be asked" not in ran.stdout


def test_harness_run_python_api_raises(tmp_path: Path) -> None:
    root = project(tmp_path)
    with FakeModelServer("openai", [Reply(text="no")]) as server, harness.load(root) as h:
        try:
            h.run("hello", base_url=server.base_url, environ={"SR_KEY": "k"})
        except AgentError as exc:
            assert REASON in str(exc)
        else:
            raise AssertionError("the run of a refused session went on")
        assert server.requests == []


def test_each_serve_client_session_is_refused(tmp_path: Path) -> None:
    root = project(tmp_path / "proj")

    async def go() -> None:
        async with stdio_session(root) as s:
            result = await s.call_tool("echo", {"text": "hi"})
            assert result.is_error and REASON in tool_text(result)

    anyio.run(go)
