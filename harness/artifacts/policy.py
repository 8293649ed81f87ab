"""``tools_policy`` checked against the tools that exist (issue 23): a deny or allow entry
that matches no tool from any source (local files, bundles, harness.md, the built-in
tools, a declared upstream server's ``name.`` / ``name_`` prefix) does nothing, so it is
an error naming its position in harness.md with a did-you-mean. When ``meta.enabled``
lets tools be registered at run time, it is a warning: the name may come later.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from harness.artifacts.frontmatter import KeyLines
from harness.artifacts.model import Problem
from harness.artifacts.problems import closest, suggest
from harness.config import Config

BUILTIN_TOOLS = ("read_output", "tool_search")
_GLOB = re.compile(r"[*?\[]")


def policy_problems(
    config: Config,
    tools: Iterable[str],
    server_names: Iterable[str],
    lines: KeyLines,
    path: str,
) -> list[Problem]:
    names = sorted({*tools, *BUILTIN_TOOLS})
    prefixes = tuple(p for s in server_names for p in (f"{s}.", f"{s}_"))
    open_names = bool(config.meta.enabled)
    problems: list[Problem] = []
    policy = config.tools_policy
    for which, patterns in (("deny", policy.deny), ("allow", policy.allow)):
        for i, pattern in enumerate(patterns):
            if not isinstance(pattern, str) or _matches(pattern, names, prefixes):
                continue
            line, column = lines.value(("tools_policy", which, i), lines.key(("tools_policy",)))
            stem = _GLOB.split(pattern, maxsplit=1)[0] if _GLOB.search(pattern) else pattern
            hint = suggest(pattern, names) if stem == pattern else _glob_hint(pattern, stem, names)
            later = (
                "; meta.enabled may register it at run time"
                if open_names
                else "; fix the name, or remove the entry"
            )
            effect = "denies nothing" if which == "deny" else "allows nothing"
            problems.append(
                Problem(
                    path=path,
                    line=line,
                    column=column,
                    code="policy-unknown-tool",
                    message=f'tools_policy.{which}: "{pattern}" matches no tool, so it '
                    f"{effect}{hint}{later} (tools: local, bundles, harness.md, built-in, "
                    f"and NAME.* / NAME_* of a declared MCP server)",
                    severity="warning" if open_names else "error",
                )
            )
    return problems


def _matches(pattern: str, names: list[str], prefixes: tuple[str, ...]) -> bool:
    if pattern == "*":
        return True
    if not _GLOB.search(pattern):
        return pattern in names or pattern.startswith(prefixes)
    if any(fnmatch.fnmatchcase(n, pattern) for n in names):
        return True
    # A glob over a server's tools ("github_*", "git*"): its tools are known only when
    # the server runs, so any glob that could match one of its names counts.
    stem = _GLOB.split(pattern, maxsplit=1)[0]
    return any(p.startswith(stem) or stem.startswith(p) for p in prefixes)


def _glob_hint(pattern: str, stem: str, names: list[str]) -> str:
    """`` (did you mean "write*"?)`` for ``wrte*``: the stem against the tools' starts."""
    if not stem:
        return ""
    match, starts = None, {}
    for k in (len(stem), len(stem) + 1, len(stem) - 1):  # the same length first
        starts = {n[:k]: n for n in names if k and len(n) >= k}
        match = closest(stem, starts)
        if match is not None:
            break
    if match is None:
        return ""
    return f' (did you mean "{match}{pattern[len(stem) :]}", matching "{starts[match]}"?)'
