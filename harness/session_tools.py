"""Tools that live in a session: ``read_output`` (pages of spilled outputs) and tools
registered with ``meta.tool_register``. ``self`` below is the :class:`~harness.session.Session`
(a parameter, not an import: this module is below the session)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.artifacts.model import Parameter, Source, ToolSpec
from harness.errors import BuiltinError
from harness.meta import build_meta_tool
from harness.runtime.builtins.meta import script_too_large

READ_OUTPUT_DESCRIPTION = (
    "Read a page of a tool output that was too large to return in full. Use the ref and "
    "offset named in the truncation notice; offset and limit count bytes of the UTF-8 "
    "text. The page ends with a line giving the offset of the next page."
)


def read_output_spec() -> ToolSpec:
    """The built-in ``read_output`` tool (its handler is the session's)."""
    return ToolSpec(
        name="read_output", description=READ_OUTPUT_DESCRIPTION,
        parameters=(
            Parameter(name="ref", type="string", required=True,
                      schema={"type": "string", "description": "reference from the notice"}),
            Parameter(name="offset", type="integer",
                      schema={"type": "integer", "minimum": 0, "default": 0}),
            Parameter(name="limit", type="integer",
                      schema={"type": "integer", "minimum": 1}),
        ),
        input_schema={"type": "object", "properties": {
            "ref": {"type": "string", "description": "reference from the truncation notice"},
            "offset": {"type": "integer", "minimum": 0, "default": 0,
                       "description": "byte offset to start at"},
            "limit": {"type": "integer", "minimum": 1,
                      "description": "bytes to return (default: max_output_bytes)"}},
            "required": ["ref"]},
        annotations={"read_only": True, "idempotent": True},
        loading="always",
        source=Source(path="<builtin>", layer="builtin"),
    )


def register_meta_tool(self: Any, p: Mapping[str, Any]) -> dict[str, Any]:
    """``meta.tool_register`` from a script: checks, hooks, then the session's new tool."""
    name = str(p["name"])
    limit = self.harness.config.meta.max_tools
    with self._lock:
        if name in self.harness._tools or name in self._extra:
            raise BuiltinError(f'meta.tool_register: tool "{name}" already exists; a '
                               "registered tool can never replace another tool")
        _refuse_export_clash(self, name)
        count = sum(1 for spec, _ in self._extra.values() if spec.source.layer == "meta")
        if count >= limit:
            raise BuiltinError(f"meta.tool_register: this session already registered "
                               f"{count} tools; the limit is meta.max_tools = {limit}")
    too_large = script_too_large(str(p["script"]))
    if too_large is not None:
        raise BuiltinError(too_large)
    spec, errors = build_meta_tool(name, str(p.get("description") or ""),
                                   p.get("parameters") or {}, str(p["script"]))
    if errors:
        raise BuiltinError(f'meta.tool_register: tool "{name}" is invalid: '
                           + "; ".join(errors))
    chain = self.harness._chain
    if chain.for_event("meta.tool_register"):
        # Registration hooks run on the harness's host runtime: same limits as any
        # hook, and no deadlock when the calling script holds the only worker.
        out = chain.run("meta.tool_register",
                        {"name": name, "description": spec.description,
                         "parameters": dict(p.get("parameters") or {}),
                         "script": spec.script, "by": p.get("by"), "session": self.id,
                         "replace": False},
                        self.harness.host_runtime, self._hook_ctx)
        if out.blocked_by is not None:
            self.emit("hook.decision", hook_event="meta.tool_register",
                      hook=out.blocked_by, tool=name, decision="block", reason=out.reason)
            raise BuiltinError(f'meta.tool_register: tool "{name}" was not registered: '
                               + out.why)
    with self._lock:
        if name in self._extra:
            raise BuiltinError(f'meta.tool_register: tool "{name}" already exists')
        _refuse_export_clash(self, name)
        self._extra[name] = (spec, None)
    self.emit("meta.tool_register", tool=name, by=p.get("by"))
    return {"name": name, "registered": True}


def _refuse_export_clash(self: Any, name: str) -> None:
    """OpenAI and Anthropic see "." as "_": two tools exporting as one name would make
    every later ``definitions()`` fail, so such a registration is refused."""
    exported = name.replace(".", "_")
    for other in (*self.harness._tools, *self._extra):
        if other != name and other.replace(".", "_") == exported:
            raise BuiltinError(
                f'meta.tool_register: tool "{name}" would export as "{exported}", like the '
                f'existing tool "{other}" (providers see "." as "_"); choose another name')
