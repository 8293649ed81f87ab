"""OpenTelemetry spans for served calls, when ``opentelemetry-api`` is installed and a
tracer provider is configured (otherwise nothing changes and nothing is paid).

Each call is a span ``harness.call <tool>``, a child of the MCP SDK's server span for
the request (which continues the client's trace from the request ``_meta``), so the
MCP request context propagates. Every hook that ran is a child span
``harness.hook <name>`` with its decision and duration. The call span carries the
tool, call id, decision (``allow`` or ``block``), duration, error and truncation.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

try:
    from opentelemetry import trace
    from opentelemetry.trace import ProxyTracerProvider, Status, StatusCode
except ImportError:  # pragma: no cover - opentelemetry-api comes with the mcp SDK
    trace = None  # type: ignore[assignment]

TRACER_NAME = "harness.serve"


def active() -> bool:
    """Whether spans would be recorded: the API is there and a provider is set."""
    return trace is not None and not isinstance(trace.get_tracer_provider(), ProxyTracerProvider)


def call_span(name: str, call_id: str) -> Any:
    tracer = trace.get_tracer(TRACER_NAME)
    return tracer.start_as_current_span(
        f"harness.call {name}",
        kind=trace.SpanKind.INTERNAL,
        attributes={"harness.tool": name, "harness.call_id": call_id, "gen_ai.tool.name": name},
    )


def finish_call(span: Any, result: Any) -> None:
    span.set_attributes(
        {
            "harness.decision": "block" if result.blocked_by else "allow",
            "harness.is_error": bool(result.is_error),
            "harness.duration_ms": float(result.duration_ms),
            "harness.truncated": bool(result.truncated),
        }
    )
    if result.blocked_by:
        span.set_attribute("harness.blocked_by", result.blocked_by)
    if result.is_error:
        span.set_attribute("error.type", "tool_error")
        span.set_status(Status(StatusCode.ERROR, (result.error or "")[:500]))


def hook_span(fields: Mapping[str, Any]) -> None:
    """A finished child span for one hook run (from its ``hook.decision`` event)."""
    tracer = trace.get_tracer(TRACER_NAME)
    end = time.time_ns()
    took = float(fields.get("duration_ms") or 0.0)
    span = tracer.start_span(
        f"harness.hook {fields.get('hook')}",
        start_time=end - int(took * 1e6),
        attributes={
            "harness.hook": str(fields.get("hook")),
            "harness.hook_event": str(fields.get("hook_event")),
            "harness.decision": str(fields.get("decision")),
            "harness.reason": str(fields.get("reason") or "")[:500],
            "harness.duration_ms": took,
        },
    )
    if fields.get("decision") == "error":
        span.set_status(Status(StatusCode.ERROR, str(fields.get("reason") or "")[:500]))
    span.end(end_time=end)
