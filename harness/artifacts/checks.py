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
from harness.artifacts.params import schema_errors, suggest, type_name

NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
CUSTOM_EVENT_RE = re.compile(r"custom\.[A-Za-z0-9_][A-Za-z0-9_.-]*")

TOOL_KEYS = ("parameters", "script", "timeout_ms", "async", "returns", "annotations", "loading",
             "enabled")
HOOK_KEYS = ("event", "priority", "when", "script", "timeout_ms", "on_error")
ENTRY_KEYS = ("name", "description")  # extra keys of bundle / inline entries
BUNDLE_KEYS = ("tools", "hooks", "description")
ANNOTATION_KEYS = {"read_only": bool, "destructive": bool, "idempotent": bool,
                   "open_world": bool, "title": str}
UNKNOWN_KEY_CODES = ("unknown-key", "config-unknown-key", "parameter-unknown-key",
                     "annotation-unknown-key")


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

    def problem(self, keys: tuple[Any, ...], code: str, message: str,
                severity: str = "error") -> Problem:
        line, column = self.pos(*keys)
        return Problem(path=self.path, line=line, column=column, code=code, message=message,
                       severity=severity)  # type: ignore[arg-type]

    @property
    def label(self) -> str:
        return f'{self.kind} "{self.name}"'


def unknown_keys(entry: Entry, known: Iterable[str]) -> Iterator[Problem]:
    """Warn about each top-level key nobody reads, with a did-you-mean."""
    known = tuple(known)
    for key in entry.data:
        if key in known:
            continue
        text = str(key)
        hint = suggest(text, known)
        if text == "description" and entry.body is not None:
            how = f"the description of a {entry.kind} file is its Markdown body; move it there"
        elif hint:
            how = f"rename it{hint}"
        else:
            how = f"known keys: {', '.join(known)}"
        yield entry.problem((key,), "unknown-key",
                            f'{entry.label} has unknown key "{text}"; {how}', "warning")


def _bool(entry: Entry, key: str, values: dict[str, Any], dest: str, errors: list[Problem]) -> None:
    if key not in entry.data:
        return
    value = entry.data[key]
    if isinstance(value, bool):
        values[dest] = value
    else:
        errors.append(entry.problem((key,), "field-type", f"{entry.label} {key} must be true or "
                                    f"false, got {value!r}"))


def _timeout(entry: Entry, values: dict[str, Any], errors: list[Problem]) -> None:
    if "timeout_ms" not in entry.data:
        return
    value = entry.data["timeout_ms"]
    if isinstance(value, bool) or not isinstance(value, int):
        errors.append(entry.problem(("timeout_ms",), "field-type", f"{entry.label} timeout_ms "
                                    f"must be an integer number of milliseconds, got {value!r}"))
    elif value < 0:
        errors.append(entry.problem(("timeout_ms",), "timeout-negative",
                                    f"{entry.label} timeout_ms must be >= 0 (got {value}); "
                                    "use 0 for no per-call cap"))
    else:
        values["timeout_ms"] = value


def _script(entry: Entry, key: str, values: dict[str, Any], errors: list[Problem]) -> None:
    if key not in entry.data or entry.data[key] is None:
        return
    value = entry.data[key]
    if not isinstance(value, str):
        errors.append(entry.problem((key,), "field-type", f"{entry.label} {key} must be Starlark "
                                    f"source text (use `{key}: |` and indent the code), got a "
                                    f"{type_name(value)}"))
        return
    values[key] = value
    line, column = entry.value_pos(key)
    values[f"{key}_line"] = line
    values[f"{key}_column"] = column


def _choice(entry: Entry, key: str, choices: tuple[str, ...], values: dict[str, Any],
            errors: list[Problem], code: str) -> None:
    if key not in entry.data:
        return
    value = entry.data[key]
    if isinstance(value, str) and value in choices:
        values[key] = value
    else:
        hint = suggest(str(value), choices)
        errors.append(entry.problem((key,), code, f"{entry.label} {key} must be one of "
                                    f"{', '.join(choices)}; got {value!r}{hint}"))


def tool_fields(entry: Entry) -> tuple[dict[str, Any], list[Problem]]:
    """Type-check a tool's fields; return (valid values, problems)."""
    values: dict[str, Any] = {}
    errors: list[Problem] = []
    _script(entry, "script", values, errors)
    _timeout(entry, values, errors)
    _bool(entry, "async", values, "is_async", errors)
    _bool(entry, "enabled", values, "enabled", errors)
    _choice(entry, "loading", ("always", "deferred"), values, errors, "loading-invalid")
    if entry.data.get("returns") is not None:
        returns = entry.data["returns"]
        if isinstance(returns, dict):
            values["returns"] = returns
        else:
            errors.append(entry.problem(("returns",), "returns-invalid",
                                        f"{entry.label} returns must be a JSON Schema mapping, "
                                        f"got a {type_name(returns)}"))
    if entry.data.get("annotations") is not None:
        ann = entry.data["annotations"]
        if not isinstance(ann, dict):
            errors.append(entry.problem(("annotations",), "annotations-invalid",
                                        f"{entry.label} annotations must be a mapping of "
                                        f"{', '.join(ANNOTATION_KEYS)}, got a {type_name(ann)}"))
        else:
            good: dict[str, Any] = {}
            for key, value in ann.items():
                want = ANNOTATION_KEYS.get(key) if isinstance(key, str) else None
                if want is None:
                    errors.append(entry.problem(("annotations", key), "annotation-unknown-key",
                                                f'{entry.label} annotations has unknown key "{key}"'
                                                f"{suggest(str(key), ANNOTATION_KEYS)}; known: "
                                                f"{', '.join(ANNOTATION_KEYS)}", "warning"))
                elif not isinstance(value, want):
                    expected = "true or false" if want is bool else "a string"
                    errors.append(entry.problem(("annotations", key), "annotations-invalid",
                                                f"{entry.label} annotations.{key} must be "
                                                f"{expected}, got {value!r}"))
                else:
                    good[key] = value
            values["annotations"] = good
    return values, errors


def event_problem(entry: Entry) -> Problem | None:
    if "event" not in entry.data or entry.data["event"] is None:
        return entry.problem((), "event-missing", f"{entry.label} has no event; add `event:` "
                             f"with one of {', '.join(TOOL_EVENTS)} or custom.<name>")
    event = entry.data["event"]
    if not isinstance(event, str) or not (event in TOOL_EVENTS or CUSTOM_EVENT_RE.fullmatch(event)):
        return entry.problem(("event",), "event-unknown", f"{entry.label} event {event!r} is "
                             f"unknown{suggest(str(event), TOOL_EVENTS)}; use one of "
                             f"{', '.join(TOOL_EVENTS)} or custom.<name>")
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
        errors.append(entry.problem((), "hook-script-missing", f"{entry.label} has no script; add "
                                    "`script: |` with a `def handle(event, payload):` function"))
    _script(entry, "when", values, errors)
    _timeout(entry, values, errors)
    _choice(entry, "on_error", ("block", "allow"), values, errors, "on-error-invalid")
    if "priority" in entry.data:
        value = entry.data["priority"]
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(entry.problem(("priority",), "field-type", f"{entry.label} priority "
                                        f"must be an integer (lower runs first), got {value!r}"))
        else:
            values["priority"] = value
    return values, errors


def name_problems(entry: Entry) -> Iterator[Problem]:
    if not NAME_RE.fullmatch(entry.name):
        where = "rename the file" if entry.body is not None else "change its name"
        yield entry.problem(("name",) if entry.body is None else (), f"{entry.kind}-name-invalid",
                            f'{entry.kind} name "{entry.name}" is invalid: it must start with a '
                            'letter and contain only letters, digits, "_", "." or "-" (at most '
                            f"64 characters); {where}")


def collisions(tools: Mapping[str, ToolSpec],
               where: Callable[[ToolSpec], tuple[str, int, int]]) -> Iterator[Problem]:
    """Tool names that become equal when a provider's export replaces ``.`` by ``_``."""
    seen: dict[str, ToolSpec] = {}
    for name in sorted(tools):
        spec = tools[name]
        exported = name.replace(".", "_")
        other = seen.get(exported)
        if other is None:
            seen[exported] = spec
            continue
        path, line, column = where(spec)
        opath, oline, _ = where(other)
        yield Problem(path=path, line=line, column=column, code="tool-name-collision",
                      message=f'tool "{name}" and tool "{other.name}" ({opath}:{oline}) both '
                              f'export as "{exported}" (providers that forbid "." get "_"); '
                              "rename one of them")


def schema_problems(entry: Entry, spec: ToolSpec) -> Iterator[Problem]:
    """The generated input schema and ``returns`` must be valid Draft 2020-12 schemas."""
    checked = {"type": "object", "properties": {p.name: p.schema for p in spec.parameters}}
    for json_path, message in schema_errors(checked):
        keys: tuple[Any, ...] = ("parameters", *json_path[1:]) if json_path[:1] == ("properties",) \
            else ("parameters",)
        where = "$" + "".join(f"[{k!r}]" if isinstance(k, int) else f".{k}" for k in json_path[1:])
        yield entry.problem(keys, "parameters-schema-invalid",
                            f"{entry.label} parameters are not a valid JSON Schema at {where}: "
                            f"{message}")
    if spec.returns is not None:
        for json_path, message in schema_errors(spec.returns):
            where = "$" + "".join(f"[{k!r}]" if isinstance(k, int) else f".{k}" for k in json_path)
            yield entry.problem(("returns", *json_path), "returns-invalid",
                                f"{entry.label} returns is not a valid JSON Schema at {where}: "
                                f"{message}")


def script_warnings(entry: Entry, spec: ToolSpec) -> Iterator[Problem]:
    if spec.script is None:
        yield entry.problem((), "tool-no-script", f'{entry.label} has no script: it needs a Python '
                            'handler bound with Harness.bind(), or add `script: |` with a '
                            '`def run(args):` function', "warning")


def hook_summary(spec: HookSpec) -> str:  # pragma: no cover - debugging aid
    return f"{spec.name} {spec.event} {spec.priority}"
