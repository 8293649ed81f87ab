"""``harness.md`` frontmatter -> a frozen :class:`Config` with defaults (docs/spec.md §5).

``parse_config`` never raises for content problems: it returns the config built from
whatever was valid plus a list of :class:`Problem` for the rest. Defaults marked
as security invariants in docs/spec.md §8 can only be tightened.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple, get_type_hints

from harness.artifacts.domains import entry_problem
from harness.artifacts.problems import EXTENSION_PREFIX, Problem, a_type, as_json, suggest
from harness.config_mounts import mount_problem, venv_problem
from harness.config_serve import ServeConfig, serve_schema, serve_section
from harness.protected import ALWAYS_PROTECTED
from harness.state.limits import DEFAULT as STATE
from harness.state.limits import config_problems as state_problems

DEFAULT_ENV = ("PATH", "HOME", "LANG", "TERM")


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    max_output_bytes: int = 65536
    max_tool_calls_per_turn: int = 10
    max_timeout_ms: int = 600000
    # timeout_ms of a tool or hook that sets none (0: none, up to max_timeout_ms)
    default_timeout_ms: int = 30000
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
    # Extra host directories bound read-only into the sandbox (toolchains).
    mounts: tuple[str, ...] = ()
    # What exec.run keeps of a command's stdout and of its stderr; the model sees at
    # most limits.max_output_bytes of a result, read_output pages through the rest.
    max_capture_bytes: int = 16 << 20
    # The project's virtualenv (relative to the root), first on the sandbox PATH;
    # unset: .venv/ or venv/ in the workspace when there is one.
    venv: str | None = None


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
class StateConfig:
    """Where ``harness serve`` keeps shared state (spilled outputs, cache, metrics)."""

    backend: str = "memory"  # memory | redis
    url: str | None = None  # redis://host:port/db (backend: redis)
    namespace: str = "harness"  # key prefix in Redis: replicas of one service share it
    spill_ttl_s: int = 3600  # seconds a read_output ref stays readable
    # Bounds of every session's state together and of one (harness/state/limits.py).
    max_bytes: int = STATE.max_bytes  # past it, least recently used sessions are evicted
    max_keys: int = STATE.max_items  # cache entries + counters + outputs, all sessions
    max_session_bytes: int = STATE.session_cache_bytes  # one session's cache
    value_ttl_s: int = int(STATE.value_ttl_s)  # an idle session's state is dropped


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelConfig:
    """Agent-loop defaults (docs/spec.md §13); flags override them."""

    provider: str = "openai"  # openai | anthropic | copilot
    name: str = ""
    base_url: str = ""
    api_key_env: str = ""
    max_tokens: int = 4096
    # What was wrong with the block (harness.md), for `harness run` to refuse on: a bad
    # model block is a warning everywhere else. Not a key of harness.md.
    problems: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClockConfig:
    """``clock: {fixed: "2026-01-05T09:00:00Z"}`` freezes ``time.now`` (tests)."""

    fixed: str | None = None  # RFC 3339; None = the real clock


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
    clock: ClockConfig = field(default_factory=ClockConfig)
    # Variables set for commands (name, value), on top of exec.env: what a test case's
    # `env:` gives (harness test). Not a harness.md key.
    env_values: tuple[tuple[str, str], ...] = ()
    # harness test only: exec.run and http.* ask the case's fakes first
    # (runtime/doubles.py). Not a harness.md key.
    doubles: bool = False
    state: StateConfig = field(default_factory=StateConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)  # harness serve (config_serve.py)
    # Unknown argument names: "note" (the call runs, the result says so) or "strict".
    arguments: str = "note"


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
    "clock": ClockConfig,
    "state": StateConfig,
}
# A section added to Config is a known harness.md key (parsed, checked) with no 2nd list;
# `serve` has a parser of its own (config_serve.serve_section: nested rate_limit, off).
_SECTIONS.update(
    {
        k: v
        for k, v in get_type_hints(Config).items()
        if isinstance(v, type) and is_dataclass(v) and k != "serve"
    }
)
_CHOICES = {
    ("runtime", "isolation"): ("process", "inprocess"),
    ("exec", "sandbox"): ("auto", "required", "off"),
    ("model", "provider"): ("openai", "anthropic", "copilot"),
    ("state", "backend"): ("memory", "redis"),
}
# Integer fields for which 0 is meaningful (no cap); every other integer must be > 0.
_ZERO_OK = ("max_timeout_ms", "default_timeout_ms")
# Dataclass fields that are not harness.md keys.
_INTERNAL = ("problems",)
# Keys of harness.md frontmatter that are not config sections.
OTHER_KEYS = ("tools", "hooks", "workspace", "arguments", "mcp_servers", "serve")
ARGUMENT_MODES = ("note", "strict")
KNOWN_KEYS = tuple(sorted((*_SECTIONS, *OTHER_KEYS)))


def _coerce(section: str, name: str, default: Any, value: Any) -> tuple[Any, str | None]:  # noqa: C901
    """Return (value, error message or None) for one section field."""
    where = f"{section}.{name}"
    if (section, name) == ("exec", "sandbox") and value is False:
        # YAML 1.1 reads a bare `off` (the spelling of docs/spec.md §5) as the boolean false.
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
            return default, (
                f"config {where} must be a list of strings, got {a_type(bad[0])} "
                f"({as_json(bad[0])}) in it; quote it"
            )
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
        return default, f"config {where} must be one of {', '.join(choices)}; got {as_json(value)}"
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
        out[key] = {
            "type": ["object", "null"],
            "additionalProperties": False,
            "patternProperties": {f"^{EXTENSION_PREFIX}": {}},
            "properties": {
                f.name: _field_schema(key, f.name, getattr(section, f.name))
                for f in fields(cls)
                if f.name not in _INTERNAL
            },
        }
    return {**out, "serve": serve_schema()}


class ConfigFinding(NamedTuple):
    """One problem of harness.md's config, located by its key (and sub-key) only."""

    key: str
    message: str
    sub: str | None = None
    code: str = "config-invalid"
    severity: str = "error"


def parse_config(
    data: Mapping[str, Any],
    root: Path,
    path: str = "harness.md",
    lines: Mapping[str, int] | None = None,
) -> tuple[Config, list[Problem]]:
    """Build a Config from harness.md frontmatter. ``lines`` maps top-level keys to file lines."""
    root = root.resolve()
    values: dict[str, Any] = {"workspace": root}
    found = list(_findings(data, root, values))
    # Only the agent loop uses the model block: list, schema, call and serve work
    # without it, and `harness run` refuses to start (ModelConfig.problems).
    model = tuple(f.message for f in found if f.key == "model" and f.severity == "error")
    if model:
        values["model"] = replace(values.get("model", ModelConfig()), problems=model)
    problems = [_located(f, path, lines or {}) for f in found]
    return Config(root=root, **values), problems


def _located(f: ConfigFinding, path: str, lines: Mapping[str, int]) -> Problem:
    """The one place a config finding gets its file, line and column."""
    code, severity, message = f.code, f.severity, f.message
    if f.key == "model" and severity == "error":
        code, severity = "model-invalid", "warning"
        message += "; harness run refuses to start until this is fixed"
    line, column = lines.get(f.key, 1), 1
    nested = getattr(lines, "key", None)  # frontmatter.KeyLines: positions of nested keys
    if nested is not None:
        line, column = nested((f.key,) if f.sub is None else (f.key, f.sub), (line, 1))
    return Problem(
        path=path,
        line=line,
        column=column,
        severity=severity,  # type: ignore[arg-type]
        code=code,
        message=message,
    )


def _findings(
    data: Mapping[str, Any], root: Path, values: dict[str, Any]
) -> Iterator[ConfigFinding]:
    """The config's problems; what is valid goes into ``values`` (Config's fields)."""
    for key, cls in _SECTIONS.items():
        raw = data.get(key)
        if raw is None:
            continue
        if not isinstance(raw, Mapping):
            yield ConfigFinding(key, f"config {key} must be a mapping, got {a_type(raw)}")
            continue
        values[key] = yield from _section(key, cls, raw, root)
    if data.get("serve") is not None:
        found = serve_section(data["serve"], lambda m, k: ConfigFinding("serve", m, k or None))
        values["serve"] = yield from found
    if data.get("workspace") is not None:
        yield from _workspace(data["workspace"], root, values)
    if data.get("arguments") is not None:
        mode = data["arguments"]
        if isinstance(mode, str) and mode in ARGUMENT_MODES:
            values["arguments"] = mode
        else:
            yield ConfigFinding(
                "arguments",
                f"config arguments must be one of "
                f"{', '.join(ARGUMENT_MODES)}; got {as_json(mode)}"
                f"{suggest(mode, ARGUMENT_MODES)}",
            )


def _section(
    key: str, cls: Any, raw: Mapping[str, Any], root: Path
) -> Generator[ConfigFinding, None, Any]:
    """One config section: its findings, then (returned) the section value."""
    section = cls()
    known = {f.name for f in fields(cls)} - set(_INTERNAL)
    updates: dict[str, Any] = {}
    for name, value in raw.items():
        if name not in known:  # an error (issue 23); x-...: people's own metadata
            if not str(name).startswith(EXTENSION_PREFIX):
                yield ConfigFinding(
                    key,
                    f"unknown config key {key}.{name}{suggest(name, sorted(known))}; "
                    f"known keys: {', '.join(sorted(known))}",
                    name,
                    "config-unknown-key",
                )
            continue
        coerced, msg = _coerce(key, name, getattr(section, name), value)
        if msg:
            yield ConfigFinding(key, msg, name)
        else:
            updates[name] = coerced
    section = replace(section, **updates)
    return (yield from _section_rules(key, section, root))


def _section_rules(key: str, section: Any, root: Path) -> Generator[ConfigFinding, None, Any]:
    """The rules of particular sections, after their keys are coerced."""
    if key == "exec":
        section = yield from _exec_rules(section, root)
    for entry in section.allowed_domains if key == "network" else ():
        why = entry_problem(entry)
        if why:
            yield ConfigFinding(key, f"config {why}", "allowed_domains")
    if key == "clock" and section.fixed is not None:
        from datetime import datetime

        try:
            datetime.fromisoformat(section.fixed.strip())
        except ValueError:
            yield ConfigFinding(
                key,
                f'config clock.fixed "{section.fixed}" is not an RFC 3339 '
                'time; write it like "2026-01-05T09:00:00Z"',
                "fixed",
            )
            section = ClockConfig()
    if key == "state":
        for name, why in state_problems(section):
            yield ConfigFinding(key, why, name)
    if key == "fs":
        # docs/spec.md §8.2: fs.protected can add paths, never remove the built-in ones.
        extra = tuple(p for p in section.protected if p not in ALWAYS_PROTECTED)
        section = replace(section, protected=ALWAYS_PROTECTED + extra)
    return section


def _exec_rules(section: ExecConfig, root: Path) -> Generator[ConfigFinding, None, ExecConfig]:
    """exec.mounts entries the sandbox may bind; exec.venv a virtualenv."""
    kept = []
    for entry in section.mounts:
        why = mount_problem(entry, root)
        if why:
            yield ConfigFinding("exec", why, "mounts")
        else:
            kept.append(entry)
    section = replace(section, mounts=tuple(kept))
    if section.venv is not None:
        why = venv_problem(section.venv, root)
        if why:
            yield ConfigFinding("exec", why, "venv")
            section = replace(section, venv=None)
    return section


def _workspace(ws: Any, root: Path, values: dict[str, Any]) -> Iterator[ConfigFinding]:
    if not isinstance(ws, str):
        yield ConfigFinding("workspace", f"config workspace must be a string, got {a_type(ws)}")
        return
    candidate = (root / ws).resolve()
    if candidate != root and root not in candidate.parents:
        yield ConfigFinding(
            "workspace", f'config workspace "{ws}" is outside the project root {root}'
        )
    elif not candidate.exists():
        yield ConfigFinding(
            "workspace",
            f'config workspace "{ws}" does not exist (looked for '
            f"{candidate}); create the directory or fix the path",
        )
    elif not candidate.is_dir():
        yield ConfigFinding(
            "workspace",
            f'config workspace "{ws}" is not a directory; name the directory the tools may work in',
        )
    else:
        values["workspace"] = candidate
