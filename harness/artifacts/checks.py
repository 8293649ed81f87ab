"""The checks behind loading and ``harness validate``, each a generator of Problems.

Like jsonschema's ``iter_errors``: a check yields every problem it finds, so
validate reports all of them, not the first. Field checks (:func:`tool_fields`,
:func:`hook_fields`) also return the values that passed, with defaults for the rest,
so a broken field never stops the rest of the artifact from loading.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from harness.artifacts.frontmatter import KeyLines
from harness.artifacts.model import TOOL_EVENTS, HookSpec, Problem, ToolSpec
from harness.artifacts.params import (
    METASCHEMA_URI,
    a_type,
    as_json,
    compile_error,
    compile_errors,
    schema_errors,
    suggest,
    unknown_keywords,
)
from harness.artifacts.problems import (
    EXTENSIONS,
    extensions_problem,
    json_path,
    origin_metadata,
    own_metadata,
)

NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
CUSTOM_EVENT_RE = re.compile(r"custom\.[A-Za-z0-9_][A-Za-z0-9_.-]*")
# ai-harness accepts any meta.<x> name; harness fires only meta.tool_register (=
# meta.register_tool): it has no runtime hook, agent or call registration, so any other
# meta.<x> hook would never run and is an error (event-never-fired).
META_EVENT_RE = re.compile(r"meta\.[A-Za-z0-9_][A-Za-z0-9_.-]*")
# ai-harness's sub-agent events: harness has no delegation, so they can never fire.
UNSUPPORTED_EVENTS = (
    "delegation.pre",
    "delegation.post",
    "delegation.post_verify",
    "delegate.pre",
    "delegate.post",
)

LOADING = ("always", "deferred")
ON_ERROR = ("block", "allow")
ARGUMENTS = ("note", "strict")  # harness/arguments.py MODES
ANNOTATION_KEYS = {
    "read_only": bool,
    "destructive": bool,
    "idempotent": bool,
    "open_world": bool,
    "title": str,
}
_META = {"$ref": METASCHEMA_URI}
# Every frontmatter key and the JSON Schema of its value: the checks below enforce these
# rules with better messages, and harness/schemas/*.json are generated from these tables.
TOOL_FIELDS: dict[str, dict[str, Any]] = {
    "parameters": {
        "type": ["object", "null"],
        "description": "Argument contract, in YAML order.",
        "propertyNames": {"minLength": 1},
        "additionalProperties": {"$ref": "#/$defs/parameter"},
    },
    "script": {
        "type": ["string", "null"],
        "description": "Starlark source; must define `def run(args):`.",
    },
    "timeout_ms": {
        "type": "integer",
        "minimum": 0,
        "default": 0,
        "description": "Wall-clock cap per call; 0 = no tool cap.",
    },
    "async": {
        "type": "boolean",
        "default": False,
        "description": "Reserved: parsed and kept, no effect yet.",
    },
    "returns": {
        "anyOf": [{"type": "null"}, {"type": "object", **_META}],
        "description": "JSON Schema of run's return value (MCP outputSchema).",
    },
    "annotations": {
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": {
            k: {"type": "boolean" if t is bool else "string"} for k, t in ANNOTATION_KEYS.items()
        },
    },
    "loading": {"enum": list(LOADING), "default": "always"},
    "enabled": {"type": "boolean", "default": True},
    "arguments": {
        "enum": list(ARGUMENTS),
        "description": "Unknown argument names: note (run, and say so in the "
        "result) or strict (refuse); default: harness.md `arguments`.",
    },
}
HOOK_FIELDS: dict[str, dict[str, Any]] = {
    "event": {
        "type": "string",
        "description": f"{', '.join(TOOL_EVENTS)} or custom.<name>",
        "anyOf": [
            {"enum": list(TOOL_EVENTS)},
            {"pattern": f"^{CUSTOM_EVENT_RE.pattern}$"},
            {"pattern": f"^{META_EVENT_RE.pattern}$"},
        ],
    },
    "priority": {
        "type": "integer",
        "default": 100,
        "description": "Lower runs first; ties in name order.",
    },
    "when": {
        "type": ["string", "null"],
        "description": "Starlark expression with `event` and `payload` bound.",
    },
    "script": {
        "type": "string",
        "description": "Starlark source; must define `def handle(event, payload):`.",
    },
    "timeout_ms": {"type": "integer", "minimum": 0, "default": 5000},
    "on_error": {"enum": list(ON_ERROR), "default": "block"},
}
HOOK_REQUIRED = ("event", "script")
# Extra keys of bundle / inline entries.
ENTRY_FIELDS: dict[str, dict[str, Any]] = {
    "name": {"type": "string", "pattern": f"^{NAME_RE.pattern}$"},
    "description": {"type": ["string", "null"]},
}
BUNDLE_FIELDS: dict[str, dict[str, Any]] = {
    "tools": {"type": ["array", "null"], "items": {"$ref": "#/$defs/toolEntry"}},
    "hooks": {"type": ["array", "null"], "items": {"$ref": "#/$defs/hookEntry"}},
    "description": {"type": ["string", "null"]},
}
TOOL_KEYS = tuple(TOOL_FIELDS)
HOOK_KEYS = tuple(HOOK_FIELDS)
ENTRY_KEYS = tuple(ENTRY_FIELDS)
BUNDLE_KEYS = tuple(BUNDLE_FIELDS)
UNKNOWN_KEY_CODES = (
    "unknown-key",
    "config-unknown-key",
    "parameter-unknown-key",
    "annotation-unknown-key",
)


@dataclass(slots=True, kw_only=True)
class Entry:
    """One tool or hook as read from a file or a list entry, before it becomes a spec."""

    kind: str  # "tool" | "hook"
    name: str
    data: Mapping[str, Any]
    lines: KeyLines
    base: tuple[Any, ...]  # () for a file artifact, ("tools", 3) for a list entry
    path: str
    layer: str
    body: str | None = None  # file artifacts: the Markdown body
    line: int = 1

    def pos(self, *keys: Any) -> tuple[int, int]:
        return self.lines.key((*self.base, *keys), (self.line, 1))

    def value_pos(self, *keys: Any) -> tuple[int, int]:
        return self.lines.value((*self.base, *keys), (self.line, 1))

    def problem(
        self, keys: tuple[Any, ...], code: str, message: str, severity: str = "error"
    ) -> Problem:
        line, column = self.pos(*keys)
        return Problem(
            path=self.path,
            line=line,
            column=column,
            code=code,
            message=message,
            severity=severity,  # type: ignore[arg-type]
        )

    @property
    def label(self) -> str:
        return f'{self.kind} "{self.name}"'


def unknown_keys(entry: Entry, known: Iterable[str]) -> Iterator[Problem]:
    """An error for each top-level key nobody reads, with a did-you-mean (issue 23: a
    misspelt key changes what the artifact does). ``x-`` keys and ``extensions:`` are
    people's own metadata."""
    known = tuple(known)
    why = extensions_problem(entry.data)
    if why is not None:
        yield entry.problem((EXTENSIONS,), "field-type", f"{entry.label} {why}")
    for key in entry.data:
        if key in known or own_metadata(key):
            continue
        origin = origin_metadata(entry.label, key)
        if origin is not None:
            yield entry.problem((key,), "unknown-key", origin, "warning")
            continue
        text = str(key)
        if entry.body is not None:
            # "description" is not a frontmatter key of a file artifact, but a near miss of
            # it deserves the same advice as the key itself.
            hint = suggest(text, (*known, "description"))
            if hint == ' (did you mean "description"?)' or text == "description":
                body = f"the description of a {entry.kind} file is its Markdown body; move it there"
                yield entry.problem(
                    (key,),
                    "unknown-key",
                    f"{entry.label} has unknown key "
                    f'"{text}"{hint if text != "description" else ""}; {body}',
                )
                continue
        hint = suggest(text, known)
        if hint:
            how = f"rename it{hint}"
        else:
            how = f"known keys: {', '.join(known)} (your own metadata: x-... or extensions:)"
        yield entry.problem((key,), "unknown-key", f'{entry.label} has unknown key "{text}"; {how}')


def _bool(entry: Entry, key: str, values: dict[str, Any], dest: str, errors: list[Problem]) -> None:
    if key not in entry.data:
        return
    value = entry.data[key]
    if isinstance(value, bool):
        values[dest] = value
    else:
        errors.append(
            entry.problem(
                (key,),
                "field-type",
                f"{entry.label} {key} must be true or false, got {as_json(value)}",
            )
        )


def _timeout(entry: Entry, values: dict[str, Any], errors: list[Problem]) -> None:
    if "timeout_ms" not in entry.data:
        return
    value = entry.data["timeout_ms"]
    if isinstance(value, bool) or not isinstance(value, int):
        errors.append(
            entry.problem(
                ("timeout_ms",),
                "field-type",
                f"{entry.label} timeout_ms "
                "must be an integer number of milliseconds, got "
                f"{as_json(value)}",
            )
        )
    elif value < 0:
        errors.append(
            entry.problem(
                ("timeout_ms",),
                "timeout-negative",
                f"{entry.label} timeout_ms must be >= 0 (got {value}); use 0 for no per-call cap",
            )
        )
    else:
        values["timeout_ms"] = value


def _script(entry: Entry, key: str, values: dict[str, Any], errors: list[Problem]) -> None:
    if key not in entry.data or entry.data[key] is None:
        return
    value = entry.data[key]
    if not isinstance(value, str):
        errors.append(
            entry.problem(
                (key,),
                "field-type",
                f"{entry.label} {key} must be Starlark "
                f"source text (use `{key}: |` and indent the code), got "
                f"{a_type(value)}",
            )
        )
        return
    values[key] = value
    line, column = entry.value_pos(key)
    values[f"{key}_line"] = line
    values[f"{key}_column"] = column


def _choice(
    entry: Entry,
    key: str,
    choices: tuple[str, ...],
    values: dict[str, Any],
    errors: list[Problem],
    code: str,
) -> None:
    if key not in entry.data:
        return
    value = entry.data[key]
    if isinstance(value, str) and value in choices:
        values[key] = value
    else:
        hint = suggest(str(value), choices)
        errors.append(
            entry.problem(
                (key,),
                code,
                f"{entry.label} {key} must be one of "
                f"{', '.join(choices)}; got {as_json(value)}{hint}",
            )
        )


def tool_fields(entry: Entry) -> tuple[dict[str, Any], list[Problem]]:
    """Type-check a tool's fields; return (valid values, problems)."""
    values: dict[str, Any] = {}
    errors: list[Problem] = []
    _script(entry, "script", values, errors)
    _timeout(entry, values, errors)
    _bool(entry, "async", values, "is_async", errors)
    _bool(entry, "enabled", values, "enabled", errors)
    _choice(entry, "loading", LOADING, values, errors, "loading-invalid")
    _choice(entry, "arguments", ARGUMENTS, values, errors, "arguments-invalid")
    if entry.data.get("returns") is not None:
        returns = entry.data["returns"]
        if isinstance(returns, dict):
            values["returns"] = returns
        else:
            errors.append(
                entry.problem(
                    ("returns",),
                    "returns-invalid",
                    f"{entry.label} returns must be a JSON Schema mapping, got {a_type(returns)}",
                )
            )
    if entry.data.get("annotations") is not None:
        ann = entry.data["annotations"]
        if not isinstance(ann, dict):
            errors.append(
                entry.problem(
                    ("annotations",),
                    "annotations-invalid",
                    f"{entry.label} annotations must be a mapping of "
                    f"{', '.join(ANNOTATION_KEYS)}, got {a_type(ann)}",
                )
            )
        else:
            good: dict[str, Any] = {}
            for key, value in ann.items():
                want = ANNOTATION_KEYS.get(key) if isinstance(key, str) else None
                if want is None:
                    errors.append(
                        entry.problem(
                            ("annotations", key),
                            "annotation-unknown-key",
                            f'{entry.label} annotations has unknown key "{key}"'
                            f"{suggest(str(key), ANNOTATION_KEYS)}; known: "
                            f"{', '.join(ANNOTATION_KEYS)}",
                            "warning",
                        )
                    )
                elif not isinstance(value, want):
                    expected = "true or false" if want is bool else "a string"
                    errors.append(
                        entry.problem(
                            ("annotations", key),
                            "annotations-invalid",
                            f"{entry.label} annotations.{key} must be "
                            f"{expected}, got {as_json(value)}",
                        )
                    )
                else:
                    good[key] = value
            values["annotations"] = good
    return values, errors


def event_problem(entry: Entry) -> Problem | None:
    if "event" not in entry.data or entry.data["event"] is None:
        return entry.problem(
            (),
            "event-missing",
            f"{entry.label} has no event; add `event:` "
            f"with one of {', '.join(TOOL_EVENTS)} or custom.<name>",
        )
    event = entry.data["event"]
    if isinstance(event, str) and (event in UNSUPPORTED_EVENTS or event.startswith("delegation.")):
        return entry.problem(
            ("event",),
            "event-unsupported",
            f"{entry.label} event {event!r} is "
            "an ai-harness sub-agent (delegation) event; harness has no "
            "sub-agents or delegation, so it would never fire; remove the "
            "hook or move its check to tool.pre / agent.stop",
        )
    if isinstance(event, str) and META_EVENT_RE.fullmatch(event):
        if event in TOOL_EVENTS:
            return None
        return entry.problem(
            ("event",),
            "event-never-fired",
            f"{entry.label} event {event!r} is never fired: of the meta.* events harness "
            "fires only meta.tool_register (alias meta.register_tool), when a script "
            "registers a tool; harness has no meta.call_tool, meta.register_hook or "
            "meta.register_agent, so this hook would never run; remove it or use one of "
            f"{', '.join(TOOL_EVENTS)}",
        )
    if not isinstance(event, str) or not (event in TOOL_EVENTS or CUSTOM_EVENT_RE.fullmatch(event)):
        return entry.problem(
            ("event",),
            "event-unknown",
            f"{entry.label} event "
            f"{as_json(event)} is unknown{suggest(str(event), TOOL_EVENTS)}; "
            f"use one of {', '.join(TOOL_EVENTS)} or custom.<name>",
        )
    return None


def hook_fields(entry: Entry) -> tuple[dict[str, Any], list[Problem]]:
    """Type-check a hook's fields; return (valid values, problems)."""
    values: dict[str, Any] = {}
    errors: list[Problem] = []
    bad_event = event_problem(entry)
    if bad_event is not None:
        errors.append(bad_event)
    else:
        values["event"] = entry.data["event"]
    _script(entry, "script", values, errors)
    if entry.data.get("script") is None:
        errors.append(
            entry.problem(
                (),
                "hook-script-missing",
                f"{entry.label} has no script; add "
                "`script: |` with a `def handle(event, payload):` function",
            )
        )
    _script(entry, "when", values, errors)
    _timeout(entry, values, errors)
    _choice(entry, "on_error", ON_ERROR, values, errors, "on-error-invalid")
    if "priority" in entry.data:
        value = entry.data["priority"]
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(
                entry.problem(
                    ("priority",),
                    "field-type",
                    f"{entry.label} priority "
                    "must be an integer (lower runs first), got "
                    f"{as_json(value)}",
                )
            )
        else:
            values["priority"] = value
    return values, errors


def name_problems(entry: Entry) -> Iterator[Problem]:
    if not NAME_RE.fullmatch(entry.name):
        where = "rename the file" if entry.body is not None else "change its name"
        yield entry.problem(
            ("name",) if entry.body is None else (),
            f"{entry.kind}-name-invalid",
            f'{entry.kind} name "{entry.name}" is invalid: it must start with a '
            'letter and contain only letters, digits, "_", "." or "-" (at most '
            f"64 characters); {where}",
        )


def collisions(
    tools: Mapping[str, ToolSpec], where: Callable[[ToolSpec], tuple[str, int, int]]
) -> Iterator[Problem]:
    """Tool names that become equal when a provider's export replaces ``.`` by ``_``
    (:func:`harness.artifacts.export.without_clashes`, the one rule)."""
    from harness.artifacts.export import export_name, without_clashes

    _kept, clashes = without_clashes(sorted(tools))
    for name, other_name in clashes:
        spec, other = tools[name], tools[other_name]
        exported = export_name(name)
        path, line, column = where(spec)
        opath, oline, _ = where(other)
        yield Problem(
            path=path,
            line=line,
            column=column,
            code="tool-name-collision",
            message=f'tool "{name}" and tool "{other.name}" ({opath}:{oline}) both '
            f'export as "{exported}" (providers that forbid "." get "_"); '
            "rename one of them",
        )


def schema_problems(entry: Entry, spec: ToolSpec) -> Iterator[Problem]:
    """The generated input schema and ``returns`` must be valid Draft 2020-12 schemas.

    Each is compiled as a call compiles it (which includes the metaschema check). Only
    when that fails: every metaschema error with its path, else the regular expressions
    and ``$ref`` targets that broke it (remote references are refused).
    """
    complete = len(spec.parameters) == len(spec.input_schema.get("properties", ()))
    failure = compile_error(spec.input_schema) if complete else None
    if failure is not None or not complete:
        checked = {"type": "object", "properties": {p.name: p.schema for p in spec.parameters}}
        bad = False
        for where, message in schema_errors(checked):
            bad = True
            inside = where[:1] == ("properties",)
            yield entry.problem(
                ("parameters", *where[1:]) if inside else ("parameters",),
                "parameters-schema-invalid",
                f"{entry.label} parameters are not "
                f"a valid JSON Schema at {json_path(where[1:])}: {message}",
            )
        if not bad and failure is not None:
            root = "the tool's whole input schema (type, properties, required)"
            for where, key_path, message in compile_errors(spec.input_schema, root, failure):
                inside = where[:1] == ("properties",)
                yield entry.problem(
                    ("parameters", *key_path[1:]) if inside else ("parameters",),
                    "parameters-schema-invalid",
                    f"{entry.label} parameters are "
                    f"not a valid JSON Schema at "
                    f"{json_path(where[1:] if inside else ())}: {message}",
                )
    if spec.returns is None:
        return
    # Keys no validator reads, as in parameters; a piece of a sentence is the YAML
    # flow-mapping comma trap, explained.
    for key_path, message, prose in unknown_keywords(spec.returns):
        at = "" if len(key_path) == 1 else f" at {json_path(key_path[:-1])}"
        yield entry.problem(
            ("returns", *key_path),
            "schema-flow-comma" if prose else "returns-unknown-key",
            f"{entry.label} returns{at}: {message}"
            if prose
            else f"{entry.label} returns{at} has {message}",
            "warning",
        )
    failure = compile_error(spec.returns)
    if failure is None:
        return
    bad = False
    for where, message in schema_errors(spec.returns):
        bad = True
        yield entry.problem(
            ("returns", *where),
            "returns-invalid",
            f"{entry.label} returns is not a valid JSON Schema at {json_path(where)}: {message}",
        )
    if not bad:
        for where, key_path, message in compile_errors(spec.returns, "the returns schema", failure):
            yield entry.problem(
                ("returns", *key_path),
                "returns-invalid",
                f"{entry.label} "
                f"returns is not a valid JSON Schema at {json_path(where)}: "
                f"{message}",
            )


def script_warnings(entry: Entry, spec: ToolSpec) -> Iterator[Problem]:
    # A script of the wrong type already has its field-type error: no second problem.
    if spec.script is None and entry.data.get("script") is None:
        yield entry.problem(
            (),
            "tool-no-script",
            f"{entry.label} has no script: it needs a Python "
            "handler bound with Harness.bind(), or add `script: |` with a "
            "`def run(args):` function",
            "warning",
        )


def hook_summary(spec: HookSpec) -> str:  # pragma: no cover - debugging aid
    return f"{spec.name} {spec.event} {spec.priority}"


SCHEMA_FILES = {
    "tool": (
        "harness tool artifact frontmatter",
        "Frontmatter of .harness/tools/NAME.md (docs/spec.md \u00a73). "
        "The body is the description.",
    ),
    "hook": (
        "harness hook artifact frontmatter",
        "Frontmatter of .harness/hooks/NAME.md (docs/spec.md \u00a74). "
        "The body is the description.",
    ),
    "bundle": (
        "harness bundle frontmatter",
        "Frontmatter of .harness/builtins|plugins|overrides/*.md: lists of tools and hooks.",
    ),
    "harness": (
        "harness.md frontmatter",
        "Configuration of a harness project (docs/spec.md \u00a75). The body is the system prompt.",
    ),
    "server": (
        "harness upstream MCP server declaration",
        "Frontmatter of "
        ".harness/servers/NAME.md (docs/mcp-servers.md). The body is a note for humans.",
    ),
}
