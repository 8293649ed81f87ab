"""The published JSON Schemas of artifact frontmatter (``harness/schemas/*.schema.json``),
built from the same tables the checks use (checks.py, config.py, servers.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.artifacts.checks import (
    ARGUMENTS,
    BUNDLE_FIELDS,
    ENTRY_FIELDS,
    HOOK_FIELDS,
    HOOK_REQUIRED,
    SCHEMA_FILES,
    TOOL_FIELDS,
)
from harness.artifacts.params import METASCHEMA_URI, parameter_schema, property_schema
from harness.artifacts.problems import EXTENSION_PATTERN, EXTENSION_SCHEMA, EXTENSIONS
from harness.artifacts.servers import server_schema
from harness.config import section_schemas


def frontmatter_schema(kind: str) -> dict[str, Any]:
    """The published JSON Schema of ``kind`` (tool, hook, bundle, harness), from the tables.

    ``harness/schemas/<kind>.schema.json`` holds exactly this; a test keeps them equal
    and checks that they agree with validate on every fixture.
    """

    def obj(fields: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
        # People's own metadata (x-... keys, extensions:) is allowed (issue 23).
        out: dict[str, Any] = {
            "type": "object",
            "properties": {**fields, EXTENSIONS: EXTENSION_SCHEMA},
            "patternProperties": EXTENSION_PATTERN,
            "additionalProperties": False,
        }
        if required:
            out["required"] = list(required)
        return out

    defs = {
        "parameter": parameter_schema(),
        "property": property_schema(),
        "tool": obj(TOOL_FIELDS),
        "hook": obj(HOOK_FIELDS, HOOK_REQUIRED),
        "toolEntry": obj({**ENTRY_FIELDS, **TOOL_FIELDS}, ("name",)),
        # ai-harness keys bundle and inline hooks by `handler:` (the same as `name:`).
        "hookEntry": {
            **obj({**ENTRY_FIELDS, "handler": ENTRY_FIELDS["name"], **HOOK_FIELDS}, HOOK_REQUIRED),
            "anyOf": [{"required": ["name"]}, {"required": ["handler"]}],
        },
    }
    title, description = SCHEMA_FILES[kind]
    head: dict[str, Any] = {
        "$schema": METASCHEMA_URI,
        "$id": f"https://harness.dev/schemas/{kind}.schema.json",
        "title": title,
        "description": description,
    }
    if kind == "server":
        return {**head, **server_schema()}
    if kind in ("tool", "hook"):
        body: dict[str, Any] = {"$ref": f"#/$defs/{kind}"}
    elif kind == "bundle":
        body = obj(BUNDLE_FIELDS)
    else:
        body = obj(
            {
                "tools": BUNDLE_FIELDS["tools"],
                "hooks": BUNDLE_FIELDS["hooks"],
                "workspace": {
                    "type": ["string", "null"],
                    "description": "Jail root: an existing directory inside the project root.",
                },
                "arguments": {
                    "enum": list(ARGUMENTS),
                    "default": "note",
                    "description": "Unknown argument names: note (run, and say "
                    "so in the result) or strict (refuse the call).",
                },
                "mcp_servers": {
                    "type": "object",
                    "description": "Upstream MCP servers: name -> settings (docs/mcp-servers.md).",
                    "additionalProperties": {"$ref": "#/$defs/server"},
                },
                **section_schemas(),
            }
        )
        defs["server"] = server_schema()
    return {**head, **body, "$defs": defs}


def write_schemas(folder: str | None = None) -> list[str]:
    """Regenerate harness/schemas/*.schema.json from the tables; return the paths written."""
    import json
    from pathlib import Path

    target = Path(folder) if folder else Path(__file__).resolve().parents[1] / "schemas"
    written = []
    for kind in SCHEMA_FILES:
        path = target / f"{kind}.schema.json"
        path.write_text(json.dumps(frontmatter_schema(kind), indent=2) + "\n")
        written.append(str(path))
    return written
