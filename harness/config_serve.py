"""The ``serve:`` section of ``harness.md``: what one client identity of
``harness serve --transport http`` may use (issue 22 item 5).

Checked strictly: an unknown key or a value harness cannot honour is an error (with
the line, from :mod:`harness.config`), never a limit silently left out::

    serve:
      max_calls_per_identity: 4      # tool calls of one identity running at once
      max_queued_calls: 64           # more of its calls waiting; beyond: an error result
      rate_limit: {calls: 600, per_seconds: 60}   # or: rate_limit: off
      max_sessions_per_identity: 32  # MCP sessions of one identity; beyond: its LRU closes
      max_sessions: 1024             # MCP sessions server-wide; beyond: the busiest's LRU
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.artifacts.problems import a_type, as_json, suggest

SERVE_KEYS = (
    "max_calls_per_identity",
    "max_queued_calls",
    "rate_limit",
    "max_sessions_per_identity",
    "max_sessions",
)
RATE_KEYS = ("calls", "per_seconds")


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimit:
    calls: int = 600
    per_seconds: float = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeConfig:
    # None: half of limits.max_concurrency (at least 1), so that one identity never
    # holds the whole worker pool.
    max_calls_per_identity: int | None = None
    max_queued_calls: int = 64
    rate_limit: RateLimit | None = field(default_factory=RateLimit)  # None: off
    max_sessions_per_identity: int = 32  # serve/sessions.py
    max_sessions: int = 1024

    def calls_per_identity(self, max_concurrency: int) -> int:
        if self.max_calls_per_identity is not None:
            return self.max_calls_per_identity
        return max(1, max_concurrency // 2)


Finding = tuple[str, str]  # (message, key under serve; "" for serve itself)
F = TypeVar("F")


def _count(where: str, value: Any) -> tuple[int | None, str | None]:
    if isinstance(value, bool) or not isinstance(value, int):
        return None, f"config {where} must be an integer, got {a_type(value)}"
    if value < 1:
        return None, f"config {where} must be >= 1, got {value}"
    return value, None


def _rate_limit(value: Any) -> Generator[Finding, None, RateLimit | None]:
    if value is False or value == "off":
        return None
    if not isinstance(value, Mapping):
        yield (
            "config serve.rate_limit must be a mapping like {calls: 600, per_seconds: 60} "
            f"or off, got {a_type(value)}",
            "rate_limit",
        )
        return RateLimit()
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key not in RATE_KEYS:
            yield (
                f"unknown config key serve.rate_limit.{key}{suggest(str(key), RATE_KEYS)}; "
                f"known keys: {', '.join(RATE_KEYS)}",
                "rate_limit",
            )
            continue
        if key == "per_seconds":
            if isinstance(item, int | float) and not isinstance(item, bool) and item > 0:
                out[key] = float(item)
            else:
                yield (
                    "config serve.rate_limit.per_seconds must be a number of seconds > 0, "
                    f"got {as_json(item)}",
                    "rate_limit",
                )
            continue
        count, why = _count(f"serve.rate_limit.{key}", item)
        if why:
            yield why, "rate_limit"
        else:
            out[key] = count
    return RateLimit(**out)


def serve_section(raw: Any, wrap: Callable[[str, str], F]) -> Generator[F, None, ServeConfig]:
    """The findings of a ``serve:`` value (each given to ``wrap(message, key)``), then
    (returned) the section it gives."""
    found = _serve(raw)
    while True:
        try:
            message, key = next(found)
        except StopIteration as done:
            return done.value
        yield wrap(message, key)


def _serve(raw: Any) -> Generator[Finding, None, ServeConfig]:
    if not isinstance(raw, Mapping):
        yield f"config serve must be a mapping, got {a_type(raw)}", ""
        return ServeConfig()
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in SERVE_KEYS:
            yield (
                f"unknown config key serve.{key}{suggest(str(key), SERVE_KEYS)}; known "
                f"keys: {', '.join(SERVE_KEYS)}",
                str(key),
            )
        elif key == "rate_limit":
            values[key] = yield from _rate_limit(value)
        else:
            count, why = _count(f"serve.{key}", value)
            if why:
                yield why, key
            else:
                values[key] = count
    return ServeConfig(**values)


def serve_schema() -> dict[str, Any]:
    """The JSON Schema of the ``serve:`` section (harness/schemas/harness.schema.json)."""
    count = {"type": "integer", "minimum": 1}
    return {
        "type": ["object", "null"],
        "additionalProperties": False,
        "description": "Per-identity limits of harness serve over HTTP (docs/deploying.md).",
        "properties": {
            "max_calls_per_identity": {
                **count,
                "description": "Tool calls of one identity running at once "
                "(default: half of limits.max_concurrency, at least 1).",
            },
            "max_queued_calls": {**count, "default": 64},
            "max_sessions_per_identity": {
                **count,
                "default": 32,
                "description": "MCP sessions one identity keeps open; opening one more "
                "closes its least recently used one.",
            },
            "max_sessions": {
                **count,
                "default": 1024,
                "description": "MCP sessions open server-wide; opening one more closes the "
                "least recently used one of the identity holding the most.",
            },
            "rate_limit": {
                "oneOf": [
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "calls": {**count, "default": 600},
                            "per_seconds": {"type": "number", "exclusiveMinimum": 0, "default": 60},
                        },
                    },
                    {"enum": [False, "off"]},
                ]
            },
        },
    }
