"""The built-in surface of docs/spec.md §7, declared once.

``harness validate`` checks scripts against these names; the runtime builds the
Starlark globals from the same tables and a test asserts that every name declared
here is implemented. Imports nothing from harness.
"""

from __future__ import annotations

# module -> function names scripts may call as ``module.function(...)``.
TOOL_MODULES: dict[str, tuple[str, ...]] = {
    "exec": ("run",),
    "fs": (
        "read",
        "write",
        "append",
        "edit",
        "exists",
        "stat",
        "list",
        "glob",
        "grep",
        "mkdir",
        "remove",
        # line-level editing and file helpers (runtime/builtins/fs_lines.py)
        "replace",
        "replace_all",
        "read_lines",
        "insert_at",
        "replace_lines",
        "delete_lines",
        "line_count",
        "find",
        "copy",
        "move",
        "diff",
    ),
    "http": ("get", "post"),
    "json": ("encode", "decode"),
    "re": ("match", "search", "findall", "sub", "split", "find_all", "replace"),
    "string": (
        "truncate",
        "byte_len",
        "upper",
        "lower",
        "trim",
        "split",
        "join",
        "pad_left",
        "pad_right",
    ),
    "cache": ("get", "set", "delete", "has", "clear"),
    "log": ("info", "warn", "error"),
    "time": ("now", "weekday", "parse", "format"),
    "hash": ("sha256", "md5"),
    "meta": ("tool_register",),
    "base64": ("encode", "decode"),
    "uuid": ("v4",),
    "math": ("abs", "min", "max", "floor", "ceil"),
    "url": ("parse", "encode"),
    "metrics": ("incr", "set", "get", "reset", "snapshot"),
    "ctx": ("get", "set", "has", "delete", "clear", "snapshot"),
}

# Pure modules: no side effects, no I/O. The only ones a hook's ``when`` may use.
PURE_MODULES = ("json", "re", "string", "hash", "time", "base64", "uuid", "math", "url")

# Hooks: pure modules plus cache, log and a read-only fs.
HOOK_MODULES: dict[str, tuple[str, ...]] = {
    **{m: TOOL_MODULES[m] for m in PURE_MODULES},
    "cache": TOOL_MODULES["cache"],
    "log": TOOL_MODULES["log"],
    "metrics": TOOL_MODULES["metrics"],
    "ctx": TOOL_MODULES["ctx"],
    "fs": ("read", "exists", "stat", "list", "glob", "read_lines", "line_count", "find", "diff"),
}
WHEN_MODULES: dict[str, tuple[str, ...]] = {m: TOOL_MODULES[m] for m in ("json", "re", "string")}

# Top-level functions that hook scripts (not tools) may call.
HOOK_FUNCTIONS = ("allow", "block", "modify")

# Top-level built-in functions (runtime/builtins/calls.py), per kind of script. ``emit``
# fires hooks, so hooks do not get it (an emit can never nest).
TOP_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "tool": ("log", "emit", "assert", "sleep", "redact"),
    "hook": ("log", "assert", "sleep", "redact"),
    "when": (),
}
# Calls the runtime renames before parsing: ``log`` is also a module (``log.info``) and
# ``assert`` is a reserved word in Starlark. ``log("x")`` runs ``harness_log("x")``.
RENAMED_CALLS = {"log": "harness_log", "assert": "harness_assert"}

# Names bound while evaluating a ``when`` expression.
WHEN_NAMES = ("event", "payload")

# The entry point each kind of script must define, with its parameter count.
TOOL_ENTRY = ("run", 1)
HOOK_ENTRY = ("handle", 2)


def module_names(kind: str) -> dict[str, tuple[str, ...]]:
    """The modules visible to a script of ``kind`` ("tool", "hook" or "when")."""
    return {"tool": TOOL_MODULES, "hook": HOOK_MODULES, "when": WHEN_MODULES}[kind]
