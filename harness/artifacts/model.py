"""Frozen specs of everything the loader reads, and the Problem it reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from harness.artifacts.problems import Problem, Severity  # re-exported: the old home
from harness.events import ALIASES, EVENTS

if TYPE_CHECKING:
    from harness.config import Config

__all__ = ["Problem", "Severity"]  # and the specs below

# Every event harness fires (harness/events.py), then ai-harness's alias.
TOOL_EVENTS = (*EVENTS, *ALIASES)

# The keys each event's payload carries (declared in harness/events.py).
EVENT_PAYLOAD_KEYS: dict[str, tuple[str, ...]] = {
    name: tuple(spec.payload) for name, spec in EVENTS.items()
}
EVENT_PAYLOAD_KEYS.update({alias: EVENT_PAYLOAD_KEYS[name] for alias, name in ALIASES.items()})


@dataclass(frozen=True, slots=True, kw_only=True)
class Parameter:
    """One declared argument. ``schema`` is its JSON Schema without ``required``."""

    name: str
    type: str
    description: str = ""
    required: bool = False
    schema: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """Where a spec came from: the file, the 1-based line of its entry, its layer."""

    path: str
    line: int = 1
    layer: str = "tools"  # builtins | plugins | inline | tools | hooks | overrides | meta | python


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    name: str
    description: str
    parameters: tuple[Parameter, ...] = ()
    input_schema: Mapping[str, Any] = field(default_factory=dict)
    script: str | None = None
    # 1-based line in ``source.path`` of the script's first line (0 = unknown).
    script_line: int = 0
    # 1-based column of the script's first character in the file (block indentation + 1).
    script_column: int = 0
    timeout_ms: int = 0
    is_async: bool = False
    returns: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None
    loading: Literal["always", "deferred"] = "always"
    enabled: bool = True
    # Unknown argument names: "note" (run, and say so) or "strict" (refuse); None =
    # the project's `arguments` setting (harness/arguments.py).
    arguments: str | None = None
    source: Source


@dataclass(frozen=True, slots=True, kw_only=True)
class HookSpec:
    name: str
    event: str
    script: str
    script_line: int = 0
    script_column: int = 0
    priority: int = 100
    when: str | None = None
    when_line: int = 0
    when_column: int = 0
    timeout_ms: int = 5000
    on_error: Literal["block", "allow"] = "block"
    description: str = ""
    source: Source


def hook_order(hook: HookSpec) -> tuple[int, str]:
    """The one order of hooks on an event (docs/spec.md §4): priority, then name."""
    return (hook.priority, hook.name)


# -- upstream MCP servers (parsed by artifacts/servers.py) ------------------------------

DEFAULT_TIMEOUT_MS = 60000


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrySpec:
    """A retry policy as declared: ``None`` = not given here (the next level decides)."""

    max_attempts: int | None = None
    retry_on: tuple[str, ...] | None = None
    backoff_ms: int | None = None
    retry_non_idempotent: bool | None = None

    def over(self, lower: RetrySpec) -> RetrySpec:
        """This policy, with every field left out taken from ``lower``."""
        return RetrySpec(
            max_attempts=lower.max_attempts if self.max_attempts is None else self.max_attempts,
            retry_on=lower.retry_on if self.retry_on is None else self.retry_on,
            backoff_ms=lower.backoff_ms if self.backoff_ms is None else self.backoff_ms,
            retry_non_idempotent=(
                lower.retry_non_idempotent
                if self.retry_non_idempotent is None
                else self.retry_non_idempotent
            ),
        )


# Each field's own default: one attempt (no retry), transient failures and HTTP 5xx
# when retries are asked for, 200 ms doubling backoff, never a non-idempotent tool.
DEFAULT_RETRY = RetrySpec(
    max_attempts=1, retry_on=("transient", "5xx"), backoff_ms=200, retry_non_idempotent=False
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSettings:
    timeout_ms: int | None = None
    retry: RetrySpec = field(default_factory=RetrySpec)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSpec:
    name: str
    transport: Literal["stdio", "http"] = "stdio"
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # values may hold ${env:NAME}
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    allow: tuple[str, ...] = ("*",)
    deny: tuple[str, ...] = ()
    per_tool: Mapping[str, ToolSettings] = field(default_factory=dict)
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    loading: Literal["eager", "deferred"] = "deferred"
    retry: RetrySpec = field(default_factory=RetrySpec)
    sandbox: str | None = None  # None: follow exec.sandbox
    allowed_domains: tuple[str, ...] = ()
    enabled: bool = True
    description: str = ""
    source: Source

    def retry_for(self, tool: str) -> RetrySpec:
        settings = self.per_tool.get(tool)
        own = settings.retry if settings is not None else RetrySpec()
        return own.over(self.retry).over(DEFAULT_RETRY)

    def timeout_for(self, tool: str) -> int:
        settings = self.per_tool.get(tool)
        if settings is not None and settings.timeout_ms is not None:
            return settings.timeout_ms
        return self.timeout_ms


@dataclass(frozen=True, slots=True, kw_only=True)
class Project:
    """The loaded state of one root: config, tools by name (sorted), hooks, problems."""

    root: Path
    config: Config
    system_prompt: str = ""
    tools: Mapping[str, ToolSpec] = field(default_factory=dict)
    hooks: tuple[HookSpec, ...] = ()
    problems: tuple[Problem, ...] = ()
    # Upstream MCP servers by name (``.harness/servers/`` and ``mcp_servers:``).
    servers: Mapping[str, ServerSpec] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)
