"""The built-in surface of SPEC §7, declared once.

``harness validate`` checks scripts against these names; the runtime builds the
Starlark globals from the same tables and a test asserts that every name declared
here is implemented. Imports nothing from harness.
"""

from __future__ import annotations

# module -> function names scripts may call as ``module.function(...)``.
TOOL_MODULES: dict[str, tuple[str, ...]] = {
    "exec": ("run",),
    "fs": (
        "read", "write", "append", "edit", "exists", "stat", "list", "glob", "grep",
        "mkdir", "remove",
    ),
    "http": ("get", "post"),
    "json": ("encode", "decode"),
    "re": ("match", "search", "findall", "sub", "split"),
    "string": ("truncate", "byte_len"),
    "cache": ("get", "set", "delete"),
    "log": ("info", "warn", "error"),
    "time": ("now",),
    "hash": ("sha256",),
    "meta": ("tool_register",),
}

# Pure modules: no side effects, no I/O. The only ones a hook's ``when`` may use.
PURE_MODULES = ("json", "re", "string", "hash", "time")

# Hooks: pure modules plus cache, log and a read-only fs.
HOOK_MODULES: dict[str, tuple[str, ...]] = {
    **{m: TOOL_MODULES[m] for m in PURE_MODULES},
    "cache": TOOL_MODULES["cache"],
    "log": TOOL_MODULES["log"],
    "fs": ("read", "exists", "stat", "list", "glob"),
}
WHEN_MODULES: dict[str, tuple[str, ...]] = {m: TOOL_MODULES[m] for m in ("json", "re", "string")}

# Top-level functions that hook scripts (not tools) may call.
HOOK_FUNCTIONS = ("allow", "block", "modify")

# Names bound while evaluating a ``when`` expression.
WHEN_NAMES = ("event", "payload")

# The entry point each kind of script must define, with its parameter count.
TOOL_ENTRY = ("run", 1)
HOOK_ENTRY = ("handle", 2)


def module_names(kind: str) -> dict[str, tuple[str, ...]]:
    """The modules visible to a script of ``kind`` ("tool", "hook" or "when")."""
    return {"tool": TOOL_MODULES, "hook": HOOK_MODULES, "when": WHEN_MODULES}[kind]
