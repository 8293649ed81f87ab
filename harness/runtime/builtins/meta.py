"""``meta.tool_register``: a script registers a tool for the rest of its session (docs/spec.md §7).

Only when ``meta.enabled``. The session validates the tool exactly like a file tool,
fires the ``meta.tool_register`` hooks (which may block), enforces ``meta.max_tools``
and refuses to replace any existing tool. The work happens in the session (reached
through ``ctx.host``), so it behaves the same in-process and in a worker process.
"""

from __future__ import annotations

from typing import Any

from harness.errors import BuiltinError
from harness.runtime.context import CallContext

# Registered scripts are checked (parsed, linted) in the harness process: cap their size.
MAX_SCRIPT_BYTES = 64 * 1024


def tool_register(
    ctx: CallContext, name: Any, description: Any = "", parameters: Any = None, script: Any = None
) -> dict[str, Any]:
    if not ctx.config.meta.enabled:
        raise BuiltinError(
            "meta.tool_register is disabled; enable it with `meta: {enabled: true}` in harness.md"
        )
    if not isinstance(name, str):
        raise BuiltinError(f"meta.tool_register: name must be a string, got {type(name).__name__}")
    if not isinstance(description, str):
        raise BuiltinError("meta.tool_register: description must be a string")
    if parameters is not None and not isinstance(parameters, dict):
        raise BuiltinError("meta.tool_register: parameters must be a dict of name -> parameter")
    if not isinstance(script, str) or not script.strip():
        raise BuiltinError("meta.tool_register: script must be Starlark source defining run(args)")
    too_large = script_too_large(script)
    if too_large is not None:
        raise BuiltinError(too_large)
    if ctx.host is None:
        raise BuiltinError("meta.tool_register is only available inside a session")
    return ctx.host(
        "meta.tool_register",
        {
            "name": name,
            "description": description,
            "parameters": parameters or {},
            "script": script,
            "by": ctx.tool,
        },
    )


def script_too_large(script: str) -> str | None:
    """The error for a registered script over :data:`MAX_SCRIPT_BYTES`, or None."""
    size = len(script.encode("utf-8", "surrogatepass"))
    if size <= MAX_SCRIPT_BYTES:
        return None
    return (
        f"meta.tool_register: script is {size} bytes; the limit is {MAX_SCRIPT_BYTES} "
        "bytes — register a smaller script, or put the tool in .harness/tools/"
    )


FUNCTIONS = {"meta.tool_register": tool_register}
