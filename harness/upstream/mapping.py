"""MCP to harness: a server's tool listing as ToolSpecs, a call result as a value, an
exception as a retry class (transient, timeout, 5xx, error)."""

from __future__ import annotations

import asyncio
import fnmatch
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.artifacts import patterns
from harness.artifacts.checks import NAME_RE
from harness.artifacts.export import FORMATS, clash_message, definition, without_clashes
from harness.artifacts.model import Source, ToolSpec
from harness.artifacts.servers import ServerSpec

log = logging.getLogger("harness.upstream")
_HINTS = {
    "readOnlyHint": "read_only",
    "destructiveHint": "destructive",
    "idempotentHint": "idempotent",
    "openWorldHint": "open_world",
    "title": "title",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Listing:
    """What one server offers after the tools: allow/deny filter."""

    specs: Mapping[str, ToolSpec]  # NAME.TOOL -> spec
    upstream: Mapping[str, str]  # NAME.TOOL -> the upstream tool name
    skipped: tuple[str, ...] = ()  # upstream names that cannot be harness tool names
    # NAME.TOOL -> why harness refuses the tool (a call of it answers this)
    refused: Mapping[str, str] = field(default_factory=dict)


def build_listing(spec: ServerSpec, tools: list[Any]) -> Listing:
    specs: dict[str, ToolSpec] = {}
    upstream: dict[str, str] = {}
    skipped = []
    refused: dict[str, str] = {}
    for t in tools:
        if not any(fnmatch.fnmatchcase(t.name, p) for p in spec.allow) or any(
            fnmatch.fnmatchcase(t.name, p) for p in spec.deny
        ):
            continue
        full = f"{spec.name}.{t.name}"
        if not NAME_RE.fullmatch(full):
            skipped.append(t.name)
            log.warning(
                'upstream server "%s": tool "%s" is left out: "%s" is not a valid tool '
                "name ([A-Za-z][A-Za-z0-9_.-], at most 64 characters)",
                spec.name,
                t.name,
                full,
            )
            continue
        tool = _tool_spec(spec, full, t)
        why = _refusal(t, tool)
        if why is not None:
            refused[full] = f'tool "{full}" of upstream server "{spec.name}" is refused: {why}'
            log.warning("%s", refused[full])
            continue
        specs[full] = tool
        upstream[full] = t.name
    # Two tools of one listing under one provider name (x.y and x_y): the first stays.
    kept, clashes = without_clashes(sorted(specs))
    for name, other in clashes:
        refused[name] = clash_message(name, other, spec.name)
        log.warning("%s", refused[name])
    specs = {name: specs[name] for name in kept}
    return Listing(
        specs=dict(sorted(specs.items())),
        upstream=upstream,
        skipped=tuple(skipped),
        refused=refused,
    )


def server_source(spec: ServerSpec) -> Source:
    return Source(path=spec.source.path, line=spec.source.line, layer="upstream")


def listing_shape(listing: Listing) -> list[tuple[str, str, Any, Any, Any]]:
    return [
        (n, s.description, s.input_schema, s.returns, s.annotations)
        for n, s in listing.specs.items()
    ]


def convert(result: Any) -> Any:
    """An MCP CallToolResult as a harness value: the structured content when there is
    some, else the text; ``isError`` becomes the ``{"error": ...}`` error convention."""
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    if result.is_error:
        return {"error": "\n".join(texts) or "the upstream tool failed (isError, no text)"}
    if result.structured_content is not None:
        return result.structured_content
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content]


def failure_kind(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return failure_kind(exc.exceptions[0])
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int) and 500 <= status < 600:
        return "5xx"
    text = f"{type(exc).__name__} {exc}"
    for code in range(500, 600):
        if f" {code} " in f" {text} " or f"status {code}" in text or f"HTTP {code}" in text:
            return "5xx"
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return "timeout"
    if isinstance(exc, (OSError, EOFError, ConnectionError)) or type(exc).__name__ in (
        "ClosedResourceError",
        "BrokenResourceError",
        "EndOfStream",
        "ConnectError",
        "ReadError",
        "RemoteProtocolError",
    ):
        return "transient"
    if "connection closed" in str(exc).lower():
        return "transient"
    return "error"


def describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return describe(exc.exceptions[0])
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _tool_spec(spec: ServerSpec, full: str, t: Any) -> ToolSpec:
    ann = None
    if t.annotations is not None:
        raw = t.annotations.model_dump(by_alias=True, exclude_none=True)
        ann = {_HINTS[k]: v for k, v in raw.items() if k in _HINTS}
    return ToolSpec(
        name=full,
        description=t.description or t.title or full,
        input_schema=dict(t.input_schema or {"type": "object"}),
        returns=dict(t.output_schema) if t.output_schema else None,
        annotations=ann or None,
        timeout_ms=spec.timeout_for(t.name),
        source=server_source(spec),
    )


def _refusal(t: Any, tool: ToolSpec) -> str | None:
    """Why harness cannot offer ``tool``: a pattern no linear engine runs, or a schema
    no export format can express (nothing a server lists may raise out of a run)."""
    for key, schema in (("inputSchema", t.input_schema), ("outputSchema", t.output_schema)):
        why = patterns.schema_problem(schema) if schema else None
        if why is not None:
            return f"its {key} has a {why}"
    for fmt in FORMATS:
        try:
            definition(tool, fmt)
        except Exception as exc:  # noqa: BLE001 - any failure is the answer
            return f"its inputSchema cannot be exported for {fmt} ({type(exc).__name__}: {exc})"
    return None
