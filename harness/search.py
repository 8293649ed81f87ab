"""BM25 over the name, description and parameter text of tools: the index behind the
session tool ``tool_search`` (docs/spec.md §11; the tool itself is in ``session_tools``).

Pure Python, no dependency: the indexes are small (tens to hundreds of tools), so a
plain inverted index with Okapi BM25 scoring is plenty.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.artifacts.model import Parameter, ToolSpec

TOOL_SEARCH = "tool_search"  # the session tool this index serves
DEFAULT_LIMIT = 5
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
                hits.append(
                    Hit(
                        name=name,
                        score=round(score, 4),
                        description=summary(self._tools[name].description),
                    )
                )
        hits.sort(key=lambda h: (-h.score, h.name))
        return hits[:limit]
