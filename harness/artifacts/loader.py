"""Discovery, layers and precedence (docs/spec.md §1) -> :class:`Project`.

Layers, lowest first: ``builtins/`` -> ``plugins/`` -> ``harness.md`` inline
``tools:``/``hooks:`` -> ``.harness/tools|hooks/`` -> ``overrides/``. A name defined
twice in the first four layers is an error; an override replaces the same name from
a lower layer. Loading never raises for content problems: they all end up in
``Project.problems``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.artifacts import checks, servers
from harness.artifacts.checks import Entry
from harness.artifacts.frontmatter import KeyLines, fatal, split
from harness.artifacts.model import HookSpec, Problem, Project, Source, ToolSpec, hook_order
from harness.artifacts.params import a_type, suggest
from harness.artifacts.params import build as build_parameters
from harness.artifacts.policy import policy_problems
from harness.artifacts.problems import (
    EXTENSIONS,
    closest,
    extensions_problem,
    origin_metadata,
    own_metadata,
)
from harness.config import KNOWN_KEYS, parse_config
from harness.protected import CONFIG_FILES, HARNESS_DIR

HARNESS_MD, *_ORIGIN = CONFIG_FILES
DOT_HARNESS = HARNESS_DIR
BUNDLE_DIRS = ("builtins", "plugins")
_CONFIG_KEYS: tuple[str, ...] | None = None
# ai-harness's names for the project file: never read (harness reads harness.md only).
ORIGIN_CONFIG_FILES = tuple(_ORIGIN)


def find_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` holding harness.md or .harness/.

    Falls back to ``start`` itself when none is found (docs/spec.md §1).
    """
    start = Path(start).resolve()
    for candidate in (start, *start.parents):
        if (candidate / HARNESS_MD).is_file() or (candidate / DOT_HARNESS).is_dir():
            return candidate
        if any((candidate / name).is_file() for name in ORIGIN_CONFIG_FILES):
            return candidate  # load() reports it: harness reads harness.md
    return start


@dataclass(slots=True)
class Loaded:
    """The project plus what validate needs to point at files: the entry of each spec."""

    project: Project
    tool_entries: dict[str, Entry] = field(default_factory=dict)
    hook_entries: dict[str, Entry] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """One ``.harness/tools|hooks/*.md`` file read, split and built ahead of :func:`load`.

    What :func:`prepare_all` computes from the file alone (no other artifact involved), so it
    can run in another process: the problems of reading and splitting it, its entry, and
    the spec built from the entry with that step's problems. ``load`` uses it in place
    of doing the same work when the entry is chosen; layering stays in ``load``.
    """

    problems: tuple[Problem, ...] = ()
    entry: Entry | None = None
    spec: ToolSpec | HookSpec | None = None
    spec_problems: tuple[Problem, ...] = ()


def artifact_files(root: Path) -> list[tuple[str, Path, str]]:
    """``(relative path, path, kind)`` of every ``.harness/tools|hooks/*.md``, in load order."""
    dot = Path(root) / DOT_HARNESS
    ignored: list[Problem] = []  # load() reports these itself
    return [
        (rel, path, kind)
        for kind in ("tool", "hook")
        for rel, path in _md_files(dot / f"{kind}s", f"{DOT_HARNESS}/{kind}s", ignored)
    ]


def prepare_all(files: list[tuple[Path, str, str]]) -> list[Prepared]:
    """Read, split and build each ``(path, rel, kind)`` file exactly as :func:`load` would:
    every file is read and split, then every spec is built (one phase at a time keeps the
    same code hot in the caches)."""
    read: list[tuple[list[Problem], Entry | None]] = []
    for path, rel, kind in files:
        problems: list[Problem] = []
        read.append((problems, _artifact(path, rel, kind, problems)))
    out = []
    for problems, entry in read:
        if entry is None:
            out.append(Prepared(problems=tuple(problems)))
            continue
        built: list[Problem] = []
        spec: ToolSpec | HookSpec = (
            _tool(entry, built) if entry.kind == "tool" else _hook(entry, built)
        )
        out.append(
            Prepared(problems=tuple(problems), entry=entry, spec=spec, spec_problems=tuple(built))
        )
    return out


def load_project(root: Path) -> Project:
    """Load every artifact under ``root``. Never raises for content problems."""
    return load(root).project


def _md_files(folder: Path, rel: str, problems: list[Problem]) -> list[tuple[str, Path]]:
    try:
        with os.scandir(folder) as it:
            found = [(e.name, e.is_file()) for e in it]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        problems.append(
            Problem(
                path=rel,
                line=0,
                column=0,
                code="folder-unreadable",
                message=f"cannot read folder {rel}: {exc.strerror}; fix its permissions",
            )
        )
        return []
    out = []
    for name, is_file in sorted(found):
        if name.startswith(".") or name.endswith(("~", ".swp", ".bak", ".orig")):
            continue  # hidden files (.gitkeep) and editor leftovers
        if not is_file:
            problems.extend(_subfolder(folder / name, f"{rel}/{name}", rel))
        elif name.endswith(".md"):
            out.append((f"{rel}/{name}", folder / name))
        else:
            problems.append(_not_markdown(name, rel))
    return out


def _not_markdown(name: str, rel: str) -> Problem:
    stem = name.rsplit(".", 1)[0] if "." in name else name
    if name.lower().endswith((".md", ".markdown")):
        how = 'only files ending in lower-case ".md" are loaded'
    else:
        how = 'only Markdown files (".md", the YAML frontmatter between --- lines) are loaded'
    return Problem(
        path=f"{rel}/{name}",
        line=0,
        column=0,
        code="file-ignored",
        message=f"{rel}/{name} is never loaded: {how}; rename it to "
        f'"{rel}/{stem}.md" (remove it if it is not an artifact)',
    )


def _subfolder(folder: Path, rel: str, parent: str) -> list[Problem]:
    """Each Markdown file in a sub-folder: harness reads only the folder's own files."""
    out = []
    for path in sorted(folder.rglob("*"))[:100]:
        if path.is_file() and path.name.lower().endswith((".md", ".markdown")):
            shown = f"{rel}/{path.relative_to(folder).as_posix()}"
            out.append(
                Problem(
                    path=shown,
                    line=0,
                    column=0,
                    code="file-ignored",
                    message=f"{shown} is never loaded: harness reads only {parent}/*.md, "
                    f'not sub-folders; move it to "{parent}/{path.name}"',
                )
            )
    return out


def _read(path: Path, rel: str, problems: list[Problem]) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError as exc:
        problems.append(
            Problem(
                path=rel,
                line=0,
                column=0,
                code="file-unreadable",
                message=f"cannot read {rel}: {exc.strerror}; fix its permissions",
            )
        )
        return None


def _entries(
    data: dict[str, Any], lines: KeyLines, rel: str, layer: str, problems: list[Problem]
) -> Iterator[Entry]:
    """The ``tools:``/``hooks:`` list entries of a bundle or of harness.md."""
    for key, kind in (("tools", "tool"), ("hooks", "hook")):
        items = data.get(key)
        if items is None:
            continue
        line, column = lines.key((key,))
        if not isinstance(items, list):
            problems.append(
                Problem(
                    path=rel,
                    line=line,
                    column=column,
                    code="bundle-invalid",
                    message=f"{key} must be a list of entries (`- name: ...`), got {a_type(items)}",
                )
            )
            continue
        for index, item in enumerate(items):
            iline, icol = lines.key((key, index), (line, 1))
            if not isinstance(item, dict):
                problems.append(
                    Problem(
                        path=rel,
                        line=iline,
                        column=icol,
                        code="entry-invalid",
                        message=f"{key}[{index}] must be a mapping with a name, got {item!r}",
                    )
                )
                continue
            name = item.get("name")
            if kind == "hook" and "handler" in item:
                # ai-harness keys bundle and inline hooks by `handler:`; same meaning.
                handler = item.get("handler")
                if name is None:
                    name = handler
                elif handler != name:
                    hline, hcol = lines.key((key, index, "handler"), (iline, icol))
                    problems.append(
                        Problem(
                            path=rel,
                            line=hline,
                            column=hcol,
                            code="entry-name-conflict",
                            message=f'{key}[{index}] has name "{name}" and '
                            f'handler "{handler}"; they are the same key, '
                            "keep one",
                        )
                    )
            if name is not None and not isinstance(name, str):
                nline, ncol = lines.key((key, index, "name"), (iline, icol))
                problems.append(
                    Problem(
                        path=rel,
                        line=nline,
                        column=ncol,
                        code="field-type",
                        message=f"{key}[{index}] name must be a string, got "
                        f"{a_type(name)} ({name!r}); use a name such as "
                        f"`name: my_{kind}`",
                    )
                )
                continue
            if not name:
                ident = "`name: ...` (or `handler: ...`)" if kind == "hook" else "`name: ...`"
                problems.append(
                    Problem(
                        path=rel,
                        line=iline,
                        column=icol,
                        code="entry-name-missing",
                        message=f"{key}[{index}] has no name; add {ident} to the {kind}",
                    )
                )
                # Still check the rest of the entry: one missing key must not hide the
                # others' problems. It is not loaded.
                nameless = Entry(
                    kind=kind,
                    name=f"{key}[{index}]",
                    data=item,
                    lines=lines,
                    base=(key, index),
                    path=rel,
                    layer=layer,
                    line=iline,
                )
                found: list[Problem] = []
                (_tool if kind == "tool" else _hook)(nameless, found)
                problems.extend(p for p in found if not p.code.endswith("-name-invalid"))
                continue
            yield Entry(
                kind=kind,
                name=name,
                data=item,
                lines=lines,
                base=(key, index),
                path=rel,
                layer=layer,
                line=iline,
            )


def _tool(entry: Entry, problems: list[Problem]) -> ToolSpec:
    problems.extend(checks.name_problems(entry))
    problems.extend(
        checks.unknown_keys(
            entry,
            checks.TOOL_KEYS if entry.body is not None else (*checks.TOOL_KEYS, *checks.ENTRY_KEYS),
        )
    )
    values, errs = checks.tool_fields(entry)
    problems.extend(errs)
    params, schema, perrs = build_parameters(
        entry.data.get("parameters"),
        owner=entry.label,
        path=entry.path,
        pos=lambda p: entry.lines.key((*entry.base, *p), (entry.line, 1)),
    )
    problems.extend(perrs)
    description = entry.body if entry.body is not None else _entry_description(entry, problems)
    return ToolSpec(
        name=entry.name,
        description=description or entry.name,
        parameters=params,
        input_schema=schema,
        source=Source(path=entry.path, line=entry.line, layer=entry.layer),
        **values,
    )


def _entry_description(entry: Entry, problems: list[Problem]) -> str:
    raw = entry.data.get("description")
    if raw is None or isinstance(raw, str):
        return raw or ""
    problems.append(
        entry.problem(
            ("description",),
            "field-type",
            f"{entry.label} description must be a string, got {a_type(raw)}",
        )
    )
    return ""


def _hook(entry: Entry, problems: list[Problem]) -> HookSpec:
    problems.extend(checks.name_problems(entry))
    problems.extend(
        checks.unknown_keys(
            entry,
            checks.HOOK_KEYS
            if entry.body is not None
            else (*checks.HOOK_KEYS, *checks.ENTRY_KEYS, "handler"),
        )
    )
    values, errs = checks.hook_fields(entry)
    problems.extend(errs)
    if entry.body is not None:
        description = entry.body
    else:
        description = _entry_description(entry, problems)
    values.setdefault("event", "")
    values.setdefault("script", "")
    return HookSpec(
        name=entry.name,
        description=description,
        source=Source(path=entry.path, line=entry.line, layer=entry.layer),
        **values,
    )


def _bundle(path: Path, rel: str, layer: str, problems: list[Problem]) -> list[Entry]:
    raw = _read(path, rel, problems)
    if raw is None:
        return []
    data, _body, lines, probs = split(raw, rel, "bundle")
    problems.extend(probs)
    if fatal(probs):
        return []
    problems.extend(fenced_yaml(raw, rel, data))
    if "tools" not in data and "hooks" not in data:
        problems.append(
            Problem(
                path=rel,
                line=1,
                column=1,
                severity="warning",
                code="bundle-empty",
                message=f"bundle {rel} has no tools: or hooks: list, so it adds "
                "nothing; add one, or move single tools to .harness/tools/",
            )
        )
    described = data.get("description")
    if described is not None and not isinstance(described, str):
        line, column = lines.key(("description",))
        problems.append(
            Problem(
                path=rel,
                line=line,
                column=column,
                code="field-type",
                message=f"bundle {rel} description must be a string, got {a_type(described)}",
            )
        )
    problems.extend(
        top_level_keys(data, lines, rel, checks.BUNDLE_KEYS, f"bundle {rel}", "unknown-key")
    )
    return list(_entries(data, lines, rel, layer, problems))


def _artifact(path: Path, rel: str, kind: str, problems: list[Problem]) -> Entry | None:
    raw = _read(path, rel, problems)
    if raw is None:
        return None
    data, body, lines, probs = split(raw, rel, kind)
    problems.extend(probs)
    if fatal(probs):
        return None
    name = path.name[:-3]
    return Entry(
        kind=kind,
        name=name,
        data=data,
        lines=lines,
        base=(),
        path=rel,
        layer=f"{kind}s",
        body=body,
        line=1,
    )


# ai-harness artifact kinds harness does not read: folder or file -> what it is, what to do.
UNSUPPORTED: dict[str, tuple[str, str]] = {
    "agents": (
        "ai-harness sub-agent definitions",
        "harness has no sub-agents or delegation; run each agent as its own harness project",
    ),
    "models": (
        "ai-harness model profiles (type: model)",
        "harness reads one model: block in harness.md; copy the profile you use there",
    ),
    "compaction": (
        "ai-harness context-compaction policies (type: compaction)",
        "harness does not compact context; remove the folder",
    ),
    "context": (
        "ai-harness context sources",
        "harness sends only the harness.md body to the model; move the text you need there",
    ),
    "identity.md": (
        "the ai-harness identity artifact (type: harness)",
        "harness uses the body of harness.md as the system prompt; move the text there",
    ),
}


# Every folder of .harness/ that harness reads (or writes: state).
READ_DIRS = frozenset(
    ("tools", "hooks", "servers", "tests", "evals", "state", "overrides", *BUNDLE_DIRS)
)


def _misspelt_dir(name: str, rel: str) -> list[Problem]:
    """``.harness/hook/``, ``.harness/Tools/``: a folder harness never reads, named like
    one it does."""
    match = closest(name.lower(), sorted(READ_DIRS - {"state"}))
    if match is None and name.lower().rstrip("s") + "s" in READ_DIRS:
        match = name.lower().rstrip("s") + "s"
    if match is None:
        return []
    return [
        Problem(
            path=rel,
            line=0,
            column=0,
            code="folder-ignored",
            message=f"{rel} is never read: harness reads .harness/{match}/ (lower-case, "
            f"exactly); move its files to .harness/{match}/",
        )
    ]


def unsupported_artifacts(dot: Path) -> list[Problem]:
    """A warning for each ai-harness artifact kind under ``.harness/`` that harness would
    otherwise ignore without a word (``artifact-unsupported``)."""
    try:
        with os.scandir(dot) as it:
            found = sorted((e.name, e.is_dir()) for e in it)
    except OSError:
        return []
    out = []
    for name, is_dir in found:
        rel = f"{DOT_HARNESS}/{name}" + ("/" if is_dir else "")
        if is_dir and name not in READ_DIRS and name not in UNSUPPORTED:
            out.extend(_misspelt_dir(name, rel))
            continue
        if name in UNSUPPORTED:
            what, how = UNSUPPORTED[name]
        elif not is_dir and name.endswith(".md"):
            what, how = (
                "an ai-harness root-level artifact (bundle or context)",
                "harness reads bundles only from .harness/plugins/, builtins/ and "
                "overrides/; move it to .harness/plugins/ if it holds tools: or "
                "hooks: (its body is documentation there, not model context)",
            )
        else:
            continue
        out.append(
            Problem(
                path=rel,
                line=0,
                column=0,
                severity="warning",
                code="artifact-unsupported",
                message=f"{rel} {'holds' if is_dir else 'is'} {what}; harness "
                f"does not read it: {how}",
            )
        )
    return out


def fenced_yaml(raw: bytes, rel: str, data: Mapping[str, Any]) -> list[Problem]:
    """Warn when the Markdown body holds a fenced YAML block with ``tools:``/``hooks:`` the
    frontmatter lacks: only the frontmatter is read, so those entries do nothing."""
    text = raw.decode("utf-8", "replace")
    if "```" not in text:
        return []
    lines = text.split("\n")
    closing = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if closing is None:
        return []
    out: list[Problem] = []
    fence: str | None = None
    for index in range(closing + 1, len(lines)):
        line = lines[index]
        stripped = line.strip()
        if fence is None:
            if stripped.startswith("```") and stripped[3:].strip().lower() in ("yaml", "yml"):
                fence = stripped[:3]
            continue
        if stripped.startswith(fence):
            fence = None
            continue
        for key in ("tools", "hooks"):
            if line.startswith(f"{key}:") and key not in data:
                out.append(
                    Problem(
                        path=rel,
                        line=index + 1,
                        column=1,
                        severity="warning",
                        code="body-yaml-ignored",
                        message=f"{rel} has `{key}:` in a fenced YAML block of its body, which is "
                        f"never read; move the {key}: list into the frontmatter between "
                        "the --- lines",
                    )
                )
    return out


def _config_keys() -> tuple[str, ...]:
    return KNOWN_KEYS


def origin_config_files(root: Path, have_md: bool) -> list[Problem]:
    """``harness.yaml`` / ``harness.yml`` at the root: ai-harness's project file, which
    harness never reads. An error without harness.md (every setting in it would be
    silently ignored), a warning beside one."""
    out = []
    for name in ORIGIN_CONFIG_FILES:
        if not (root / name).is_file():
            continue
        if have_md:
            message = (
                f"{name} is never read: harness reads its settings from harness.md only; "
                f"move what {name} sets into the frontmatter of harness.md and delete {name}"
            )
        else:
            message = (
                f"{name} is never read: harness reads its settings from harness.md (YAML "
                f"frontmatter between --- lines, then the system prompt); rename {name} to "
                f"harness.md and put its content between --- lines"
            )
        out.append(
            Problem(
                path=name,
                line=1,
                column=1,
                severity="warning" if have_md else "error",
                code="config-file-name",
                message=message,
            )
        )
    return out


def top_level_keys(
    data: Mapping[str, Any],
    lines: KeyLines,
    rel: str,
    known: tuple[str, ...],
    label: str,
    code: str,
) -> list[Problem]:
    """An error for each key of a bundle or of harness.md that harness does not read
    (issue 23), with a did-you-mean; ``x-`` keys and ``extensions:`` are allowed."""
    out = []
    why = extensions_problem(data)
    if why is not None:
        line, column = lines.key((EXTENSIONS,))
        out.append(Problem(path=rel, line=line, column=column, code="field-type", message=why))
    for key in data:
        if key in known or own_metadata(key):
            continue
        line, column = lines.key((key,))
        origin = origin_metadata(label, key)
        if origin is not None:
            out.append(
                Problem(
                    path=rel,
                    line=line,
                    column=column,
                    severity="warning",
                    code=code,
                    message=origin,
                )
            )
            continue
        hint = suggest(str(key), known)
        out.append(
            Problem(
                path=rel,
                line=line,
                column=column,
                code=code,
                message=f'{label} has unknown key "{key}"{hint}; known keys: '
                f"{', '.join(known)} (your own metadata: x-... or extensions:)",
            )
        )
    return out


def load(root: Path, prepared: Mapping[str, Prepared] | None = None) -> Loaded:  # noqa: C901
    """Load ``root``; return the project and the entry behind every spec.

    ``prepared`` maps the relative path of ``.harness/tools|hooks/*.md`` files to what
    :func:`prepare_all` returned for them; files missing from it are read here.
    """
    ready: Mapping[str, Prepared] = prepared or {}
    built: dict[int, Prepared] = {}  # id(entry) -> its preparation, for chosen entries

    root = Path(root)
    problems: list[Problem] = []
    dot = root / DOT_HARNESS
    server_entries: list[Entry] = []
    layered: dict[str, list[Entry]] = {"tool": [], "hook": []}
    overrides: list[Entry] = []

    def add(entries: list[Entry], target: dict[str, list[Entry]] | None = None) -> None:
        for e in entries:
            if target is None:
                overrides.append(e)
            else:
                target[e.kind].append(e)

    problems.extend(unsupported_artifacts(dot))
    for layer in BUNDLE_DIRS:
        for rel, path in _md_files(dot / layer, f"{DOT_HARNESS}/{layer}", problems):
            add(_bundle(path, rel, layer, problems), layered)

    # harness.md: config + inline tools/hooks + system prompt.
    system_prompt = ""
    config_data: dict[str, Any] = {}
    config_lines = KeyLines()
    hm = root / HARNESS_MD
    if hm.is_file():
        raw = _read(hm, HARNESS_MD, problems)
        if raw is not None:
            config_data, system_prompt, config_lines, probs = split(raw, HARNESS_MD, "config")
            problems.extend(probs)
            if not fatal(probs):
                problems.extend(fenced_yaml(raw, HARNESS_MD, config_data))
            problems.extend(
                top_level_keys(
                    config_data,
                    config_lines,
                    HARNESS_MD,
                    _config_keys(),
                    "harness.md",
                    "config-unknown-key",
                )
            )
            add(list(_entries(config_data, config_lines, HARNESS_MD, "inline", problems)), layered)
            server_entries = servers.inline_entries(
                config_data.get("mcp_servers"), config_lines, HARNESS_MD, problems
            )
    problems.extend(origin_config_files(root, hm.is_file()))
    config, cprobs = parse_config(config_data, root, HARNESS_MD, config_lines)
    problems.extend(cprobs)

    for kind in ("tool", "hook"):
        folder = f"{kind}s"
        for rel, path in _md_files(dot / folder, f"{DOT_HARNESS}/{folder}", problems):
            prep = ready.get(rel)
            if prep is None:
                entry = _artifact(path, rel, kind, problems)
            else:
                problems.extend(prep.problems)
                entry = prep.entry
                if entry is not None:
                    built[id(entry)] = prep
            if entry is not None:
                layered[kind].append(entry)
    for rel, path in _md_files(dot / "overrides", f"{DOT_HARNESS}/overrides", problems):
        add(_bundle(path, rel, "overrides", problems))

    chosen: dict[str, dict[str, Entry]] = {"tool": {}, "hook": {}}
    for kind, entries in layered.items():
        for e in entries:
            first = chosen[kind].get(e.name)
            if first is None:
                chosen[kind][e.name] = e
                continue
            line, column = e.pos("name") if e.body is None else (1, 1)
            problems.append(
                Problem(
                    path=e.path,
                    line=line,
                    column=column,
                    code="duplicate-name",
                    message=f'{kind} "{e.name}" is defined more than once: in '
                    f"{first.path}:{first.line} and in {e.path}:{line}; rename one, or put "
                    "the replacement in "
                    ".harness/overrides/ to replace it on purpose",
                )
            )
    seen_override: dict[tuple[str, str], Entry] = {}
    for e in overrides:
        line, column = e.pos("name")
        ident = (e.kind, e.name)
        if ident in seen_override:
            first = seen_override[ident]
            problems.append(
                Problem(
                    path=e.path,
                    line=line,
                    column=column,
                    code="override-duplicate",
                    message=f'{e.kind} "{e.name}" is overridden more than once: in '
                    f"{first.path}:{first.line} and in {e.path}:{line}; keep one override",
                )
            )
            continue
        seen_override[ident] = e
        if e.name not in chosen[e.kind]:
            defined = chosen[e.kind]
            problems.append(
                Problem(
                    path=e.path,
                    line=line,
                    column=column,
                    code="override-unused",
                    message=f'override of {e.kind} "{e.name}" replaces nothing: '
                    "no lower layer defines "
                    f"it{suggest(e.name, defined)}; fix the name, or move the {e.kind} to "
                    f".harness/{e.kind}s/ if it is new",
                )
            )
            continue
        chosen[e.kind][e.name] = e

    loaded = Loaded(project=Project(root=root, config=config))  # placeholder, replaced below
    tools: dict[str, ToolSpec] = {}
    for name in sorted(chosen["tool"]):
        e = chosen["tool"][name]
        prep = built.get(id(e))
        if prep is not None and isinstance(prep.spec, ToolSpec):
            problems.extend(prep.spec_problems)
            tools[name] = prep.spec
        else:
            tools[name] = _tool(e, problems)
        loaded.tool_entries[name] = e
    hooks: list[HookSpec] = []
    for name in sorted(chosen["hook"]):
        e = chosen["hook"][name]
        prep = built.get(id(e))
        if prep is not None and isinstance(prep.spec, HookSpec):
            problems.extend(prep.spec_problems)
            hooks.append(prep.spec)
        else:
            hooks.append(_hook(e, problems))
        loaded.hook_entries[name] = e
    hooks.sort(key=hook_order)

    def where(spec: ToolSpec) -> tuple[str, int, int]:
        e = loaded.tool_entries[spec.name]
        line, column = e.pos("name") if e.body is None else (1, 1)
        return e.path, line, column

    problems.extend(checks.collisions(tools, where))
    server_specs = _servers(dot, server_entries, problems)
    problems.extend(policy_problems(config, tools, server_specs, config_lines, HARNESS_MD))
    problems.sort(key=_order)
    loaded.project = Project(
        root=root,
        config=config,
        system_prompt=system_prompt,
        tools=tools,
        hooks=tuple(hooks),
        problems=tuple(problems),
        servers=server_specs,
    )
    return loaded


def _servers(dot: Path, entries: list[Entry], problems: list[Problem]) -> dict[str, Any]:
    """Upstream servers: harness.md ``mcp_servers:`` then ``.harness/servers/*.md``; a
    name declared twice is an error naming both places."""
    for rel, path in _md_files(dot / "servers", f"{DOT_HARNESS}/servers", problems):
        entry = _artifact(path, rel, "server", problems)
        if entry is not None:
            entries.append(entry)
    chosen: dict[str, Any] = {}
    first: dict[str, Entry] = {}
    for e in entries:
        if e.name in first:
            f = first[e.name]
            line, column = e.pos("name") if e.body is None else (1, 1)
            problems.append(
                Problem(
                    path=e.path,
                    line=line,
                    column=column,
                    code="duplicate-name",
                    message=f'server "{e.name}" is declared more than once: in {f.path}:{f.line} '
                    f"and in {e.path}:{line}; remove or rename one",
                )
            )
            continue
        first[e.name] = e
        spec, errs = servers.build(e)
        problems.extend(errs)
        chosen[e.name] = spec
    return dict(sorted(chosen.items()))


def _order(p: Problem) -> tuple[str, int, int, str]:
    return (p.path, p.line, p.column, p.code)
