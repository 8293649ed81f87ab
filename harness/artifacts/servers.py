"""Upstream MCP server declarations: ``.harness/servers/NAME.md`` and ``mcp_servers:``.

Pure: frontmatter in, a frozen :class:`ServerSpec` and :class:`Problem` s out. Nothing
here starts a process or opens a connection (``harness validate`` stays offline);
``harness/upstream/`` does that.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from harness.artifacts.checks import Entry, unknown_keys
from harness.artifacts.domains import entry_problem
from harness.artifacts.model import (  # noqa: F401 - the specs: re-exported
    DEFAULT_RETRY,
    DEFAULT_TIMEOUT_MS,
    Problem,
    RetrySpec,
    ServerSpec,
    Source,
    ToolSettings,
)
from harness.artifacts.params import a_type, suggest
from harness.artifacts.problems import EXTENSION_PATTERN, EXTENSION_SCHEMA, EXTENSIONS

SERVER_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
ENV_REF_RE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
ANY_REF_RE = re.compile(r"\$\{[^}]*\}")
RETRY_CLASSES = ("transient", "timeout", "5xx")
LOADING = ("eager", "deferred")
SANDBOX = ("auto", "required", "off")
SERVER_KEYS = (
    "command",
    "env",
    "cwd",
    "url",
    "headers",
    "tools",
    "per_tool",
    "timeout_ms",
    "loading",
    "retry",
    "sandbox",
    "network",
    "enabled",
)
INLINE_KEYS = (*SERVER_KEYS, "description")
RETRY_KEYS = ("max_attempts", "retry_on", "backoff_ms", "retry_non_idempotent")
PER_TOOL_KEYS = ("timeout_ms", "retry")


def env_refs(value: str) -> list[str]:
    """The operator environment variables a value names with ``${env:NAME}``."""
    return ENV_REF_RE.findall(value)


def expand(value: str, environ: Mapping[str, str]) -> str:
    """``value`` with every ``${env:NAME}`` replaced; KeyError names a missing variable."""
    return ENV_REF_RE.sub(lambda m: environ[m.group(1)], value)


def build(entry: Entry) -> tuple[ServerSpec, list[Problem]]:  # noqa: C901
    """A server spec from its declaration; every problem names the file and line."""
    errs: list[Problem] = []
    data = entry.data
    label = entry.label
    errs.extend(unknown_keys(entry, SERVER_KEYS if entry.body is not None else INLINE_KEYS))
    if not SERVER_NAME_RE.fullmatch(entry.name):
        errs.append(
            entry.problem(
                ("name",) if entry.body is None else (),
                "name-invalid",
                f"{label}: the name must match [A-Za-z][A-Za-z0-9_-]{{0,31}} "
                '(no dots: its tools are named "SERVER.TOOL")',
            )
        )
    values: dict[str, Any] = {}

    def bad(keys: tuple[Any, ...], msg: str, code: str = "field-invalid") -> None:
        errs.append(entry.problem(keys, code, f"{label} {msg}"))

    command, url = data.get("command"), data.get("url")
    if command is not None and url is not None:
        bad(("url",), "has both command (stdio) and url (HTTP); keep one")
    elif command is None and url is None:
        errs.append(
            entry.problem(
                (),
                "server-transport",
                f"{label} needs either command: "
                "[program, args...] (stdio) or url: (streamable HTTP)",
            )
        )
    if command is not None:
        if isinstance(command, str):
            command = command.split()
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(c, str) and c for c in command)
        ):
            bad(
                ("command",),
                "command must be a non-empty list of strings "
                "[program, arg, ...], got " + a_type(command),
            )
        else:
            values["command"] = tuple(command)
            values["transport"] = "stdio"
    if url is not None:
        if not isinstance(url, str) or not re.match(r"https?://[^/\s]+", url):
            bad(("url",), f"url must be an http:// or https:// URL, got {url!r}")
        else:
            values["url"] = url
            values["transport"] = "http"
    for key in ("env", "headers"):
        raw = data.get(key)
        if raw is None:
            continue
        if not isinstance(raw, Mapping):
            bad((key,), f"{key} must be a mapping NAME: value, got {a_type(raw)}")
            continue
        out: dict[str, str] = {}
        for k, v in raw.items():
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                bad(
                    (key, k),
                    f'{key} "{k}" must be a string (an explicit value or '
                    f"${{env:NAME}}), got {a_type(v)}",
                )
                continue
            text = str(v)
            for ref in ANY_REF_RE.findall(text):
                if not ENV_REF_RE.fullmatch(ref):
                    bad(
                        (key, k),
                        f'{key} "{k}" has {ref}; the only substitution is '
                        "${env:NAME} (a variable of the operator's environment)",
                    )
            out[str(k)] = text
        values[key] = out
    if "env" in values and "url" in values:
        bad(("env",), "env applies to stdio servers only; use headers: for an HTTP server")
    if "headers" in values and "command" in values:
        bad(("headers",), "headers apply to HTTP servers only; use env: for a stdio server")
    cwd = data.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str):
            bad(("cwd",), f"cwd must be a string (relative to the workspace), got {a_type(cwd)}")
        else:
            values["cwd"] = cwd
    _tools(entry, values, bad)
    _timeout(data.get("timeout_ms"), ("timeout_ms",), "timeout_ms", values, bad)
    for key, choices in (("loading", LOADING), ("sandbox", SANDBOX)):
        raw = data.get(key)
        if raw is False and key == "sandbox":
            raw = "off"  # YAML reads a bare `off` as false
        if raw is None:
            continue
        if raw not in choices:
            bad((key,), f"{key} must be one of {', '.join(choices)}, got {raw!r}")
        else:
            values[key] = raw
    retry = data.get("retry")
    if retry is not None:
        values["retry"] = _retry(retry, ("retry",), bad)
    net = data.get("network")
    if net is not None:
        domains = net.get("allowed_domains") if isinstance(net, Mapping) else None
        if (
            not isinstance(net, Mapping)
            or not isinstance(domains, list)
            or not all(isinstance(d, str) and d for d in domains)
        ):
            bad(("network",), "network must be {allowed_domains: [domain, ...]}")
        else:
            values["allowed_domains"] = tuple(domains)
            for domain in domains:
                if (why := entry_problem(domain)) is not None:
                    bad(("network", "allowed_domains"), why)
    enabled = data.get("enabled")
    if enabled is not None:
        if not isinstance(enabled, bool):
            bad(("enabled",), f"enabled must be true or false, got {a_type(enabled)}")
        else:
            values["enabled"] = enabled
    errs.extend(_sandbox_problems(entry, values))
    description = entry.body if entry.body is not None else str(data.get("description") or "")
    spec = ServerSpec(
        name=entry.name,
        description=description,
        source=Source(path=entry.path, line=entry.line, layer=entry.layer),
        **values,
    )
    return spec, errs


def _timeout(raw: Any, keys: tuple[Any, ...], dest: str, values: dict[str, Any], bad: Any) -> None:
    if raw is None:
        return
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        bad(keys, f"timeout_ms must be an integer > 0 (milliseconds), got {raw!r}")
    else:
        values[dest] = raw


def _tools(entry: Entry, values: dict[str, Any], bad: Any) -> None:  # noqa: C901
    raw = entry.data.get("tools")
    if raw is not None:
        if not isinstance(raw, Mapping):
            bad(("tools",), f"tools must be {{allow: [globs], deny: [globs]}}, got {a_type(raw)}")
        else:
            for key in raw:
                if key not in ("allow", "deny"):
                    bad(
                        ("tools", key),
                        f'tools has unknown key "{key}"'
                        f"{suggest(str(key), ('allow', 'deny'))}; known keys: allow, deny",
                    )
            for key in ("allow", "deny"):
                globs = raw.get(key)
                if globs is None:
                    continue
                if not isinstance(globs, list) or not all(isinstance(g, str) for g in globs):
                    bad(("tools", key), f"tools.{key} must be a list of glob patterns")
                else:
                    values[key] = tuple(globs)
    per = entry.data.get("per_tool")
    if per is None:
        return
    if not isinstance(per, Mapping):
        bad(("per_tool",), "per_tool must map upstream tool names to {timeout_ms, retry}")
        return
    out: dict[str, ToolSettings] = {}
    for tool, settings in per.items():
        if not isinstance(settings, Mapping):
            bad(("per_tool", tool), f'per_tool "{tool}" must be a mapping {{timeout_ms, retry}}')
            continue
        for key in settings:
            if key not in PER_TOOL_KEYS:
                bad(
                    ("per_tool", tool, key),
                    f'per_tool "{tool}" has unknown key "{key}"'
                    f"{suggest(str(key), PER_TOOL_KEYS)}; known keys: {', '.join(PER_TOOL_KEYS)}",
                )
        one: dict[str, Any] = {}
        _timeout(
            settings.get("timeout_ms"), ("per_tool", tool, "timeout_ms"), "timeout_ms", one, bad
        )
        if settings.get("retry") is not None:
            one["retry"] = _retry(settings["retry"], ("per_tool", tool, "retry"), bad)
        out[str(tool)] = ToolSettings(**one)
    values["per_tool"] = out


def _retry(raw: Any, keys: tuple[Any, ...], bad: Any) -> RetrySpec:  # noqa: C901
    where = ".".join(str(k) for k in keys)
    if not isinstance(raw, Mapping):
        bad(
            keys,
            f"{where} must be a mapping {{max_attempts, retry_on, backoff_ms}}, got {a_type(raw)}",
        )
        return RetrySpec()
    out: dict[str, Any] = {}
    for key in raw:
        if key not in RETRY_KEYS:
            bad(
                (*keys, key),
                f'{where} has unknown key "{key}"{suggest(str(key), RETRY_KEYS)}; '
                f"known keys: {', '.join(RETRY_KEYS)}",
            )
    n = raw.get("max_attempts")
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10:
            bad(
                (*keys, "max_attempts"),
                f"{where}.max_attempts must be an integer from 1 to 10 "
                f"(every attempt counts, the first included), got {n!r}",
            )
        else:
            out["max_attempts"] = n
    on = raw.get("retry_on")
    if on is not None:
        if not isinstance(on, list) or not all(isinstance(c, str) for c in on):
            bad(
                (*keys, "retry_on"),
                f"{where}.retry_on must be a list of failure classes ({', '.join(RETRY_CLASSES)})",
            )
        else:
            unknown = [c for c in on if c not in RETRY_CLASSES]
            for c in unknown:
                bad(
                    (*keys, "retry_on"),
                    f'{where}.retry_on has unknown failure class "{c}"'
                    f"{suggest(c, RETRY_CLASSES)}; known classes: {', '.join(RETRY_CLASSES)}",
                )
            if not unknown:
                out["retry_on"] = tuple(on)
    b = raw.get("backoff_ms")
    if b is not None:
        if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= 60000:
            bad(
                (*keys, "backoff_ms"),
                f"{where}.backoff_ms must be an integer from 0 to 60000, got {b!r}",
            )
        else:
            out["backoff_ms"] = b
    ni = raw.get("retry_non_idempotent")
    if ni is not None:
        if not isinstance(ni, bool):
            bad(
                (*keys, "retry_non_idempotent"),
                f"{where}.retry_non_idempotent must be true or false",
            )
        else:
            out["retry_non_idempotent"] = ni
    return RetrySpec(**out)


def _sandbox_problems(entry: Entry, values: Mapping[str, Any]) -> Iterator[Problem]:
    stdio = values.get("transport", "stdio") == "stdio" and "url" not in values
    sandbox = values.get("sandbox")
    if stdio and sandbox == "off":
        yield entry.problem(
            ("sandbox",),
            "server-unsandboxed",
            f"{entry.label} runs WITHOUT the command sandbox (sandbox: off): "
            "it can read and write anything this user can, and reach the "
            "network; remove sandbox: off unless the server needs that",
            severity="warning",
        )
    if not stdio and sandbox is not None:
        yield entry.problem(
            ("sandbox",),
            "field-invalid",
            f"{entry.label} sandbox applies to "
            "stdio servers only (an HTTP server runs elsewhere); remove it",
            severity="warning",
        )
    if values.get("allowed_domains") and stdio and sandbox == "off":
        yield entry.problem(
            ("network",),
            "server-network",
            (
                f"{entry.label} network.allowed_domains has no effect with sandbox: off (the "
                "server then has the whole network); remove sandbox: off to limit it"
            ),
            severity="warning",
        )
    if values.get("allowed_domains") and not stdio:
        yield entry.problem(
            ("network",),
            "field-invalid",
            f"{entry.label} network applies to stdio servers only; remove it",
            severity="warning",
        )


def inline_entries(raw: Any, lines: Any, path: str, problems: list[Problem]) -> list[Entry]:
    """The ``mcp_servers:`` mapping of harness.md (name -> settings) as entries."""
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        line, column = lines.key(("mcp_servers",))
        problems.append(
            Problem(
                path=path,
                line=line,
                column=column,
                code="config-invalid",
                message="mcp_servers must be a mapping NAME: {command: ..., "
                f"...}}, got {a_type(raw)}",
            )
        )
        return []
    out = []
    for name, data in raw.items():
        line, column = lines.key(("mcp_servers", name))
        if not isinstance(data, Mapping):
            problems.append(
                Problem(
                    path=path,
                    line=line,
                    column=column,
                    code="entry-invalid",
                    message=f'mcp_servers "{name}" must be a mapping of '
                    f"settings, got {a_type(data)}",
                )
            )
            continue
        out.append(
            Entry(
                kind="server",
                name=str(name),
                data=data,
                lines=lines,
                base=("mcp_servers", name),
                path=path,
                layer="inline",
                line=line,
            )
        )
    return out


def server_schema() -> dict[str, Any]:
    """JSON Schema of a server declaration (``.harness/servers/NAME.md`` frontmatter and
    each ``mcp_servers:`` entry), published for editors."""
    values = {"type": "object", "additionalProperties": {"type": ["string", "number"]}}
    retry = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "max_attempts": {
                "type": "integer",
                "minimum": 1,
                "maximum": 10,
                "description": "Every attempt counts, the first included.",
            },
            "retry_on": {"type": "array", "items": {"enum": list(RETRY_CLASSES)}},
            "backoff_ms": {"type": "integer", "minimum": 0, "maximum": 60000},
            "retry_non_idempotent": {"type": "boolean"},
        },
    }
    timeout = {"type": "integer", "minimum": 1}
    globs = {"type": "array", "items": {"type": "string"}}
    return {
        "type": "object",
        "additionalProperties": False,
        "patternProperties": EXTENSION_PATTERN,
        "properties": {
            EXTENSIONS: EXTENSION_SCHEMA,
            "command": {
                "type": ["array", "string"],
                "items": {"type": "string", "minLength": 1},
                "minItems": 1,
                "description": "stdio server: [program, args...]",
            },
            "env": {
                **values,
                "description": "Values, or ${env:NAME} from the operator's environment.",
            },
            "cwd": {"type": "string"},
            "url": {"type": "string", "pattern": "^https?://", "description": "streamable HTTP"},
            "headers": values,
            "tools": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"allow": globs, "deny": globs},
            },
            "per_tool": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"timeout_ms": timeout, "retry": retry},
                },
            },
            "timeout_ms": timeout,
            "loading": {"enum": list(LOADING)},
            "retry": retry,
            "sandbox": {"enum": [*SANDBOX, False]},
            "network": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"allowed_domains": {"type": "array", "items": {"type": "string"}}},
            },
            "enabled": {"type": "boolean"},
            "description": {"type": "string"},
        },
    }
