"""The value shapes the guard checker reasons with: which JSON kinds a value may have,
the keys of a dict, the items of a list, the literal texts of a string, and where the
value came from (for messages).

Small on purpose, like the type lattice of a checker for a dynamic language: a join
(either branch), narrowing (``type(x) == "string"``, ``if x:``) and a shape for each
declared payload type (:mod:`harness.events`) and JSON Schema.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

STR, INT, FLOAT, BOOL, NULL, LIST, DICT = "str", "int", "float", "bool", "null", "list", "dict"
ALL = frozenset((STR, INT, FLOAT, BOOL, NULL, LIST, DICT))
NAMES = {
    STR: "a string",
    INT: "an integer",
    FLOAT: "a number",
    BOOL: "a boolean",
    NULL: "None",
    LIST: "a list",
    DICT: "a dict",
}
# Starlark's type() names -> kinds.
TYPE_NAMES = {
    "string": STR,
    "int": INT,
    "float": FLOAT,
    "bool": BOOL,
    "NoneType": NULL,
    "list": LIST,
    "tuple": LIST,
    "dict": DICT,
}


@dataclass(frozen=True, slots=True)
class Shape:
    """A set of possible values. ``keys`` is None when a dict's keys are unknown (open);
    ``texts`` the literal strings a string may be (None: any); ``unknown`` says why the
    kinds are not known (a warning then says what to write instead)."""

    kinds: frozenset[str] = ALL
    keys: Mapping[str, Shape] | None = None
    item: Shape | None = None
    texts: frozenset[str] | None = None
    what: str = ""  # how the script wrote it, e.g. payload["result"]
    role: str = ""  # "payload" (an event's whole payload), "toolname", "arguments"
    unknown: str = ""  # why the kinds are not known, and what to write instead
    event: str = ""  # the event of a "payload" shape
    extra: bool = False  # ``keys`` are the declared ones; others may be there too

    @property
    def known(self) -> bool:
        return self.kinds != ALL

    def named(self, what: str, role: str = "") -> Shape:
        return replace(self, what=what, role=role)

    def only(self, kinds: Iterable[str]) -> Shape:
        """Narrowed to ``kinds`` (what ``type(x) == ...`` proves)."""
        kept = self.kinds & frozenset(kinds)
        return replace(self, kinds=kept, unknown="" if kept != ALL else self.unknown)

    def without(self, kinds: Iterable[str]) -> Shape:
        return replace(self, kinds=self.kinds - frozenset(kinds))

    def text(self) -> str:
        """The kinds in words: "a dict", "a string or None"."""
        if not self.known:
            return "any value"
        names = [NAMES[k] for k in sorted(self.kinds)]
        if not names:
            return "nothing"
        return " or ".join(names)


ANY = Shape()
NOTHING = Shape(kinds=frozenset())


def of(*kinds: str, **kw: Any) -> Shape:
    return Shape(kinds=frozenset(kinds), **kw)


def text(value: str | None = None) -> Shape:
    return of(STR, texts=None if value is None else frozenset((value,)))


def join(a: Shape, b: Shape) -> Shape:
    """A value that is either ``a`` or ``b``."""
    if a is b:
        return a
    if (  # the common case (two parameters of one type): nothing to merge
        a.kinds == b.kinds
        and a.keys is None
        and b.keys is None
        and a.item is None
        and b.item is None
        and a.texts is None
        and b.texts is None
        and a.extra == b.extra
    ):
        return a
    if not a.kinds:
        return b
    if not b.kinds:
        return a
    keys: Mapping[str, Shape] | None = None
    if a.keys is not None and b.keys is not None:
        keys = dict(a.keys)
        for k, v in b.keys.items():
            keys[k] = join(keys[k], v) if k in keys else v
    elif DICT not in a.kinds:
        keys = b.keys
    elif DICT not in b.kinds:
        keys = a.keys
    item = a.item if b.item is None else b.item if a.item is None else join(a.item, b.item)
    texts = None if a.texts is None or b.texts is None else a.texts | b.texts
    if STR not in a.kinds:
        texts = b.texts
    elif STR not in b.kinds:
        texts = a.texts
    return Shape(
        kinds=a.kinds | b.kinds,
        keys=keys,
        item=item,
        texts=texts,
        what=a.what if a.what == b.what else a.what or b.what,
        role=a.role if a.role == b.role else "",
        unknown=a.unknown or b.unknown,
        event=a.event if a.event == b.event else "",
        extra=a.extra or b.extra,
    )


def declared(t: Any) -> Shape:
    """The shape of a type of :mod:`harness.events`."""
    if isinstance(t, list):
        return of(LIST, item=declared(t[0]))
    if isinstance(t, dict):
        return of(DICT, keys={k: declared(v) for k, v in t.items()})
    kinds: set[str] = set()
    for name in str(t).split("|"):
        kinds |= {
            "string": {STR},
            "integer": {INT},
            "number": {INT, FLOAT},
            "boolean": {BOOL},
            "null": {NULL},
            "object": {DICT},
            "any": set(ALL),
        }[name]
    return Shape(kinds=frozenset(kinds))


_SCHEMA_TYPES = {
    "string": {STR},
    "integer": {INT},
    "number": {INT, FLOAT},
    "boolean": {BOOL},
    "null": {NULL},
    "object": {DICT},
    "array": {LIST},
}


def from_schema(schema: Any, depth: int = 0) -> Shape:
    """The shape of values a JSON Schema accepts (what it cannot say stays unknown)."""
    if not isinstance(schema, Mapping) or depth > 8:
        return ANY
    kinds: set[str] = set()
    t = schema.get("type")
    for name in [t] if isinstance(t, str) else t if isinstance(t, list) else []:
        kinds |= _SCHEMA_TYPES.get(str(name), set(ALL))
    if "enum" in schema and isinstance(schema["enum"], list) and not kinds:
        for v in schema["enum"]:
            kinds |= {_json_kind(v)}
    if "const" in schema and not kinds:
        kinds.add(_json_kind(schema["const"]))
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and not kinds:
            parts = [from_schema(s, depth + 1) for s in schema[key]]
            out = NOTHING
            for p in parts:
                out = join(out, p)
            return out if parts else ANY
    if not kinds:
        return ANY
    keys = None
    props = schema.get("properties")
    if DICT in kinds and isinstance(props, Mapping) and props:
        keys = {str(k): from_schema(v, depth + 1) for k, v in props.items()}
    extra = keys is not None and schema.get("additionalProperties") is not False
    item = from_schema(schema.get("items"), depth + 1) if LIST in kinds else None
    return Shape(kinds=frozenset(kinds), keys=keys, item=item, extra=extra)


def _json_kind(value: Any) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return FLOAT
    if isinstance(value, str):
        return STR
    if isinstance(value, list):
        return LIST
    return DICT


MATCH = of(
    DICT,
    keys={
        "match": text(),
        "groups": of(LIST, item=of(STR, NULL)),
        "named": of(DICT),
        "start": of(INT),
        "end": of(INT),
    },
)
ENTRY = of(DICT, keys={"name": text(), "is_dir": of(BOOL), "size": of(INT)})
# What the built-ins a hook may call return (docs/builtins.md); the rest is unknown.
BUILTIN_RESULTS: dict[str, Shape] = {
    "re.match": join(MATCH, of(NULL)).named("re.match(...)"),
    "re.search": join(MATCH, of(NULL)).named("re.search(...)"),
    "re.findall": of(LIST),
    "re.find_all": of(LIST, item=text()),
    "re.split": of(LIST, item=text()),
    "re.sub": text(),
    "re.replace": text(),
    "re.escape": text(),
    "fs.list": of(LIST, item=ENTRY).named("fs.list(...)"),
    "fs.glob": of(LIST, item=text()),
    "fs.exists": of(BOOL),
    "fs.read": text(),
    "fs.read_lines": of(LIST, item=text()),
    "fs.line_count": of(INT),
    "json.encode": text(),
    "hash.sha256": text(),
    "hash.md5": text(),
    "base64.encode": text(),
    "base64.decode": text(),
    "string.lower": text(),
    "string.upper": text(),
    "string.trim": text(),
    "string.split": of(LIST, item=text()),
    "string.join": text(),
    "string.truncate": text(),
    "uuid.v4": text(),
    "time.now": of(INT, FLOAT),
}
# The arguments (by position) of built-ins that must be text.
TEXT_ARGUMENTS: dict[str, tuple[int, ...]] = {
    "re.match": (1,),
    "re.search": (1,),
    "re.findall": (1,),
    "re.find_all": (1,),
    "re.split": (1,),
    "re.sub": (2,),
    "re.replace": (2,),
    "json.decode": (0,),
    "hash.sha256": (0,),
    "hash.md5": (0,),
    "base64.encode": (0,),
    "string.lower": (0,),
    "string.upper": (0,),
    "string.trim": (0,),
    "string.split": (0,),
    "string.truncate": (0,),
}
FUNCTION_RESULTS: dict[str, Shape] = {
    "str": text(),
    "repr": text(),
    "len": of(INT),
    "int": of(INT),
    "float": of(FLOAT),
    "bool": of(BOOL),
    "type": text(),
    "hash": of(INT),
    "list": of(LIST),
    "sorted": of(LIST),
    "range": of(LIST, item=of(INT)),
    "enumerate": of(LIST),
    "zip": of(LIST),
    "any": of(BOOL),
    "all": of(BOOL),
    "hasattr": of(BOOL),
}
STR_METHODS = frozenset(
    (
        "lower",
        "upper",
        "strip",
        "lstrip",
        "rstrip",
        "startswith",
        "endswith",
        "split",
        "rsplit",
        "splitlines",
        "replace",
        "find",
        "rfind",
        "index",
        "rindex",
        "count",
        "format",
        "join",
        "partition",
        "rpartition",
        "isdigit",
        "isalpha",
        "isalnum",
        "isspace",
        "islower",
        "isupper",
        "title",
        "capitalize",
        "removeprefix",
        "removesuffix",
        "elems",
        "codepoints",
    )
)
STR_RESULTS = {
    "split": of(LIST, item=text()),
    "rsplit": of(LIST, item=text()),
    "splitlines": of(LIST, item=text()),
    "partition": of(LIST, item=text()),
    "rpartition": of(LIST, item=text()),
    "find": of(INT),
    "rfind": of(INT),
    "index": of(INT),
    "rindex": of(INT),
    "count": of(INT),
}
DICT_METHODS = frozenset(("get", "keys", "values", "items", "pop", "setdefault", "update"))
LIST_METHODS = frozenset(("append", "extend", "insert", "remove", "pop", "clear", "index"))
# Every method Starlark's built-in values have (starlark-rust, ``dir(x)``): a call of any
# other fails at run time, whatever the value (``.casefold()``, ``.contains()``).
STARLARK_METHODS = {
    STR: STR_METHODS | frozenset(("istitle",)),
    DICT: DICT_METHODS | frozenset(("clear", "popitem")),
    LIST: LIST_METHODS,
    INT: frozenset(),
    FLOAT: frozenset(),
    BOOL: frozenset(),
    NULL: frozenset(),
}
EVERY_METHOD = frozenset().union(*STARLARK_METHODS.values())
