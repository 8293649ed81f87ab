"""``tool_search``: BM25 over the name, description and parameter text of tools (SPEC §11).

Deferred tools (``loading: deferred``) are left out of ``tools/list``; the built-in
``tool_search(query)`` tool finds them, and a found tool stays listed for the rest of
the session. Pure Python, no dependency: the indexes are small (tens to hundreds of
tools), so a plain inverted index with Okapi BM25 scoring is plenty.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.artifacts.model import Parameter, Source, ToolSpec

NAME = "tool_search"
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
# A name token counts this many times: the name says most about what a tool does.
NAME_WEIGHT = 3
SUMMARY_CHARS = 300

_WORD = re.compile(r"[A-Za-z]+|[0-9]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_STOP = frozenset(
    "a an and are as at be by for from in into is it its of on or that the this to use "
    "used when with which you your can do does not".split()
)  # fmt: skip


def _stem(token: str) -> str:
    """A very light plural stemmer, enough for tool text: files->file, queries->query."""
    if len(token) <= 3:
        return token
    if token.endswith("ies"):
        return token[:-3] + "y"
    if token.endswith(("ches", "shes", "sses", "xes", "zes")):
        return token[:-2]
    if token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def tokenize(text: str) -> list[str]:
    """Lowercased, lightly stemmed word tokens; ``read_file``/``readFile`` -> read, file."""
    words: list[str] = []
    for part in _WORD.findall(_CAMEL.sub(" ", text)):
        word = part.lower()
        if word in _STOP or (len(word) < 2 and not word.isdigit()):
            continue
        words.append(_stem(word))
    return words


def _param_text(param: Parameter) -> str:
    schema: Mapping[str, Any] = param.schema or {}
    enum = schema.get("enum")
    extra = " ".join(str(v) for v in enum) if isinstance(enum, list) else ""
    return f"{param.name} {param.description or schema.get('description', '')} {extra}"


def document(tool: ToolSpec) -> list[str]:
    """The token bag of one tool: name (weighted), description, parameters."""
    tokens = tokenize(tool.name.replace(".", " ").replace("_", " ").replace("-", " "))
    tokens = tokens * NAME_WEIGHT
    tokens += tokenize(tool.description)
    for param in tool.parameters:
        tokens += tokenize(_param_text(param))
    if not tool.parameters and tool.input_schema:
        for pname, schema in (tool.input_schema.get("properties") or {}).items():
            desc = schema.get("description", "") if isinstance(schema, Mapping) else ""
            tokens += tokenize(f"{pname} {desc}")
    return tokens


def summary(description: str) -> str:
    """The first paragraph of a description, shortened for a search hit."""
    first = description.strip().split("\n\n", 1)[0].replace("\n", " ").strip()
    return first if len(first) <= SUMMARY_CHARS else first[: SUMMARY_CHARS - 1] + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    name: str
    score: float
    description: str


class ToolIndex:
    """Okapi BM25 (k1=1.2, b=0.75) over a fixed set of tools."""

    def __init__(self, tools: Iterable[ToolSpec], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._tools = {t.name: t for t in tools}
        self._tf: dict[str, Counter[str]] = {}
        self._len: dict[str, int] = {}
        df: Counter[str] = Counter()
        for name, tool in self._tools.items():
            bag = Counter(document(tool))
            self._tf[name] = bag
            self._len[name] = sum(bag.values())
            df.update(bag.keys())
        n = len(self._tools)
        self._avg = (sum(self._len.values()) / n) if n else 0.0
        # BM25+-style idf floor: a term in every document still counts a little.
        self._idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def __len__(self) -> int:
        return len(self._tools)

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[Hit]:
        terms = tokenize(query)
        hits: list[Hit] = []
        if not terms or not self._tools:
            return hits
        lowered = query.strip().lower()
        for name, bag in self._tf.items():
            score = 0.0
            norm = self.k1 * (1 - self.b + self.b * self._len[name] / (self._avg or 1.0))
            for term in terms:
                tf = bag.get(term, 0)
                if tf:
                    score += self._idf[term] * tf * (self.k1 + 1) / (tf + norm)
            if lowered == name.lower():
                score += 10.0  # the exact name always wins
            if score > 0:
                hits.append(Hit(name=name, score=round(score, 4),
                                description=summary(self._tools[name].description)))
        hits.sort(key=lambda h: (-h.score, h.name))
        return hits[:limit]


DESCRIPTION = """\
Find more tools. Only some tools are listed up front; others are available but hidden \
until you search for them.

Describe the capability you need in a few words (for example "send email", "query \
database", "resize image"). Returns the best-matching tools with their names and \
descriptions; from then on they are listed with your other tools and you can call them \
directly. Returns an empty list when nothing matches: try other words."""


def tool_spec() -> ToolSpec:
    """The ToolSpec of the built-in ``tool_search`` tool."""
    query_text = "What you want to do, in a few words."
    limit_text = f"Maximum number of tools to return (default {DEFAULT_LIMIT})."
    query_schema: dict[str, Any] = {"type": "string", "minLength": 1, "description": query_text}
    limit_schema: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                                    "description": limit_text}
    return ToolSpec(
        name=NAME,
        description=DESCRIPTION,
        parameters=(
            Parameter(name="query", type="string", required=True, schema=query_schema,
                      description=query_text),
            Parameter(name="limit", type="integer", schema=limit_schema,
                      description=limit_text),
        ),
        input_schema={"type": "object", "properties": {"query": query_schema,
                                                       "limit": limit_schema},
                      "required": ["query"]},
        returns={
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "tools": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"},
                                       "description": {"type": "string"},
                                       "score": {"type": "number"}},
                        "required": ["name", "description", "score"],
                    },
                },
            },
            "required": ["query", "tools"],
        },
        annotations={"title": "Search tools", "read_only": True, "destructive": False,
                     "idempotent": True, "open_world": False},
        source=Source(path="<builtin>", layer="builtin"),
    )


def run_search(index: ToolIndex, args: Mapping[str, Any]) -> dict[str, Any]:
    """The ``tool_search`` handler body: the value returned to the model."""
    query = str(args.get("query", ""))
    limit = int(args.get("limit") or DEFAULT_LIMIT)
    hits = index.search(query, max(1, min(limit, MAX_LIMIT)))
    return {"query": query,
            "tools": [{"name": h.name, "description": h.description, "score": h.score}
                      for h in hits]}
