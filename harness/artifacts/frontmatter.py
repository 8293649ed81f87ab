"""Split a Markdown artifact into YAML frontmatter and body (docs/spec.md §2).

``split`` never raises for content problems: whatever is wrong comes back as
:class:`Problem` values. YAML is loaded safely with the C loader when available,
anchors and aliases are rejected, only JSON-like values are built (dates stay
strings), and every position is a line of the *file*, not of the frontmatter.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

import yaml

from harness.artifacts.model import Problem
from harness.artifacts.params import a_type

MAX_FRONTMATTER_BYTES = 256 * 1024
# The C composer (and our builder) recurse once per nested collection, block or flow;
# a 200 KB document can nest 100,000 deep and overflow the C stack (SIGSEGV). Deeper
# documents are refused from the event stream, which libyaml produces without recursion.
MAX_NESTING = 200
# Codes after which the mapping is still usable (the artifact keeps loading).
NON_FATAL = frozenset(("yaml-duplicate-key",))

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DELIM = re.compile(r"---[ \t]*")
_BRACKETS = re.compile(r"[^\[\]{}]+")


class _Loader(_BaseLoader):
    """Safe loader whose dates stay strings (values are built by :class:`_Builder`)."""

    yaml_implicit_resolvers = {
        ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for ch, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
    }


class KeyLines(dict[str, int]):
    """Top-level key -> 1-based file line, plus positions of every nested node.

    ``KeyLines`` is a plain ``dict[str, int]`` for top-level keys (what
    :func:`harness.config.parse_config` takes). Nested positions are addressed by
    a path tuple of keys and list indexes, e.g. ``("tools", 0, "script")``:

    - :meth:`key` -> (line, column) of the key (of the item, for list entries);
    - :meth:`value` -> (line, column) where the value's content starts. For block
      scalars (``|``, ``>``) that is the line after the indicator and the column of
      the first content character.
    """

    __slots__ = ("keys_at", "values_at", "text")

    def __init__(self) -> None:
        super().__init__()
        self.keys_at: dict[tuple[Any, ...], tuple[int, int]] = {}
        # path -> (0-based frontmatter line, 0-based column, scalar style) of scalar values
        self.values_at: dict[tuple[Any, ...], tuple[int, int, str | None]] = {}
        self.text: list[str] = []

    def key(self, path: tuple[Any, ...], default: tuple[int, int] = (1, 1)) -> tuple[int, int]:
        while path:
            pos = self.keys_at.get(path)
            if pos is not None:
                return pos
            path = path[:-1]
        return default

    def value(self, path: tuple[Any, ...], default: tuple[int, int] = (1, 1)) -> tuple[int, int]:
        raw = self.values_at.get(path)
        if raw is None:
            return self.key(path, default)
        line, column, style = raw
        if style in ("|", ">"):
            # Content starts on the line after the indicator, at the block indentation.
            for candidate in self.text[line + 1 : line + 50]:
                if candidate.strip():
                    return line + 3, len(candidate) - len(candidate.lstrip(" ")) + 1
            return line + 3, 1
        if style in ("'", '"'):
            return line + 2, column + 2
        return line + 2, column + 1


def _label(path: str | PurePath, kind: str) -> str:
    return f"parse {kind} {PurePath(path).name}"


def split(  # noqa: C901
    text_or_bytes: str | bytes, path: str | PurePath, kind: str = "tool"
) -> tuple[dict[str, Any], str, KeyLines, list[Problem]]:
    """Return ``(mapping, body, key_lines, problems)`` for one artifact.

    ``path`` is what problems name (usually relative to the root); messages use its
    file name: ``parse tool NAME.md: ...``. ``kind`` is ``tool``, ``hook``,
    ``bundle`` or ``config``. On a fatal problem the mapping is empty.
    """
    where = str(path)
    label = _label(path, kind)
    lines = KeyLines()
    problems: list[Problem] = []

    def fail(
        code: str, msg: str, line: int = 1, column: int = 1
    ) -> tuple[dict[str, Any], str, KeyLines, list[Problem]]:
        problems.append(
            Problem(path=where, line=line, column=column, code=code, message=f"{label}: {msg}")
        )
        return {}, "", lines, problems

    if isinstance(text_or_bytes, (bytes, bytearray)):
        raw = bytes(text_or_bytes)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            return fail(
                "encoding-invalid",
                f"not valid UTF-8 at byte offset {exc.start} "
                f"(byte 0x{raw[exc.start]:02x}); save the file as UTF-8",
                line,
            )
    else:
        text = text_or_bytes
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    all_lines = text.split("\n")
    if not _DELIM.fullmatch(all_lines[0]):
        return fail(
            "frontmatter-missing",
            "missing --- frontmatter delimiter on line 1; "
            "start the file with a line that is exactly ---",
        )
    end = 0
    for i in range(1, len(all_lines)):
        candidate = all_lines[i]
        if candidate.startswith("---") and _DELIM.fullmatch(candidate):
            end = i
            break
    if not end:
        return fail(
            "frontmatter-unclosed",
            "no closing --- delimiter; end the frontmatter with a line that is exactly ---",
        )
    front = "\n".join(all_lines[1:end]) + "\n"
    size = len(front.encode("utf-8")) if len(front) * 4 > MAX_FRONTMATTER_BYTES else len(front)
    if size > MAX_FRONTMATTER_BYTES:
        return fail(
            "frontmatter-too-large",
            f"frontmatter is {size} bytes, more than the "
            f"{MAX_FRONTMATTER_BYTES} bytes (256 KiB) allowed; move large content "
            "out of the frontmatter",
            2,
        )
    body_lines = all_lines[end + 1 :]
    lo, hi = 0, len(body_lines)
    while lo < hi and not body_lines[lo].strip():
        lo += 1
    while hi > lo and not body_lines[hi - 1].strip():
        hi -= 1
    body = "\n".join(body_lines[lo:hi])
    if not front.strip():
        return {}, body, lines, problems
    mapping, problem, duplicates = _load(front, lines, all_lines[1:end])
    if problem is not None:
        code, line, column, msg = problem
        fail(code, msg, line, column)
        return {}, body, lines, problems
    if mapping is None:
        return {}, body, lines, problems
    if not isinstance(mapping, dict):
        fail(
            "frontmatter-not-mapping",
            f"frontmatter must be a mapping of keys to values, "
            f"got {a_type(mapping)}; write it as `key: value` lines",
            2,
        )
        return {}, body, lines, problems
    for line, column, msg in duplicates:
        problems.append(
            Problem(
                path=where,
                line=line,
                column=column,
                code="yaml-duplicate-key",
                message=f"{label}: {msg}",
            )
        )
    return mapping, body, lines, problems


def fatal(problems: list[Problem]) -> bool:
    """True when ``split`` could not produce a usable mapping (vs. non-fatal problems)."""
    return any(p.code not in NON_FATAL for p in problems)


def _max_depth(front: str) -> int:
    """Bracket depth, ignoring quotes: an upper bound of the flow nesting."""
    brackets = "".join(_BRACKETS.split(front))
    depth = best = 0
    for ch in brackets:
        if ch in "[{":
            depth += 1
            if depth > best:
                best = depth
        elif depth:
            depth -= 1
    return best


Found = tuple[str, int, int, str]
Duplicate = tuple[int, int, str]


def _may_nest_deeply(front: str, front_lines: list[str]) -> bool:
    """Cheap bound: can this text nest more than MAX_NESTING collections?

    A block collection inside another starts at a larger column (a sequence inside a
    mapping may share its column), so block depth <= 2 * (longest line + 1); flow
    nesting adds at most the bracket depth.
    """
    longest = max(map(len, front_lines), default=0)
    flow = _max_depth(front) if ("[" in front or "{" in front) else 0
    return 2 * (longest + 1) + flow > MAX_NESTING


def _load(
    front: str, lines: KeyLines, front_lines: list[str]
) -> tuple[Any, Found | None, list[Duplicate]]:
    """Compose in C, then build JSON-like values in one pass that records positions."""
    # An alias needs an anchor, and an anchor needs "&": without it neither can occur.
    anchors = "&" in front
    if anchors or _may_nest_deeply(front, front_lines):
        found = _scan_events(front, anchors)
        if found is not None:
            return None, found, []
    loader = _Loader(front)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None, []
        lines.text = front.split("\n")
        builder = _Builder(loader, lines)
        return builder.build(node, ()), None, builder.duplicates
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 2 if mark is not None else 2
        column = mark.column + 1 if mark is not None else 1
        what = exc.problem or exc.context or "invalid YAML"
        if "nesting depth" in what:
            # PyYAML >= 6.0.4 refuses deep flow nesting in its scanner, before the event
            # scan above reaches MAX_NESTING: the same finding, whichever says it first.
            return None, _too_deep(line, column), []
        if "alias" in what:
            return (
                None,
                (
                    "yaml-alias",
                    line,
                    column,
                    f"yaml: line {line}: aliases are not "
                    "allowed (they allow exponential documents); repeat the value "
                    "instead",
                ),
                [],
            )
        if isinstance(exc, yaml.constructor.ConstructorError):
            return None, ("yaml-value", line, column, f"yaml: line {line}: {what}"), []
        if exc.context and exc.problem:
            what = f"{exc.problem} ({exc.context})"
        return (
            None,
            (
                "yaml-syntax",
                line,
                column,
                f"yaml: line {line}: {what}; check the indentation and quoting on that line",
            ),
            [],
        )
    except yaml.YAMLError as exc:
        return None, ("yaml-syntax", 2, 1, f"yaml: {exc}"), []
    except RecursionError:  # pragma: no cover - MAX_NESTING keeps the builder far below it
        return None, ("yaml-too-deep", 2, 1, "yaml: the document nests too deeply; flatten it"), []
    finally:
        dispose = getattr(loader, "dispose", None)
        if dispose is not None:
            dispose()


def _too_deep(line: int, column: int) -> Found:
    return (
        "yaml-too-deep",
        line,
        column,
        f"yaml: line {line}: collections nest deeper than {MAX_NESTING} "
        "levels; flatten the frontmatter",
    )


def _scan_events(front: str, anchors: bool) -> Found | None:
    """Walk the event stream (no recursion, no nodes) for anchors and excess nesting.

    Only called when the text contains ``&`` or might nest deeper than MAX_NESTING.
    Stops at the first finding; a syntax error is left to the real parse, which stops
    at the same event, before composing anything deeper than what was seen here.
    """
    loader = _Loader(front)
    start = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
    end = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    depth = 0
    try:
        while True:
            event = loader.get_event()
            if event is None or isinstance(event, yaml.StreamEndEvent):
                return None
            if isinstance(event, start):
                depth += 1
                if depth > MAX_NESTING:
                    mark: Any = event.start_mark
                    return _too_deep(mark.line + 2, mark.column + 1)
            elif isinstance(event, end):
                depth -= 1
            if anchors and not isinstance(event, yaml.AliasEvent):
                anchor = getattr(event, "anchor", None)
                if anchor is not None:
                    line = event.start_mark.line + 2
                    return (
                        "yaml-alias",
                        line,
                        event.start_mark.column + 1,
                        f"yaml: line {line}: anchors (&{anchor}) are not allowed; "
                        "repeat the value instead",
                    )
    except yaml.YAMLError:
        return None  # the real parse reports it with its line
    finally:
        dispose = getattr(loader, "dispose", None)
        if dispose is not None:
            dispose()


_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_BOOLS = yaml.constructor.SafeConstructor.bool_values
_TAG_CACHE: dict[str, str] = {}


def _fast_resolve(self: Any, kind: Any, value: Any, implicit: Any) -> str:
    """Resolver.resolve with a cache for plain scalars (most are repeated keys)."""
    if kind is yaml.ScalarNode:
        if not implicit[0]:
            return _STR
        tag = _TAG_CACHE.get(value)
        if tag is None:
            tag = yaml.resolver.BaseResolver.resolve(self, kind, value, implicit)
            if len(_TAG_CACHE) < 4096 and len(value) < 64:
                _TAG_CACHE[value] = tag
        return tag
    return _SEQ if kind is yaml.SequenceNode else _MAP


def _no_path(*_: Any) -> None:
    """Path resolvers are unused; skipping them saves two Python calls per node."""


_Loader.resolve = _fast_resolve
_Loader.descend_resolver = _no_path
_Loader.ascend_resolver = _no_path


class _Builder:
    """Nodes -> dict/list/str/int/float/bool/None, recording key positions on the way."""

    __slots__ = ("loader", "keys_at", "values_at", "top", "duplicates")

    def __init__(self, loader: Any, lines: KeyLines) -> None:
        self.loader = loader
        self.keys_at = lines.keys_at
        self.values_at = lines.values_at
        self.top = lines
        # (line, column, message) of keys repeated in one mapping (the last one wins)
        self.duplicates: list[Duplicate] = []

    def duplicate(self, key_node: yaml.Node, path: tuple[Any, ...], first: int) -> None:
        mark = key_node.start_mark
        line = mark.line + 2
        where = "".join(
            f"[{k}]" if isinstance(k, int) and not isinstance(k, bool) else f".{k}" for k in path
        ).lstrip(".")
        self.duplicates.append(
            (
                line,
                mark.column + 1,
                (
                    f'yaml: line {line}: duplicate key "{key_node.value}"'
                    f"{f' in {where}' if where else ''} (first on line {first}); "
                    "YAML keeps only the "
                    "last one: remove or rename one"
                ),
            )
        )

    def scalar(self, node: yaml.ScalarNode) -> Any:
        tag = node.tag
        value = node.value
        if tag == _STR:
            return value
        if tag == "tag:yaml.org,2002:int":
            if value.isdigit() and (value[0] != "0" or value == "0"):
                return int(value)
            return yaml.constructor.SafeConstructor.construct_yaml_int(self.loader, node)
        if tag == "tag:yaml.org,2002:null":
            return None
        if tag == "tag:yaml.org,2002:bool":
            return _BOOLS[value.lower()]
        if tag == "tag:yaml.org,2002:float":
            return yaml.constructor.SafeConstructor.construct_yaml_float(self.loader, node)
        what = "merge keys (<<) are" if tag == "tag:yaml.org,2002:merge" else f"the tag {tag} is"
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"{what} not allowed; use a plain string, number, list or mapping",
            node.start_mark,
        )

    def build(self, node: yaml.Node, path: tuple[Any, ...]) -> Any:
        cls = node.__class__
        if cls is yaml.ScalarNode:
            return self.scalar(node)  # type: ignore[arg-type]
        if cls is yaml.MappingNode:
            if node.tag != _MAP:
                self.scalar(yaml.ScalarNode(node.tag, "", node.start_mark))
            out: dict[Any, Any] = {}
            keys_at = self.keys_at
            values_at = self.values_at
            for key_node, value_node in node.value:
                if key_node.__class__ is yaml.ScalarNode:
                    # Most keys and values are plain strings: no call for those.
                    key = key_node.value if key_node.tag == _STR else self.scalar(key_node)
                else:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        "a mapping key must be a plain value, not a list or mapping",
                        key_node.start_mark,
                    )
                km = key_node.start_mark
                sub = (*path, key)
                if key in out:
                    self.duplicate(key_node, path, keys_at[sub][0])
                keys_at[sub] = (km.line + 2, km.column + 1)
                if not path and isinstance(key, str):
                    self.top.setdefault(key, km.line + 2)
                if value_node.__class__ is yaml.ScalarNode:
                    vm = value_node.start_mark
                    values_at[sub] = (vm.line, vm.column, value_node.style)
                    out[key] = (
                        value_node.value if value_node.tag == _STR else self.scalar(value_node)
                    )
                else:
                    out[key] = self.build(value_node, sub)
            return out
        if cls is yaml.SequenceNode:
            if node.tag != _SEQ:
                self.scalar(yaml.ScalarNode(node.tag, "", node.start_mark))
            items = []
            keys_at = self.keys_at
            for i, item in enumerate(node.value):
                im = item.start_mark
                sub = (*path, i)
                keys_at[sub] = (im.line + 2, im.column + 1)
                items.append(self.build(item, sub))
            return items
        raise yaml.constructor.ConstructorError(
            None, None, "unsupported YAML node", node.start_mark
        )
