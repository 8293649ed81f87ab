"""Agent-loop hook events through the fake model servers, on a real harness (COMPAT §1.1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import harness
from harness.agent import RoundLimitError, run_agent
from harness.agent.events import HookBlockedError
from harness.testing import FakeModelServer, Reply, ToolUse

Make = Callable[..., harness.Harness]
ENV = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-test"}
PROVIDERS = ["openai", "anthropic"]


def hook(event: str, body: str, priority: int = 100) -> str:
    lines = "\n".join("      " + ln for ln in body.strip().splitlines())
    return (
        f"---\nevent: {event}\npriority: {priority}\nscript: |\n"
        f"  def handle(event, payload):\n{lines}\n---\nh\n"
    )


ADD = """
---
parameters:
  a: {type: integer, required: true}
  b: {type: integer, required: true}
script: |
  def run(args):
      ctx.set("last_sum", args["a"] + args["b"])
      return args["a"] + args["b"]
---
Add two integers.
"""


def project(provider: str, hooks: dict[str, str], rounds: int = 4) -> dict[str, str]:
    files = {
        "harness.md": f"---\nruntime: {{isolation: inprocess}}\n"
        f"limits: {{max_tool_calls_per_turn: {rounds}}}\n"
        f"model: {{provider: {provider}, name: fake-model}}\n---\nAgent.\n",
        ".harness/tools/add.md": ADD,
    }
    files.update({f".harness/hooks/{n}.md": t for n, t in hooks.items()})
    return files


def go(
    h: harness.Harness, replies: list[Reply], provider: str, prompt: str = "What is 2 + 3?"
) -> tuple[object, FakeModelServer]:
    with FakeModelServer(provider, replies) as server:
        try:
            result: object = run_agent(
                h, prompt, base_url=server.base_url, environ=ENV, session=h.default_session
            )
        except Exception as exc:  # noqa: BLE001 - asserted on by the tests
            result = exc
    return result, server


def user_texts(provider: str, body: dict) -> list[str]:
    out = []
    for m in body["messages"]:
        if m["role"] == "user" and isinstance(m["content"], str):
            out.append(m["content"])
    return out


@pytest.mark.parametrize("provider", PROVIDERS)
def test_turn_and_completion_events_fire_in_order(origin: Make, provider: str) -> None:
    record = (
        'metrics.incr(event)\nlog(event)\ncache.set("order", cache.get("order", []) + '
        "[event])\nreturn None"
    )
    h = origin(
        project(
            provider,
            {
                "a_turn_start": hook(
                    "turn.start", 'return modify({"message": payload["message"] + " (be brief)"})'
                ),
                "b_pre": hook("completion.pre", record),
                "c_post": hook("completion.post", record),
                "d_stop": hook("agent.stop", record),
                "e_end": hook(
                    "turn.end",
                    'cache.set("end", [payload["response"], '
                    'payload["Response"], len(payload["tool_calls"]), '
                    'payload["tool_results"][0]["content"], payload["turn"]])\n'
                    'return modify({"response": payload["response"] + "!"})',
                ),
            },
        )
    )
    result, server = go(
        h, [Reply(tools=[ToolUse("add", {"a": 2, "b": 3})]), Reply(text="5")], provider
    )
    assert not isinstance(result, Exception), result
    assert result.text == "5!"  # type: ignore[attr-defined]
    assert user_texts(provider, server.requests[0].body)[0] == "What is 2 + 3? (be brief)"
    cache = h.default_session.cache
    assert cache.get("order") == [
        "completion.pre",
        "completion.post",
        "completion.pre",
        "completion.post",
        "agent.stop",
    ]
    assert cache.get("end") == ["5", "5", 1, "5", 1]
    assert h.default_session.metrics.snapshot() == {
        "agent.stop": 1,
        "completion.post": 2,
        "completion.pre": 2,
    }


@pytest.mark.parametrize("provider", PROVIDERS)
def test_agent_stop_block_keeps_the_loop_going_with_the_reason(origin: Make, provider: str) -> None:
    h = origin(
        project(
            provider,
            {
                "verify": hook(
                    "agent.stop",
                    """
if "VERIFIED" not in payload["response"]:
    return block("Verify your answer, then say VERIFIED.")
return None
""",
                )
            },
        )
    )
    result, server = go(h, [Reply(text="5"), Reply(text="5 VERIFIED")], provider)
    assert not isinstance(result, Exception), result
    assert result.text == "5 VERIFIED" and result.rounds == 1  # type: ignore[attr-defined]
    assert user_texts(provider, server.requests[1].body)[-1] == (
        "Verify your answer, then say VERIFIED."
    )


def test_agent_stop_block_is_bounded_by_the_round_limit(origin: Make) -> None:
    h = origin(project("openai", {"never": hook("agent.stop", 'return block("again")')}, rounds=2))
    result, server = go(
        h, [Reply(text="a"), Reply(text="b"), Reply(text="c"), Reply(text="d")], "openai"
    )
    assert isinstance(result, RoundLimitError)
    assert "agent.stop hook still refused the answer after 2 rounds" in str(result)
    assert len(server.requests) == 3


def test_turn_start_block_fails_the_run_and_fires_error(origin: Make) -> None:
    h = origin(
        project(
            "openai",
            {
                "gate": hook("turn.start", 'return block("no work today")'),
                "err": hook(
                    "error", 'cache.set("error", [payload["kind"], payload["error"]])\nreturn None'
                ),
            },
        )
    )
    result, server = go(h, [Reply(text="x")], "openai")
    assert isinstance(result, HookBlockedError)
    assert str(result) == 'agent loop stopped: turn.start blocked by hook "gate": no work today'
    assert server.requests == []
    assert h.default_session.cache.get("error") == ["HookBlockedError", str(result)]


def test_completion_pre_may_change_the_request_and_post_may_block(origin: Make) -> None:
    h = origin(
        project(
            "openai",
            {
                "strip_tools": hook("completion.pre", 'return modify({"tools": []})'),
                "no_secrets": hook(
                    "completion.post",
                    'if "sk-" in payload["text"]:\n'
                    '    return block("secret in the answer")\nreturn None',
                ),
            },
        )
    )
    result, server = go(h, [Reply(text="the key is sk-123")], "openai")
    assert "tools" not in server.requests[0].body
    assert isinstance(result, HookBlockedError)
    assert 'completion.post blocked by hook "no_secrets": secret in the answer' in str(result)


def test_ctx_is_a_per_turn_scratchpad_in_the_agent_loop(origin: Make) -> None:
    h = origin(
        project(
            "openai", {"see": hook("turn.end", 'cache.set("ctx", ctx.snapshot())\nreturn None')}
        )
    )
    result, _ = go(h, [Reply(tools=[ToolUse("add", {"a": 2, "b": 3})]), Reply(text="5")], "openai")
    assert not isinstance(result, Exception), result
    assert h.default_session.cache.get("ctx") == {"turn": 1, "last_sum": 5}
    result, _ = go(h, [Reply(text="again")], "openai")
    assert h.default_session.cache.get("ctx") == {"turn": 2}


def test_run_without_loop_hooks_is_unchanged(origin: Make, tmp_path: Path) -> None:
    h = origin(project("openai", {}))
    result, server = go(h, [Reply(text="hi")], "openai")
    assert result.text == "hi"  # type: ignore[attr-defined]
