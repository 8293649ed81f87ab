"""Tools that live in a session: ``read_output`` (pages of spilled outputs),
``tool_search`` (finds deferred tools, which then stay listed for the rest of the
session) and tools registered with ``meta.tool_register``. ``self`` below is the
:class:`~harness.session.Session` (a parameter, not an import: this module is below the
session)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.artifacts.export import export_clash, export_name
from harness.artifacts.model import Parameter, Source, ToolSpec
from harness.errors import BuiltinError
from harness.meta import build_meta_tool
from harness.pipeline import policy_allows
from harness.runtime.builtins.meta import script_too_large
from harness.search import DEFAULT_LIMIT, TOOL_SEARCH, ToolIndex

READ_OUTPUT_DESCRIPTION = (
    "Read a page of a tool output that was too large to return in full. Use the ref and "
    "offset named in the truncation notice; offset and limit count bytes of the UTF-8 "
    "text. The page ends with a line giving the offset of the next page."
)


def read_output_spec() -> ToolSpec:
    """The built-in ``read_output`` tool (its handler is the session's)."""
    return ToolSpec(
        name="read_output",
        description=READ_OUTPUT_DESCRIPTION,
        parameters=(
            Parameter(
                name="ref",
                type="string",
                required=True,
                schema={"type": "string", "description": "reference from the notice"},
            ),
            Parameter(
                name="offset",
                type="integer",
                schema={"type": "integer", "minimum": 0, "default": 0},
            ),
            Parameter(name="limit", type="integer", schema={"type": "integer", "minimum": 1}),
        ),
        input_schema={
            "type": "object",
            "properties": {
                "ref": {"type": "string", "description": "reference from the truncation notice"},
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "default": 0,
                    "description": "byte offset to start at",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "bytes to return (default: max_output_bytes)",
                },
            },
            "required": ["ref"],
        },
        annotations={"read_only": True, "idempotent": True},
        loading="always",
        source=Source(path="<builtin>", layer="builtin"),
    )


def register_meta_tool(self: Any, p: Mapping[str, Any]) -> dict[str, Any]:
    """``meta.tool_register`` from a script: checks, hooks, then the session's new tool."""
    name = str(p["name"])
    limit = self.harness.config.meta.max_tools
    with self._lock:
        if name in self.harness.defined_tools or name in self._extra:
            raise BuiltinError(
                f'meta.tool_register: tool "{name}" already exists; a '
                "registered tool can never replace another tool"
            )
        _refuse_export_clash(self, name)
        count = sum(1 for spec, _ in self._extra.values() if spec.source.layer == "meta")
        if count >= limit:
            raise BuiltinError(
                f"meta.tool_register: this session already registered "
                f"{count} tools; the limit is meta.max_tools = {limit}"
            )
    too_large = script_too_large(str(p["script"]))
    if too_large is not None:
        raise BuiltinError(too_large)
    spec, errors = build_meta_tool(
        name, str(p.get("description") or ""), p.get("parameters") or {}, str(p["script"])
    )
    if errors:
        raise BuiltinError(f'meta.tool_register: tool "{name}" is invalid: ' + "; ".join(errors))
    chain = self.harness.hook_chain
    if chain.for_event("meta.tool_register"):
        # Registration hooks run on the harness's host runtime: same limits as any
        # hook, and no deadlock when the calling script holds the only worker.
        out = chain.run(
            "meta.tool_register",
            {
                "name": name,
                "description": spec.description,
                "parameters": dict(p.get("parameters") or {}),
                "script": spec.script,
                "by": p.get("by"),
                "session": self.id,
                "replace": False,
            },
            self.harness.host_runtime,
            self.hook_context(),
        )
        if out.blocked_by is not None:
            self.emit(
                "hook.decision",
                hook_event="meta.tool_register",
                hook=out.blocked_by,
                tool=name,
                decision="block",
                reason=out.reason,
            )
            raise BuiltinError(f'meta.tool_register: tool "{name}" was not registered: ' + out.why)
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
    other = export_clash(name, (*self.harness.defined_tools, *self._extra))
    if other is not None:
        raise BuiltinError(
            f'meta.tool_register: tool "{name}" would export as "{export_name(name)}", like '
            f'the existing tool "{other}" (providers see "." as "_"); choose another name'
        )


# -- tool_search (docs/spec.md §11) -------------------------------------------------------------

MAX_SEARCH_LIMIT = 20

SEARCH_DESCRIPTION = """\
Find more tools. Only some tools are listed up front; others are available but hidden \
until you search for them.

Describe the capability you need in a few words (for example "send email", "query \
database", "resize image"). Returns the best-matching tools with their names and \
descriptions; from then on they are listed with your other tools and you can call them \
directly. Returns an empty list when nothing matches: try other words."""


def tool_search_spec() -> ToolSpec:
    """The ToolSpec of the built-in ``tool_search`` tool."""
    query_text = "What you want to do, in a few words."
    limit_text = f"Maximum number of tools to return (default {DEFAULT_LIMIT})."
    query_schema: dict[str, Any] = {"type": "string", "minLength": 1, "description": query_text}
    limit_schema: dict[str, Any] = {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_SEARCH_LIMIT,
        "description": limit_text,
    }
    return ToolSpec(
        name=TOOL_SEARCH,
        description=SEARCH_DESCRIPTION,
        parameters=(
            Parameter(
                name="query",
                type="string",
                required=True,
                schema=query_schema,
                description=query_text,
            ),
            Parameter(name="limit", type="integer", schema=limit_schema, description=limit_text),
        ),
        input_schema={
            "type": "object",
            "properties": {"query": query_schema, "limit": limit_schema},
            "required": ["query"],
        },
        returns={
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "tools": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "description": {"type": "string"},
                            "score": {"type": "number"},
                        },
                        "required": ["name", "description", "score"],
                    },
                },
            },
            "required": ["query", "tools"],
        },
        annotations={
            "title": "Search tools",
            "read_only": True,
            "destructive": False,
            "idempotent": True,
            "open_world": False,
        },
        source=Source(path="<builtin>", layer="builtin"),
    )


def run_search(index: ToolIndex, args: Mapping[str, Any]) -> dict[str, Any]:
    """The ``tool_search`` handler body: the value returned to the model."""
    query = str(args.get("query", ""))
    limit = int(args.get("limit") or DEFAULT_LIMIT)
    hits = index.search(query, max(1, min(limit, MAX_SEARCH_LIMIT)))
    return {
        "query": query,
        "tools": [{"name": h.name, "description": h.description, "score": h.score} for h in hits],
    }


def deferred_tools(harness: Any) -> dict[str, ToolSpec]:
    """Deferred tools a session may surface: enabled, allowed by ``tools_policy``
    (never starts an upstream server)."""
    config = harness.config
    return {
        n: t
        for n, t in harness.loaded_tools.items()
        if t.loading == "deferred" and t.enabled and n != "read_output" and policy_allows(config, n)
    }


class ToolSearch:
    """The handler of a session's ``tool_search``: the index is built on first use;
    every tool found joins the session's ``surfaced`` names (listed from then on)."""

    __slots__ = ("_session", "_index")

    def __init__(self, session: Any) -> None:
        self._session = session
        self._index: ToolIndex | None = None

    def __call__(self, args: dict[str, Any]) -> dict[str, Any]:
        session = self._session
        if self._index is None:
            self._index = ToolIndex(deferred_tools(session.harness).values())
        value = run_search(self._index, args)
        with session._lock:
            session.surfaced.update(hit["name"] for hit in value["tools"])
        return value


def install_tool_search(self: Any) -> None:
    """Give the session ``tool_search`` when the harness has deferred tools, unless a
    project tool of that name replaces the built-in."""
    if TOOL_SEARCH in self.harness.loaded_tools or not deferred_tools(self.harness):
        return
    self._extra[TOOL_SEARCH] = (tool_search_spec(), ToolSearch(self))
