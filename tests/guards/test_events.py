"""harness/events.py is the one declaration of each event's payload: the docs table is
generated from it, and every payload the runtime fires conforms to it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import harness
from harness.agent import AgentError
from harness.events import EVENTS, conforms, markdown_table, payload_problems
from harness.hooks import HookChain
from harness.testing import FakeModelServer, Reply, ToolUse

DOCS = Path(__file__).parents[2] / "docs" / "hooks.md"
TOOLS = Path(__file__).parent / "tools"


def test_the_docs_event_table_is_the_declaration() -> None:
    text = DOCS.read_text()
    begin, end = "<!-- events:begin -->\n", "<!-- events:end -->"
    table = text[text.index(begin) + len(begin) : text.index(end)]
    assert table == markdown_table(), "regenerate: python -c 'from harness.events import ...'"


def test_conforms_is_strict_about_types() -> None:
    assert conforms("x", "string") and not conforms(1, "string")
    assert conforms(None, "string|null") and not conforms(True, "integer")
    assert conforms(
        [{"id": "a", "name": "b", "arguments": {}}], EVENTS["turn.end"].payload["ToolCalls"]
    )
    assert not conforms([{"id": 1}], EVENTS["turn.end"].payload["ToolCalls"])
    assert payload_problems("turn.start", {"message": 1, "turn": 1, "session": "s"}) == [
        "turn.start payload 'message' is not string: 1"
    ]


HOOK = """---
event: {event}
script: |
  def handle(event, payload):
      return allow()
---
Observes {event}.
"""


def test_every_payload_the_runtime_fires_conforms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "p"
    (root / ".harness" / "hooks").mkdir(parents=True)
    (root / ".harness" / "tools").mkdir()
    for tool in ("echo", "deploy", "notify", "make_tool", "report"):
        (root / ".harness" / "tools" / f"{tool}.md").write_text((TOOLS / f"{tool}.md").read_text())
    events = [*EVENTS, "custom.deploy", "custom.notify"]
    for i, event in enumerate(events):
        (root / ".harness" / "hooks" / f"h{i}.md").write_text(HOOK.format(event=event))
    (root / "harness.md").write_text(
        "---\nmodel: {provider: openai, name: fake-model, api_key_env: EV_KEY}\n"
        "runtime: {isolation: inprocess}\nmeta: {enabled: true}\n---\nYou help.\n"
    )
    fired: list[tuple[str, dict[str, Any]]] = []
    real = HookChain.run

    def spy(self: HookChain, event: str, payload: Mapping[str, Any], *a: Any, **k: Any) -> Any:
        fired.append((event, dict(payload)))
        return real(self, event, payload, *a, **k)

    monkeypatch.setattr(HookChain, "run", spy)
    replies = [
        Reply(text="calling", tools=[ToolUse("echo", {"text": "hi"}, id="c1")]),
        Reply(text="done"),
        Reply(status=500),
    ]
    with FakeModelServer("openai", replies) as server, harness.load(root) as h:
        with h.session() as session:
            assert not session.call("deploy", {"env": "x"}).is_error
            assert not session.call("notify", {"topic": "x"}).is_error
            assert not session.call("make_tool", {"name": "made"}).is_error
            assert not session.call("report", {"topic": "x"}).is_error
        env = {"EV_KEY": "k"}
        assert h.run("hello", base_url=server.base_url, environ=env).text.endswith("done")
        with pytest.raises(AgentError):
            h.run("again", base_url=server.base_url, environ=env)
    seen = {event for event, _ in fired}
    assert seen == {*EVENTS, "custom.deploy", "custom.notify"}, seen
    problems = [p for event, payload in fired for p in payload_problems(event, payload)]
    assert problems == []
