"""Split a Markdown artifact into YAML frontmatter and body (SPEC §2).

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

MAX_FRONTMATTER_BYTES = 256 * 1024
# Flow collections nest recursively in the YAML parser; deeper documents could
# exhaust the C stack, so they are refused before parsing.
MAX_NESTING = 200

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
            for candidate in self.text[line + 1:line + 50]:
                if candidate.strip():
                    return line + 3, len(candidate) - len(candidate.lstrip(" ")) + 1
            return line + 3, 1
        if style in ("'", '"'):
            return line + 2, column + 2
        return line + 2, column + 1


def _label(path: str | PurePath, kind: str) -> str:
    return f"parse {kind} {PurePath(path).name}"


def split(
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

    def fail(code: str, msg: str, line: int = 1, column: int = 1) -> tuple[dict[str, Any], str,
                                                                          KeyLines, list[Problem]]:
        problems.append(Problem(path=where, line=line, column=column, code=code,
                                message=f"{label}: {msg}"))
        return {}, "", lines, problems

    if isinstance(text_or_bytes, (bytes, bytearray)):
        raw = bytes(text_or_bytes)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            return fail("encoding-invalid", f"not valid UTF-8 at byte offset {exc.start} "
                        f"(byte 0x{raw[exc.start]:02x}); save the file as UTF-8", line)
    else:
        text = text_or_bytes
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    all_lines = text.split("\n")
    if not _DELIM.fullmatch(all_lines[0]):
        return fail("frontmatter-missing", "missing --- frontmatter delimiter on line 1; "
                    "start the file with a line that is exactly ---")
    end = 0
    for i in range(1, len(all_lines)):
        candidate = all_lines[i]
        if candidate.startswith("---") and _DELIM.fullmatch(candidate):
            end = i
            break
    if not end:
        return fail("frontmatter-unclosed", "no closing --- delimiter; end the frontmatter "
                    "with a line that is exactly ---")
    front = "\n".join(all_lines[1:end]) + "\n"
    size = len(front.encode("utf-8")) if len(front) * 4 > MAX_FRONTMATTER_BYTES else len(front)
    if size > MAX_FRONTMATTER_BYTES:
        return fail("frontmatter-too-large", f"frontmatter is {size} bytes, more than the "
                    f"{MAX_FRONTMATTER_BYTES} bytes (256 KiB) allowed; move large content "
                    "out of the frontmatter", 2)
    body_lines = all_lines[end + 1:]
    lo, hi = 0, len(body_lines)
    while lo < hi and not body_lines[lo].strip():
        lo += 1
    while hi > lo and not body_lines[hi - 1].strip():
        hi -= 1
    body = "\n".join(body_lines[lo:hi])
    if not front.strip():
        return {}, body, lines, problems
    mapping, problem = _load(front, lines)
    if problem is not None:
        code, line, column, msg = problem
        fail(code, msg, line, column)
        return {}, body, lines, problems
    if mapping is None:
        return {}, body, lines, problems
    if not isinstance(mapping, dict):
        fail("frontmatter-not-mapping", f"frontmatter must be a mapping of keys to values, "
             f"got a {_yaml_type(mapping)}; write it as `key: value` lines", 2)
        return {}, body, lines, problems
    return mapping, body, lines, problems


def _yaml_type(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _max_depth(front: str) -> int:
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


def _load(front: str, lines: KeyLines) -> tuple[Any, tuple[str, int, int, str] | None]:
    """Compose in C, then build JSON-like values in one pass that records positions."""
    if ("[" in front or "{" in front) and _max_depth(front) > MAX_NESTING:
        return None, ("yaml-too-deep", 2, 1, f"yaml: collections nest deeper than {MAX_NESTING} "
                      "levels; flatten the frontmatter")
    # An alias needs an anchor, and an anchor needs "&": without it neither can occur.
    if "&" in front:
        found = _find_anchor(front)
        if found is not None:
            return None, found
    loader = _Loader(front)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        lines.text = front.split("\n")
        return _Builder(loader, lines).build(node, ()), None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 2 if mark is not None else 2
        column = mark.column + 1 if mark is not None else 1
        what = exc.problem or exc.context or "invalid YAML"
        if "alias" in what:
            return None, ("yaml-alias", line, column, f"yaml: line {line}: aliases are not "
                          "allowed (they allow exponential documents); repeat the value instead")
        if isinstance(exc, yaml.constructor.ConstructorError):
            return None, ("yaml-value", line, column, f"yaml: line {line}: {what}")
        if exc.context and exc.problem:
            what = f"{exc.problem} ({exc.context})"
        return None, ("yaml-syntax", line, column, f"yaml: line {line}: {what}; "
                      "check the indentation and quoting on that line")
    except yaml.YAMLError as exc:
        return None, ("yaml-syntax", 2, 1, f"yaml: {exc}")
    except RecursionError:
        return None, ("yaml-too-deep", 2, 1, "yaml: the document nests too deeply; flatten it")
    finally:
        dispose = getattr(loader, "dispose", None)
        if dispose is not None:
            dispose()


def _find_anchor(front: str) -> tuple[str, int, int, str] | None:
    """Scan events for anchors (only called when the text contains ``&``)."""
    loader = _Loader(front)
    try:
        while True:
            event = loader.get_event()
            if event is None or isinstance(event, yaml.StreamEndEvent):
                return None
            anchor = getattr(event, "anchor", None)
            if anchor is not None and not isinstance(event, yaml.AliasEvent):
                line = event.start_mark.line + 2
                return ("yaml-alias", line, event.start_mark.column + 1,
                        f"yaml: line {line}: anchors (&{event.anchor}) are not allowed; "
                        "repeat the value instead")
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

    __slots__ = ("loader", "keys_at", "values_at", "top")

    def __init__(self, loader: Any, lines: KeyLines) -> None:
        self.loader = loader
        self.keys_at = lines.keys_at
        self.values_at = lines.values_at
        self.top = lines

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
            None, None, f"{what} not allowed; use a plain string, number, list or mapping",
            node.start_mark)

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
                    key = self.scalar(key_node)
                else:
                    raise yaml.constructor.ConstructorError(
                        None, None, "a mapping key must be a plain value, not a list or mapping",
                        key_node.start_mark)
                km = key_node.start_mark
                sub = (*path, key)
                keys_at[sub] = (km.line + 2, km.column + 1)
                if not path and isinstance(key, str):
                    self.top.setdefault(key, km.line + 2)
                if value_node.__class__ is yaml.ScalarNode:
                    vm = value_node.start_mark
                    values_at[sub] = (vm.line, vm.column, value_node.style)
                    out[key] = self.scalar(value_node)
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
        raise yaml.constructor.ConstructorError(None, None, "unsupported YAML node",
                                                node.start_mark)
