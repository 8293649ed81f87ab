"""JSON Schemas of test and eval files, for editors (``harness/schemas/``).

Generated from the tables the parsers use (:mod:`harness.testing.spec`,
:mod:`harness.testing.evalspec`), as the artifact schemas are generated from
``artifacts/checks.py``; a test keeps the published files equal to what this makes.
``harness validate`` does not load them: its own checks give better messages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.artifacts.problems import EXTENSION_PATTERN, EXTENSION_SCHEMA, EXTENSIONS
from harness.testing.evalspec import GRADES
from harness.testing.fakes import EXEC_KEYS, HTTP_KEYS, KINDS, METHODS
from harness.testing.spec import CALL_EXPECT, DECISIONS, HOOK_EXPECT

DRAFT = "https://json-schema.org/draft/2020-12/schema"
_STRINGS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
_SETUP: dict[str, Any] = {
    "files": {
        "type": "object",
        "description": "fixture files: relative path -> text",
        "additionalProperties": {"type": "string"},
    },
    "env": {
        "type": "object",
        "description": "variables for commands (exec.run)",
        "additionalProperties": {"type": ["string", "number", "boolean"]},
    },
    "now": {"type": "string", "description": 'a fixed clock, RFC 3339: "2026-01-05T09:00:00Z"'},
    "config": {"type": "object", "description": "overrides of harness.md settings"},
}
_PATTERN = {"type": "string", "minLength": 1, "description": 'a glob, or "re:" + a regex'}
_EXEC_FAKE = {
    "program": {
        **_PATTERN,
        "description": "the program: a glob (or re:...) on the path given "
        "or, without a /, on its name",
    },
    "args": {
        "type": "array",
        "items": _PATTERN,
        "description": 'one pattern per argument; "**" matches any number of them',
    },
    "exit_code": {"type": "integer"},
    "stdout": {"type": "string"},
    "stderr": {"type": "string"},
    "duration_ms": {"type": "integer", "minimum": 0},
}
_HTTP_FAKE = {
    "method": {"enum": list(METHODS), "description": "default: any method"},
    "url": {**_PATTERN, "description": "the full URL: a glob, or re:..."},
    "status": {"type": "integer", "minimum": 100, "maximum": 599},
    "headers": {"type": "object", "additionalProperties": {"type": ["string", "integer"]}},
    "body": {"type": "string"},
    "json": {"description": "a JSON body (sets content-type: application/json)"},
}
assert sorted(_EXEC_FAKE) == sorted(EXEC_KEYS) and sorted(_HTTP_FAKE) == sorted(HTTP_KEYS)


def _fake(props: dict[str, Any], required: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "patternProperties": {"^x-": {}},
        "additionalProperties": False,
        "required": [required],
    }


_DOUBLES: dict[str, Any] = {
    "fakes": {
        "type": "object",
        "description": "test doubles: what exec.run and http.* calls get instead of "
        "running (each must be used)",
        "properties": {
            "exec": {"type": "array", "items": _fake(_EXEC_FAKE, "program")},
            "http": {"type": "array", "items": _fake(_HTTP_FAKE, "url")},
        },
        "additionalProperties": False,
    },
    "real": {
        "oneOf": [
            {"enum": list(KINDS)},
            {"type": "array", "items": {"enum": list(KINDS)}},
        ],
        "description": "what may run for real when no fake matches (default: nothing)",
    },
}
_FILE_EXPECT = {
    "oneOf": [
        {"type": "string", "description": "the exact content"},
        {
            "type": "object",
            "properties": {"absent": {"const": True}},
            "required": ["absent"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"contains": {"type": "string"}},
            "required": ["contains"],
            "additionalProperties": False,
        },
    ]
}
_CALL_EXPECT: dict[str, Any] = {
    "ok": {"type": "boolean"},
    "value": {"description": "subset match of the returned value"},
    "text_contains": _STRINGS,
    "error_contains": _STRINGS,
    "blocked_by": {"type": "string", "description": "the hook that blocked the call"},
    "truncated": {"type": "boolean"},
    "files": {"type": "object", "additionalProperties": _FILE_EXPECT},
}
_HOOK_EXPECT: dict[str, Any] = {
    "decision": {"enum": list(DECISIONS)},
    "reason_contains": {"type": "string"},
    "payload": {"type": "object", "description": "subset match of the payload after the hook"},
}
assert sorted(_CALL_EXPECT) == sorted(CALL_EXPECT) and sorted(_HOOK_EXPECT) == sorted(HOOK_EXPECT)


def _obj(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    # People's own metadata (x-... keys, extensions:) is allowed wherever keys are checked.
    out: dict[str, Any] = {
        "type": "object",
        "properties": {**props, EXTENSIONS: EXTENSION_SCHEMA},
        "patternProperties": EXTENSION_PATTERN,
        "additionalProperties": False,
    }
    if required:
        out["required"] = list(required)
    return out


def schema_of_tests() -> dict[str, Any]:
    call_expect = _obj(_CALL_EXPECT)
    step = _obj(
        {
            "name": {"type": "string"},
            "call": {"type": "string"},
            "args": {"type": "object"},
            "expect": call_expect,
        },
        ("call",),
    )
    common = {"name": {"type": "string"}, **_SETUP, **_DOUBLES}
    call_case = _obj(
        {**common, "call": {"type": "string"}, "args": {"type": "object"}, "expect": call_expect},
        ("call",),
    )
    hook_case = _obj(
        {
            **common,
            "hook": {"type": "string"},
            "event": {"type": "string"},
            "payload": {"type": "object"},
            "expect": _obj(_HOOK_EXPECT),
        },
        ("hook",),
    )
    steps_case = _obj(
        {**common, "steps": {"type": "array", "minItems": 1, "items": step}}, ("steps",)
    )
    schema = _obj(
        {
            **_SETUP,
            **_DOUBLES,
            "include": {
                "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                "description": "paths case copies leave out that this file's cases get: "
                ".git (a copy), .venv or node_modules (read-only in the sandbox)",
            },
            "cases": {
                "type": "array",
                "minItems": 1,
                "items": {"oneOf": [call_case, hook_case, steps_case]},
            },
        },
        ("cases",),
    )
    return {
        "$schema": DRAFT,
        "title": "harness test file (.harness/tests/*.md frontmatter)",
        **schema,
    }


def schema_of_evals() -> dict[str, Any]:
    grade_values: dict[str, Any] = {g: {"type": "string"} for g in GRADES}
    grade_values.update(
        {
            "no_errors": {"type": "boolean"},
            "completed_within": {"type": "integer", "minimum": 1},
            "tokens_under": {"type": "integer", "minimum": 1},
        }
    )
    grade = {
        "type": "object",
        "minProperties": 1,
        "maxProperties": 1,
        "properties": grade_values,
        "additionalProperties": False,
    }
    case = _obj(
        {
            "name": {"type": "string"},
            **_SETUP,
            "turns": {
                "oneOf": [
                    {"type": "string"},
                    {"type": "array", "minItems": 1, "items": {"type": "string"}},
                ]
            },
            "grade": {"type": "array", "minItems": 1, "items": grade},
        },
        ("turns", "grade"),
    )
    schema = _obj({**_SETUP, "cases": {"type": "array", "minItems": 1, "items": case}}, ("cases",))
    return {
        "$schema": DRAFT,
        "title": "harness eval file (.harness/evals/*.md frontmatter)",
        **schema,
    }


def write_schemas(folder: str | None = None) -> list[str]:
    """Write ``test.schema.json`` and ``eval.schema.json`` next to the artifact schemas."""
    base = Path(folder) if folder else Path(__file__).resolve().parent.parent / "schemas"
    out = []
    for name, schema in (("test", schema_of_tests()), ("eval", schema_of_evals())):
        path = base / f"{name}.schema.json"
        path.write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
        out.append(str(path))
    return out
