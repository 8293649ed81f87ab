"""Eval files (``.harness/evals/NAME.md``): parsing into frozen cases, and their checks.

Pure, like :mod:`harness.testing.spec`: ``harness validate`` and ``harness eval
--dry-run`` use it without a model or the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.artifacts.frontmatter import split
from harness.artifacts.model import Problem, Project
from harness.artifacts.problems import a_type, suggest
from harness.config import parse_config
from harness.testing.paths import static_problems
from harness.testing.spec import SETUP_KEYS, Setup, _Parser

EVALS_DIR = ".harness/evals"
GRADES = (
    "completed_within",
    "hook_blocked",
    "hook_not_blocked",
    "no_errors",
    "response_contains",
    "response_not_contains",
    "tokens_under",
    "tool_called",
    "tool_not_called",
)
_INT_GRADES = ("completed_within", "tokens_under")
_CASE_KEYS = tuple(sorted({"name", "turns", "grade", *SETUP_KEYS}))


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalCase:
    name: str
    path: str
    line: int
    turns: tuple[str, ...]
    grades: tuple[tuple[str, Any, int], ...]  # (type, value, line)
    setup: Setup = field(default_factory=Setup)


def eval_files(root: Path) -> list[tuple[str, Path]]:
    folder = root / EVALS_DIR
    if not folder.is_dir():
        return []
    return [
        (f"{EVALS_DIR}/{p.name}", p)
        for p in sorted(folder.iterdir())
        if p.name.endswith(".md") and p.is_file()
    ]


def parse_eval(  # noqa: C901
    text: str | bytes, path: str, project: Project | None = None
) -> tuple[list[EvalCase], list[Problem]]:
    data, _body, lines, problems = split(text, path, "eval")
    p = _Parser(path, lines, list(problems))
    cases: list[EvalCase] = []
    if not data:
        return cases, p.problems
    p.unknown((), data, ("cases", *SETUP_KEYS), "an eval file")
    base = p.setup((), data, Setup())
    raw = data.get("cases")
    if not isinstance(raw, list) or not raw:
        p.add(
            ("cases",) if "cases" in data else (),
            "eval-invalid",
            "an eval file needs `cases:`, a list of cases with turns: and grade:",
        )
        return cases, p.problems
    tools = set(project.tools) | {"read_output"} if project else set()
    hooks = {h.name for h in project.hooks} if project else set()
    for i, item in enumerate(raw):
        where: tuple[Any, ...] = ("cases", i)
        if not isinstance(item, Mapping):
            p.add(where, "eval-invalid", f"case {i + 1} must be a mapping, got {a_type(item)}")
            continue
        p.unknown(where, item, _CASE_KEYS, f"eval case {i + 1}")
        name = str(item.get("name") or f"eval {i + 1}")
        turns = item.get("turns")
        if isinstance(turns, str):
            turns = [turns]
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
            p.add(
                (*where, "turns") if "turns" in item else where,
                "eval-invalid",
                f'case "{name}": turns must be a non-empty list of user messages (strings)',
            )
            continue
        grades: list[tuple[str, Any, int]] = []
        raw_grades = item.get("grade") or []
        if isinstance(raw_grades, Mapping):
            raw_grades = [{k: v} for k, v in raw_grades.items()]
        if not isinstance(raw_grades, list) or not raw_grades:
            p.add(
                where,
                "eval-invalid",
                f'case "{name}": grade must list checks such as - tool_called: read_file',
            )
            continue
        for j, g in enumerate(raw_grades):
            gw = (*where, "grade", j)
            if not isinstance(g, Mapping) or len(g) != 1:
                p.add(
                    gw,
                    "eval-invalid",
                    f'case "{name}": each grade is one `type: value` '
                    f"pair; types: {', '.join(GRADES)}",
                )
                continue
            ((kind, value),) = g.items()
            line = p.at(gw)
            if kind not in GRADES:
                hint = suggest(kind, GRADES)
                p.add(
                    gw,
                    "eval-unknown-grade",
                    f'case "{name}": unknown grade "{kind}"{hint}; types: {", ".join(GRADES)}',
                )
                continue
            if kind in _INT_GRADES and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                p.add(gw, "eval-invalid", f'case "{name}": {kind} needs a positive integer')
                continue
            if kind == "no_errors" and not isinstance(value, bool):
                p.add(gw, "eval-invalid", f'case "{name}": no_errors is true or false')
                continue
            if kind.startswith(("tool_", "hook_", "response_")) and not isinstance(value, str):
                p.add(gw, "eval-invalid", f'case "{name}": {kind} needs a string')
                continue
            known = (
                tools if kind.startswith("tool_") else hooks if kind.startswith("hook_") else None
            )
            if project is not None and known is not None and value not in known:
                hint = suggest(value, sorted(known))
                what = "tool" if kind.startswith("tool_") else "hook"
                p.add(
                    gw,
                    f"eval-unknown-{what}",
                    f'case "{name}": {kind} names unknown {what} "{value}"{hint}',
                )
                continue
            grades.append((kind, value, line))
        setup = p.setup(where, item, base)
        for message in static_problems(setup.config):
            p.add(
                (*where, "config") if "config" in item else ("config",),
                "test-config-path",
                f'case "{name}": {message}',
            )
        if project is not None and setup.config:
            for problem in parse_config(setup.config, project.root)[1]:
                if problem.severity == "error":
                    p.add(
                        (*where, "config") if "config" in item else ("config",),
                        problem.code,
                        f'case "{name}": {problem.message}',
                    )
        cases.append(
            EvalCase(
                name=name,
                path=path,
                line=p.at(where),
                turns=tuple(turns),
                grades=tuple(grades),
                setup=setup,
            )
        )
    return cases, p.problems
