"""Build a tool registered at run time (``meta.tool_register``) exactly like a file tool.

The registration goes through the same field checks, parameter-to-schema conversion
and static Starlark checks as ``.harness/tools/*.md``; only errors block it.
"""

from __future__ import annotations

from typing import Any

from harness.artifacts import checks
from harness.artifacts.frontmatter import KeyLines
from harness.artifacts.loader import _tool
from harness.artifacts.model import ToolSpec
from harness.runtime.static import check_script


def build_meta_tool(
    name: str, description: str, parameters: Any, script: str
) -> tuple[ToolSpec, list[str]]:
    path = f"<meta:{name}>"
    entry = checks.Entry(
        kind="tool",
        name=name,
        data={"parameters": parameters, "script": script},
        lines=KeyLines(),
        base=(),
        path=path,
        layer="meta",
        body=description,
    )
    problems: list[Any] = []
    spec = _tool(entry, problems)
    problems.extend(checks.schema_problems(entry, spec))
    problems.extend(check_script(script, path, 1, "tool", owner=f'tool "{name}"'))
    errors = [p.message for p in problems if p.severity == "error"]
    return spec, errors
