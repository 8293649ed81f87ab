"""The server answers the SDK's per-call schema lookup (``get_tool_input_schema``, used to
check Mcp-Param-* headers on 2026-07-28 tools/call) from its tools, not by running a
whole tools/list per call."""

from __future__ import annotations

from pathlib import Path

from harness.serve.mcp import HarnessMCPServer


def test_input_schema_lookup_matches_the_listing(project: Path) -> None:
    server = HarnessMCPServer(project)
    try:
        lookup = server.server.get_tool_input_schema
        assert lookup is not None
        listed = {
            d["name"]: d["inputSchema"]
            for d in server.gen.harness.definitions("mcp", include_deferred=True)
        }
        assert "echo" in listed and "send_email" in listed  # send_email is deferred
        for name, schema in listed.items():
            assert lookup(name) == schema, name
        assert lookup("no_such_tool") is None
        # Cached per generation, and recomputed for a new spec of the same name.
        assert lookup("echo") is lookup("echo")
    finally:
        server.close()


def test_a_reload_answers_with_the_new_schema(project: Path) -> None:
    import anyio

    server = HarnessMCPServer(project)
    try:
        before = server.server.get_tool_input_schema("echo")
        assert "times" in before["properties"]
        tool = project / ".harness" / "tools" / "echo.md"
        tool.write_text(
            tool.read_text().replace("  times: {type: integer, minimum: 1, maximum: 3}\n", "")
        )
        assert anyio.run(server.reload) is True
        after = server.server.get_tool_input_schema("echo")
        assert "times" not in after["properties"]
    finally:
        server.close()
