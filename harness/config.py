"""``harness.md`` frontmatter -> a frozen :class:`Config` with defaults (SPEC §5).

``parse_config`` never raises for content problems: it returns the config built from
whatever was valid plus a list of :class:`Problem` for the rest. Defaults marked
as security invariants in SPEC §8 can only be tightened.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from harness.artifacts.model import Problem
from harness.artifacts.params import a_type

ALWAYS_PROTECTED = (".harness", "harness.md", ".git")
DEFAULT_ENV = ("PATH", "HOME", "LANG", "TERM")


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    max_output_bytes: int = 65536
    max_tool_calls_per_turn: int = 10
    max_timeout_ms: int = 600000
    max_concurrency: int = 8
    memory_mb: int = 512


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolsPolicy:
    allow: tuple[str, ...] = ("*",)
    deny: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeConfig:
    isolation: str = "process"  # process | inprocess


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkConfig:
    allowed_domains: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecConfig:
    sandbox: str = "auto"  # auto | required | off
    allowed_commands: tuple[str, ...] = ()
    env: tuple[str, ...] = DEFAULT_ENV


@dataclass(frozen=True, slots=True, kw_only=True)
class FsConfig:
    protected: tuple[str, ...] = ALWAYS_PROTECTED


@dataclass(frozen=True, slots=True, kw_only=True)
class MetaConfig:
    enabled: bool = False
    max_tools: int = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditConfig:
    path: str | None = None  # relative to the root, e.g. .harness/state/audit.jsonl


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelConfig:
    """Agent-loop defaults (SPEC §13); flags override them."""

    provider: str = "openai"  # openai | anthropic
    name: str = ""
    base_url: str = ""
    api_key_env: str = ""
    max_tokens: int = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    root: Path = field(default_factory=Path.cwd)
    workspace: Path = field(default_factory=Path.cwd)
    tools_policy: ToolsPolicy = field(default_factory=ToolsPolicy)
    limits: Limits = field(default_factory=Limits)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    exec: ExecConfig = field(default_factory=ExecConfig)
    fs: FsConfig = field(default_factory=FsConfig)
    meta: MetaConfig = field(default_factory=MetaConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    model: ModelConfig = field(default_factory=ModelConfig)


# key -> (section dataclass, {field: allowed python types})
_SECTIONS: dict[str, type] = {
    "tools_policy": ToolsPolicy,
    "limits": Limits,
    "runtime": RuntimeConfig,
    "network": NetworkConfig,
    "exec": ExecConfig,
    "fs": FsConfig,
    "meta": MetaConfig,
    "audit": AuditConfig,
    "model": ModelConfig,
}
_CHOICES = {
    ("runtime", "isolation"): ("process", "inprocess"),
    ("exec", "sandbox"): ("auto", "required", "off"),
    ("model", "provider"): ("openai", "anthropic"),
}
# Integer fields for which 0 is meaningful (no cap); every other integer must be > 0.
_ZERO_OK = ("max_timeout_ms",)
# Keys of harness.md frontmatter that are not config sections.
OTHER_KEYS = ("tools", "hooks", "workspace", "mcp_servers")
KNOWN_KEYS = tuple(sorted((*_SECTIONS, *OTHER_KEYS)))


def _coerce(section: str, name: str, default: Any, value: Any) -> tuple[Any, str | None]:
    """Return (value, error message or None) for one section field."""
    where = f"{section}.{name}"
    if (section, name) == ("exec", "sandbox") and value is False:
        # YAML 1.1 reads a bare `off` (SPEC §5's own spelling) as the boolean false.
        value = "off"
    if isinstance(default, bool):
        if not isinstance(value, bool):
            return default, f"config {where} must be a boolean (true or false), got {a_type(value)}"
        return value, None
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            return default, f"config {where} must be an integer, got {a_type(value)}"
        if value < 0 or (value == 0 and name not in _ZERO_OK):
            return default, f"config {where} must be > 0, got {value}"
        return value, None
    if isinstance(default, tuple):
        if not isinstance(value, list):
            return default, f"config {where} must be a list of strings, got {a_type(value)}"
        bad = [v for v in value if not isinstance(v, str)]
        if bad:
            return default, (f"config {where} must be a list of strings, got {a_type(bad[0])} "
                             f"({bad[0]!r}) in it; quote it")
        return tuple(value), None
    # str or None
    if value is None and default is None:
        return None, None
    choices = _CHOICES.get((section, name))
    if choices and not isinstance(value, str):
        return default, f"config {where} must be one of {', '.join(choices)}; got {a_type(value)}"
    if not isinstance(value, str):
        return default, f"config {where} must be a string, got {a_type(value)}"
    if choices and value not in choices:
        return default, f"config {where} must be one of {', '.join(choices)}; got {value!r}"
    return value, None


def _field_schema(section: str, name: str, default: Any) -> dict[str, Any]:
    """The JSON Schema of one section field: the rules :func:`_coerce` applies."""
    if isinstance(default, bool):
        return {"type": "boolean", "default": default}
    if isinstance(default, int):
        return {"type": "integer", "minimum": 0 if name in _ZERO_OK else 1, "default": default}
    if isinstance(default, tuple):
        return {"type": "array", "items": {"type": "string"}, "default": list(default)}
    if default is None:
        return {"type": ["string", "null"]}
    choices = _CHOICES.get((section, name))
    if choices:
        return {"enum": list(choices), "default": default}
    return {"type": "string", "default": default}


def section_schemas() -> dict[str, Any]:
    """JSON Schemas of the config sections of harness.md (for harness/schemas/)."""
    out: dict[str, Any] = {}
    for key, cls in _SECTIONS.items():
        section = cls()
        out[key] = {"type": ["object", "null"], "additionalProperties": False, "properties": {
            f.name: _field_schema(key, f.name, getattr(section, f.name)) for f in fields(cls)}}
    return out


def parse_config(
    data: Mapping[str, Any], root: Path, path: str = "harness.md",
    lines: Mapping[str, int] | None = None,
) -> tuple[Config, list[Problem]]:
    """Build a Config from harness.md frontmatter. ``lines`` maps top-level keys to file lines."""
    lines = lines or {}
    problems: list[Problem] = []

    nested = getattr(lines, "key", None)  # frontmatter.KeyLines: positions of nested keys

    def err(key: str, msg: str, code: str = "config-invalid", severity: str = "error",
            sub: str | None = None) -> None:
        line, column = lines.get(key, 1), 1
        if nested is not None:
            line, column = nested((key,) if sub is None else (key, sub), (line, 1))
        problems.append(
            Problem(path=path, line=line, column=column, severity=severity,  # type: ignore[arg-type]
                    code=code, message=msg)
        )

    root = root.resolve()
    values: dict[str, Any] = {}
    for key, cls in _SECTIONS.items():
        if key not in data or data[key] is None:
            continue
        raw = data[key]
        if not isinstance(raw, Mapping):
            err(key, f"config {key} must be a mapping, got {a_type(raw)}")
            continue
        section = cls()
        known = {f.name for f in fields(cls)}
        updates: dict[str, Any] = {}
        for name, value in raw.items():
            if name not in known:
                close = difflib.get_close_matches(str(name), sorted(known), n=1)
                hint = f' (did you mean "{close[0]}"?)' if close else ""
                err(key, f"unknown config key {key}.{name}{hint}; known keys: "
                    f"{', '.join(sorted(known))}", code="config-unknown-key", severity="warning",
                    sub=name)
                continue
            coerced, msg = _coerce(key, name, getattr(section, name), value)
            if msg:
                err(key, msg, sub=name)
            else:
                updates[name] = coerced
        section = replace(section, **updates)
        if key == "fs":
            # SPEC §8.2: fs.protected can add paths, never remove the built-in ones.
            extra = tuple(p for p in section.protected if p not in ALWAYS_PROTECTED)
            section = replace(section, protected=ALWAYS_PROTECTED + extra)
        values[key] = section

    workspace = root
    if "workspace" in data and data["workspace"] is not None:
        ws = data["workspace"]
        if not isinstance(ws, str):
            err("workspace", f"config workspace must be a string, got {a_type(ws)}")
        else:
            candidate = (root / ws).resolve()
            if candidate != root and root not in candidate.parents:
                err("workspace", f'config workspace "{ws}" is outside the project root {root}')
            elif not candidate.exists():
                err("workspace", f'config workspace "{ws}" does not exist (looked for '
                    f"{candidate}); create the directory or fix the path")
            elif not candidate.is_dir():
                err("workspace", f'config workspace "{ws}" is not a directory; name the '
                    "directory the tools may work in")
            else:
                workspace = candidate
    return Config(root=root, workspace=workspace, **values), problems
