"""OpenTelemetry: each served call is a span under the SDK's request span, hooks are
child spans, recorded with the SDK's in-memory exporter."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from serve_helpers import ERAS, MODERN

_EXPORTER = InMemorySpanExporter()


@pytest.fixture()
def spans() -> InMemorySpanExporter:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    return _EXPORTER


@pytest.mark.parametrize("mode", ERAS)
def test_calls_and_hooks_are_spans(project: Path, spans: InMemorySpanExporter, mode: str) -> None:
    from mcp import Client

    from harness.serve.mcp import HarnessMCPServer

    server = HarnessMCPServer(project)

    async def go() -> None:
        async with Client(server.server, mode="legacy" if mode == "legacy" else MODERN) as c:
            ok = await c.call_tool("echo", {"text": "hi"})
            assert ok.structured_content == {"echo": "hi"}
            blocked = await c.call_tool("danger", {"target": "x"})
            assert blocked.is_error is True
            failed = await c.call_tool("slow", {})
            assert failed.is_error is True

    try:
        anyio.run(go)
    finally:
        server.close()
    finished = spans.get_finished_spans()
    calls = {s.name: s for s in finished if s.name.startswith("harness.call ")}
    assert set(calls) == {"harness.call echo", "harness.call danger", "harness.call slow"}
    echo = calls["harness.call echo"]
    assert echo.attributes["harness.decision"] == "allow"
    assert echo.attributes["harness.is_error"] is False
    assert echo.attributes["harness.duration_ms"] > 0
    # The MCP request context propagates: the call span is a child of the SDK's span
    # for this tools/call request, in the same trace.
    by_id = {s.context.span_id: s for s in finished}
    parent = by_id[echo.parent.span_id]
    assert parent.name == "tools/call echo"
    assert parent.context.trace_id == echo.context.trace_id

    danger = calls["harness.call danger"]
    assert danger.attributes["harness.decision"] == "block"
    assert danger.attributes["harness.blocked_by"] == "guard"
    assert danger.status.status_code == trace.StatusCode.ERROR
    hooks = [s for s in finished if s.name == "harness.hook guard"]
    under = {s.parent.span_id: s for s in hooks}
    assert len(hooks) == 3 and len(under) == 3  # one tool.pre run under each call
    guard = under[danger.context.span_id]
    assert guard.attributes["harness.decision"] == "block"
    assert guard.attributes["harness.hook_event"] == "tool.pre"
    assert under[echo.context.span_id].attributes["harness.decision"] == "skip"  # when false

    slow = calls["harness.call slow"]
    assert slow.status.status_code == trace.StatusCode.ERROR
    assert "timed out" in slow.status.description


def test_tracing_is_off_until_a_provider_is_set() -> None:
    import subprocess
    import sys

    code = (
        "from harness.serve import tracing; from opentelemetry import trace; "
        "from opentelemetry.sdk.trace import TracerProvider; "
        "print(tracing.active()); trace.set_tracer_provider(TracerProvider()); "
        "print(tracing.active())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert out == ["False", "True"]
