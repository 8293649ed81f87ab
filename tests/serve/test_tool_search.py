"""BM25 tool_search (pure Python) and the watch snapshot, without a server."""

from __future__ import annotations

from pathlib import Path

from harness import search, session_tools
from harness.artifacts.model import Parameter, Source, ToolSpec
from harness.serve.watch import snapshot


def tool(name: str, description: str, **params: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters=tuple(
            Parameter(name=k, type="string", description=v) for k, v in params.items()
        ),
        source=Source(path=f"{name}.md"),
    )


TOOLS = [
    tool(
        "send_email",
        "Send an email message to a recipient.",
        to="Recipient address",
        subject="Subject line",
    ),
    tool("resize_image", "Resize a picture (PNG or JPEG) to a new width.", path="Image file"),
    tool(
        "query_database",
        "Run a read-only SQL query against the analytics database.",
        sql="The SELECT statement",
    ),
    tool("slack.post", "Post a chat message to a Slack channel.", channel="Channel name"),
    tool("convertCurrency", "Convert an amount between currencies using daily rates."),
]


def names(hits: list[search.Hit]) -> list[str]:
    return [h.name for h in hits]


def test_tokenize_splits_names_and_stems_plurals() -> None:
    assert search.tokenize("read_file readFile HTTPServer files queries searches") == [
        "read",
        "file",
        "read",
        "file",
        "httpserver",
        "file",
        "query",
        "search",
    ]
    assert search.tokenize("the a of to") == []


def test_bm25_ranks_the_right_tool_first() -> None:
    index = search.ToolIndex(TOOLS)
    assert names(index.search("email"))[0] == "send_email"
    assert names(index.search("shrink pictures"))[0] == "resize_image"
    assert names(index.search("SQL databases"))[0] == "query_database"
    assert names(index.search("slack channel message"))[0] == "slack.post"
    assert names(index.search("currency"))[0] == "convertCurrency"
    # Parameter text counts too.
    assert names(index.search("recipient subject"))[0] == "send_email"


def test_bm25_exact_name_limit_and_no_match() -> None:
    index = search.ToolIndex(TOOLS)
    assert names(index.search("query_database", 1)) == ["query_database"]
    assert len(index.search("message", 1)) == 1
    assert {"send_email", "slack.post"} <= set(names(index.search("message")))
    assert index.search("zzzz qqqq") == []
    assert index.search("") == []
    assert search.ToolIndex([]).search("email") == []


def test_run_search_shapes_the_value_and_clamps_limit() -> None:
    index = search.ToolIndex(TOOLS)
    value = session_tools.run_search(index, {"query": "email", "limit": 100})
    assert value["query"] == "email"
    first = value["tools"][0]
    assert first["name"] == "send_email"
    assert first["description"] == "Send an email message to a recipient."
    assert isinstance(first["score"], float) and first["score"] > 0


def test_summary_keeps_the_first_paragraph() -> None:
    assert search.summary("First line\ncontinues.\n\nSecond paragraph.") == (
        "First line continues."
    )
    assert len(search.summary("x" * 1000)) == search.SUMMARY_CHARS


def test_tool_search_spec_is_a_valid_tool() -> None:
    spec = session_tools.tool_search_spec()
    assert spec.name == "tool_search"
    assert spec.input_schema["required"] == ["query"]
    assert spec.annotations == {
        "title": "Search tools",
        "read_only": True,
        "destructive": False,
        "idempotent": True,
        "open_world": False,
    }


def test_watch_snapshot_sees_edits_additions_and_removals(tmp_path: Path) -> None:
    tools = tmp_path / ".harness" / "tools"
    tools.mkdir(parents=True)
    (tmp_path / "harness.md").write_text("---\n---\n")
    (tools / "a.md").write_text("one")
    (tools / "notes.txt").write_text("ignored")
    first = snapshot(tmp_path)
    assert sorted(Path(p).name for p in first) == ["a.md", "harness.md"]
    assert snapshot(tmp_path) == first
    (tools / "a.md").write_text("two!")
    second = snapshot(tmp_path)
    assert second != first
    (tools / "b.md").write_text("x")
    third = snapshot(tmp_path)
    assert len(third) == 3
    (tools / "b.md").unlink()
    assert snapshot(tmp_path) == second
    (tools / "notes.txt").write_text("still ignored")
    assert snapshot(tmp_path) == second
