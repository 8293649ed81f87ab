"""The on-disk cache of each upstream server's tool listing (``harness list``/``schema``
and ``harness serve``'s ``tools/list`` answer from it without starting the server).

Where: ``.harness/state/upstream/NAME.json`` under the project root. ``.harness/state``
is hidden from every sandboxed command and refused by the ``fs.*`` built-ins, so no
sandboxed process can write it. When the root is inside the workspace but not at its
top (that ``.harness/state`` would be visible to commands), there is no cache.

Key: a digest of the declaration (everything that changes what the server lists or
how harness maps it), of the harness version, and of the size and modification time of
the files the command names (the program, a script argument): a new declaration or an
upgraded server program misses the cache. The server's own ``serverInfo`` version is
recorded with each entry; a started server rewrites its entry every time it lists.

The file is untrusted input: it is read without following a symbolic link, capped in
size and nesting, owned by this user, checked shape by shape, and its tools then go
through :func:`harness.upstream.mapping.build_listing` like a live listing (tools
allow/deny, names, schema refusals) and must compile. Anything else is a miss (logged).
Cached tools are only listed: a call always starts the server and is validated against
the listing the server gives then.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.artifacts.model import ServerSpec
from harness.artifacts.params import compile_error
from harness.config import Config
from harness.runtime.nesting import loads
from harness.upstream.mapping import Listing, build_listing

log = logging.getLogger("harness.upstream")

FORMAT = 1
MAX_BYTES = 4 * 1024 * 1024  # one server's cached listing
MAX_TOOLS = 2000
TOOL_KEYS = frozenset(
    {"name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta"}
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One server's cached listing: the raw MCP tools and the version that listed them."""

    listing: Listing
    tools: tuple[dict[str, Any], ...]
    server_version: str


def cache_dir(config: Config) -> Path | None:
    """The folder of the cached listings, or None when no safe place exists."""
    root = Path(config.root)
    workspace = Path(config.workspace)
    folder = root / ".harness" / "state" / "upstream"
    inside = root == workspace or workspace in root.parents
    if inside and root != workspace:
        return None  # root/.harness/state would be writable by sandboxed commands
    return folder


def _files_of(spec: ServerSpec, config: Config) -> list[str]:
    """The files a stdio command names (its program, script arguments): their size and
    modification time stand for the server's version."""
    if spec.transport != "stdio" or not spec.command:
        return []
    workspace = str(config.workspace)
    cwd = os.path.join(workspace, spec.cwd or ".")
    out = []
    program = spec.command[0]
    found = shutil.which(program) if os.sep not in program else None
    out.append(found or os.path.join(str(config.root), program))
    for arg in spec.command[1:]:
        if arg.startswith("-") or "\n" in arg or len(arg) > 4096:
            continue
        path = arg if os.path.isabs(arg) else os.path.join(cwd, arg)
        with contextlib.suppress(OSError, ValueError):
            if stat.S_ISREG(os.stat(path).st_mode):
                out.append(path)
    return out


def key(spec: ServerSpec, config: Config) -> str:
    """The digest a cached listing of ``spec`` must carry to be used."""
    files = []
    for path in _files_of(spec, config):
        try:
            st = os.stat(path)
            files.append([path, st.st_size, st.st_mtime_ns, st.st_ino])
        except OSError:
            files.append([path, None])
    declared = {
        "format": FORMAT,
        "harness": _harness_version(),
        "transport": spec.transport,
        "command": list(spec.command),
        "env": dict(sorted(spec.env.items())),
        "cwd": spec.cwd,
        "url": spec.url,
        "headers": dict(sorted(spec.headers.items())),
        "allow": list(spec.allow),
        "deny": list(spec.deny),
        "timeout_ms": spec.timeout_ms,
        "per_tool": {n: repr(s) for n, s in sorted(spec.per_tool.items())},
        "sandbox": spec.sandbox,
        "exec_sandbox": config.exec.sandbox,
        "domains": list(spec.allowed_domains),
        "files": files,
    }
    text = json.dumps(declared, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def _harness_version() -> list[object]:
    """What stands for the harness version: the size and mtime of the modules that turn
    a listing into tools (an upgrade rewrites them). importlib.metadata would cost more
    than reading the cache."""
    from harness.upstream import mapping

    out: list[object] = []
    for path in (__file__, mapping.__file__):
        st = os.stat(path)
        out += [st.st_size, st.st_mtime_ns]
    return out


def path_of(config: Config, name: str) -> Path | None:
    folder = cache_dir(config)
    return None if folder is None else folder / f"{name}.json"


def read(spec: ServerSpec, config: Config) -> Entry | None:
    """The cached listing of ``spec``, or None (absent, stale, or not acceptable)."""
    path = path_of(config, spec.name)
    if path is None:
        return None
    try:
        raw = _read_bytes(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("the cached tool listing %s is not used: %s", path, exc)
        return None
    try:
        return _entry(spec, config, raw)
    except ValueError as exc:
        log.warning("the cached tool listing %s is not used: %s", path, exc)
        return None


def _read_bytes(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError("it is not a regular file")
        if st.st_uid != os.geteuid():
            raise OSError(f"it is owned by uid {st.st_uid}, not by this user")
        if st.st_size > MAX_BYTES:
            raise OSError(f"it has {st.st_size} bytes, more than {MAX_BYTES}")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(MAX_BYTES + 1)
    finally:
        os.close(fd)


def _entry(spec: ServerSpec, config: Config, raw: bytes) -> Entry | None:
    try:
        data, deep = loads(raw.decode("utf-8"), "the cached listing")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"it is not JSON ({exc})") from None
    if deep is not None:
        raise ValueError(deep)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError("unknown format")
    if data.get("key") != key(spec, config):
        return None  # another declaration or another server program: a miss
    tools, version = data.get("tools"), data.get("server_version", "")
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS or not isinstance(version, str):
        raise ValueError(f"tools must be a list of at most {MAX_TOOLS} tools")
    return Entry(listing=_listing(spec, tools), tools=tuple(tools), server_version=version)


class _Annotations(dict[str, Any]):
    """Cached tool annotations with the one method ``mapping._tool_spec`` calls."""

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return {k: v for k, v in self.items() if v is not None}


@dataclass(frozen=True, slots=True)
class _Tool:
    """A cached MCP tool, shaped like the SDK's ``Tool`` for ``build_listing`` (reading
    the cache must not import the SDK: that alone costs more than a listing)."""

    name: str
    title: str | None
    description: str | None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: _Annotations | None


_OPTIONAL = {"title": str, "description": str, "outputSchema": dict, "annotations": dict}
_HINT_TYPES = {
    "title": str,
    "readOnlyHint": bool,
    "destructiveHint": bool,
    "idempotentHint": bool,
    "openWorldHint": bool,
}


def _tool(i: int, item: Any) -> _Tool:
    """``tools[i]`` of the file as a tool, or ValueError saying what is wrong."""
    where = f"tools[{i}]"
    if not isinstance(item, dict) or not set(item) <= TOOL_KEYS:
        raise ValueError(f"{where} is not an MCP tool")
    if not isinstance(item.get("name"), str) or not isinstance(item.get("inputSchema"), dict):
        raise ValueError(f"{where} needs a string name and an object inputSchema")
    for k, kind in _OPTIONAL.items():
        if item.get(k) is not None and not isinstance(item[k], kind):
            raise ValueError(f"{where}.{k} must be a {kind.__name__}")
    ann = item.get("annotations")
    if ann is not None:
        for k, v in ann.items():
            if k in _HINT_TYPES and v is not None and not isinstance(v, _HINT_TYPES[k]):
                raise ValueError(f"{where}.annotations.{k} has the wrong type")
    for k in ("inputSchema", "outputSchema"):
        schema = item.get(k)
        why = compile_error(schema) if schema else None
        if why is not None:
            raise ValueError(f"{where}.{k} does not compile: {why}")
    return _Tool(
        name=item["name"],
        title=item.get("title"),
        description=item.get("description"),
        input_schema=item["inputSchema"],
        output_schema=item.get("outputSchema"),
        annotations=None if ann is None else _Annotations(ann),
    )


def _listing(spec: ServerSpec, tools: list[Any]) -> Listing:
    return build_listing(spec, [_tool(i, item) for i, item in enumerate(tools)])


def write(spec: ServerSpec, config: Config, tools: list[Any], server_version: str) -> None:
    """Keep ``tools`` (the SDK's Tool objects, as listed) as the cached listing of ``spec``."""
    path = path_of(config, spec.name)
    if path is None:
        return
    data = {
        "format": FORMAT,
        "key": key(spec, config),
        "server": spec.name,
        "server_version": server_version,
        "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools],
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, ensure_ascii=False)
        os.replace(tmp, path)
    except OSError as exc:
        log.warning('upstream server "%s": could not keep its tool listing: %s', spec.name, exc)
        with contextlib.suppress(OSError):
            tmp.unlink()


def drop(spec: ServerSpec, config: Config) -> None:
    """Forget the cached listing of ``spec`` (its tools changed, or listing failed)."""
    path = path_of(config, spec.name)
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
