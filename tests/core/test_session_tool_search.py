"""``tool_search`` is a session tool: every session (Harness.call, Session.call, the
agent loop) can find deferred tools, which then stay listed for that session."""

from __future__ import annotations

from pathlib import Path

import harness

SEND_EMAIL = """---
loading: deferred
parameters:
  to: {type: string, required: true, description: the recipient address}
script: |
  def run(args):
      return "sent to " + args["to"]
---
Send an email message to a recipient.
"""

RESIZE = """---
loading: deferred
parameters:
  width: {type: integer, required: true}
script: |
  def run(args):
      return args["width"] // 2
---
Resize an image to a smaller width.
"""

ADD = """---
parameters:
  a: {type: integer, required: true}
script: |
  def run(args):
      return args["a"] + 1
---
Add one.
"""


def project(root: Path, *, with_deferred: bool = True, own_search: bool = False) -> Path:
    tools = root / ".harness" / "tools"
    tools.mkdir(parents=True)
    (tools / "add.md").write_text(ADD)
    if with_deferred:
        (tools / "send_email.md").write_text(SEND_EMAIL)
        (tools / "resize_image.md").write_text(RESIZE)
    if own_search:
        (tools / "tool_search.md").write_text(ADD.replace("Add one.", "A project search."))
    (root / "harness.md").write_text("---\nruntime:\n  isolation: inprocess\n---\n")
    return root


def test_session_finds_a_deferred_tool_then_lists_and_calls_it(tmp_path: Path) -> None:
    with harness.load(project(tmp_path)) as h, h.session() as s:
        assert "send_email" not in s.tools and "tool_search" in s.tools
        names = [d["function"]["name"] for d in s.definitions()]
        assert "tool_search" in names and "send_email" not in names
        found = s.call("tool_search", {"query": "email someone"})
        assert not found.is_error, found.text
        assert found.value["tools"][0]["name"] == "send_email"
        assert "send_email" in s.tools
        assert "send_email" in [d["function"]["name"] for d in s.definitions()]
        assert "resize_image" not in s.tools  # only what the search returned
        sent = s.call("send_email", {"to": "ada@example.org"})
        assert not sent.is_error and sent.value == "sent to ada@example.org"
        # Surfacing is per session: a fresh session starts with the deferred tools hidden.
        with h.session() as other:
            assert "send_email" not in other.tools


def test_harness_call_reaches_tool_search_through_the_default_session(tmp_path: Path) -> None:
    with harness.load(project(tmp_path)) as h:
        res = h.call("tool_search", {"query": "shrink image width", "limit": 1})
        assert not res.is_error, res.text
        assert [t["name"] for t in res.value["tools"]] == ["resize_image"]
        assert "resize_image" in h.default_session.tools
        assert "tool_search" not in h.tools  # the harness's own listing is unchanged


def test_tool_search_bad_arguments_are_a_clear_error(tmp_path: Path) -> None:
    with harness.load(project(tmp_path)) as h, h.session() as s:
        res = s.call("tool_search", {"query": ""})
        assert res.is_error and "tool_search" in res.text and "query" in res.text
        res = s.call("tool_search", {"query": "email", "limit": 500})
        assert res.is_error and "limit" in res.text
        assert s.surfaced == set()
        # No hit: nothing surfaced, an empty list.
        res = s.call("tool_search", {"query": "zzzz qqqq"})
        assert not res.is_error and res.value["tools"] == []


def test_no_deferred_tools_means_no_tool_search(tmp_path: Path) -> None:
    with harness.load(project(tmp_path, with_deferred=False)) as h, h.session() as s:
        assert "tool_search" not in s.tools
        res = s.call("tool_search", {"query": "email"})
        assert res.is_error and 'unknown tool "tool_search"' in res.text


def test_a_project_tool_named_tool_search_replaces_the_builtin(tmp_path: Path) -> None:
    with harness.load(project(tmp_path, own_search=True)) as h, h.session() as s:
        res = s.call("tool_search", {"a": 1})
        assert not res.is_error and res.value == 2
        assert s.tools["tool_search"].description == "A project search."
