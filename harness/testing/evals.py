"""``harness eval``: model-driven cases (``.harness/evals/*.md``) graded after the run.

An eval case sends its ``turns:`` (user messages) through the agent loop
(``Harness.run``) in one session over a fresh copy of the workspace, then applies its
``grade:`` checks to what happened: tools called, hooks that blocked, the final
response, errors, rounds and tokens. Not deterministic and it costs tokens: keep
``harness test`` for what can be checked without a model.
"""

from __future__ import annotations

import difflib
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.artifacts.frontmatter import split
from harness.artifacts.model import Problem, Project
from harness.artifacts.params import a_type
from harness.testing.report import Outcome
from harness.testing.runner import Recording, Runner
from harness.testing.spec import SETUP_KEYS, Setup, _Parser

EVALS_DIR = ".harness/evals"
GRADES = ("completed_within", "hook_blocked", "hook_not_blocked", "no_errors",
          "response_contains", "response_not_contains", "tokens_under", "tool_called",
          "tool_not_called")
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
    return [(f"{EVALS_DIR}/{p.name}", p) for p in sorted(folder.iterdir())
            if p.name.endswith(".md") and p.is_file()]


def parse_eval(text: str | bytes, path: str, project: Project | None = None
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
        p.add(("cases",) if "cases" in data else (), "eval-invalid",
              "an eval file needs `cases:`, a list of cases with turns: and grade:")
        return cases, p.problems
    tools = set(project.tools) | {"read_output", "tool_search"} if project else set()
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
            p.add((*where, "turns") if "turns" in item else where, "eval-invalid",
                  f'case "{name}": turns must be a non-empty list of user messages (strings)')
            continue
        grades: list[tuple[str, Any, int]] = []
        raw_grades = item.get("grade") or []
        if isinstance(raw_grades, Mapping):
            raw_grades = [{k: v} for k, v in raw_grades.items()]
        if not isinstance(raw_grades, list) or not raw_grades:
            p.add(where, "eval-invalid", f'case "{name}": grade must list checks such as '
                  "- tool_called: read_file")
            continue
        for j, g in enumerate(raw_grades):
            gw = (*where, "grade", j)
            if not isinstance(g, Mapping) or len(g) != 1:
                p.add(gw, "eval-invalid", f'case "{name}": each grade is one `type: value` '
                      f"pair; types: {', '.join(GRADES)}")
                continue
            ((kind, value),) = g.items()
            line = p.at(gw)
            if kind not in GRADES:
                close = difflib.get_close_matches(str(kind), GRADES, n=1)
                hint = f' (did you mean "{close[0]}"?)' if close else ""
                p.add(gw, "eval-unknown-grade", f'case "{name}": unknown grade "{kind}"{hint}; '
                      f"types: {', '.join(GRADES)}")
                continue
            if kind in _INT_GRADES and (isinstance(value, bool) or not isinstance(value, int)
                                        or value < 1):
                p.add(gw, "eval-invalid", f'case "{name}": {kind} needs a positive integer')
                continue
            if kind == "no_errors" and not isinstance(value, bool):
                p.add(gw, "eval-invalid", f'case "{name}": no_errors is true or false')
                continue
            if kind.startswith(("tool_", "hook_", "response_")) and not isinstance(value, str):
                p.add(gw, "eval-invalid", f'case "{name}": {kind} needs a string')
                continue
            known = tools if kind.startswith("tool_") else hooks if kind.startswith(
                "hook_") else None
            if project is not None and known is not None and value not in known:
                close = difflib.get_close_matches(value, sorted(known), n=1)
                hint = f' (did you mean "{close[0]}"?)' if close else ""
                what = "tool" if kind.startswith("tool_") else "hook"
                p.add(gw, f"eval-unknown-{what}", f'case "{name}": {kind} names unknown {what} '
                      f'"{value}"{hint}')
                continue
            grades.append((kind, value, line))
        cases.append(EvalCase(name=name, path=path, line=p.at(where), turns=tuple(turns),
                              grades=tuple(grades), setup=p.setup(where, item, base)))
    return cases, p.problems


@dataclass(slots=True)
class Budget:
    """Tokens the whole run may spend (``--max-tokens``); 0 = no limit."""

    limit: int = 0
    spent: int = 0

    @property
    def exhausted(self) -> bool:
        return self.limit > 0 and self.spent >= self.limit


def tokens(usage: Sequence[Mapping[str, Any]]) -> int:
    total = 0
    for u in usage:
        if isinstance(u.get("total_tokens"), int):
            total += u["total_tokens"]
        else:
            total += sum(v for k, v in u.items() if k in ("input_tokens", "output_tokens",
                                                          "prompt_tokens", "completion_tokens")
                         and isinstance(v, int))
    return total


def run_eval(runner: Runner, case: EvalCase, budget: Budget, **agent: Any) -> Outcome:
    """Run one eval case through the agent loop and grade it."""
    if budget.exhausted:
        return Outcome(path=case.path, line=case.line, name=case.name, passed=False,
                       skipped=f"token budget of {budget.limit} spent")
    from harness.agent.base import ModelConfigError, ProviderError, RoundLimitError

    start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="harness-eval-"))
    failures: list[tuple[int, str, str]] = []
    texts: list[str] = []
    results: list[Any] = []
    rounds = 0
    history: Any = None  # each turn continues the conversation of the one before
    try:
        h = runner.harness_for(case.setup, tmp / "root")
        with h:
            session = Recording(h)
            with session:
                try:
                    for turn in case.turns:
                        if budget.exhausted:
                            failures.append((case.line, f"token budget of {budget.limit} "
                                             "spent before the last turn", ""))
                            break
                        before = len(session.usage)
                        try:
                            res = h.run(turn, session=session, history=history, **agent)
                            history = res.messages
                        finally:
                            budget.spent += tokens(session.usage[before:])
                        texts.append(res.text)
                        results.extend(res.results)
                        rounds += res.rounds
                except (ProviderError, RoundLimitError, ModelConfigError) as exc:
                    failures.append((case.line, f"the agent run failed: {exc}", ""))
                used = tokens(session.usage)
                decisions = list(session.decisions)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not failures:
        called = [r.name for r in results]
        blocked = [hook for hook, decision in decisions if decision == "block"]
        response = texts[-1] if texts else ""
        for kind, value, line in case.grades:
            problem = _grade(kind, value, called, blocked, response, results, rounds, used)
            if problem:
                failures.append((line, f"{kind}: {problem}", ""))
    return Outcome(path=case.path, line=case.line, name=case.name, passed=not failures,
                   failures=tuple(failures), duration_ms=(time.perf_counter() - start) * 1000)


def _grade(kind: str, value: Any, called: list[str], blocked: list[str], response: str,
           results: list[Any], rounds: int, used: int) -> str | None:
    if kind == "tool_called" and value not in called:
        return f'"{value}" was not called (called: {", ".join(called) or "nothing"})'
    if kind == "tool_not_called" and value in called:
        return f'"{value}" was called {called.count(value)} time(s)'
    if kind == "hook_blocked" and value not in blocked:
        return f'hook "{value}" blocked nothing'
    if kind == "hook_not_blocked" and value in blocked:
        return f'hook "{value}" blocked a call'
    if kind == "response_contains" and value.lower() not in response.lower():
        return f'the final response does not contain "{value}": {response[:300]!r}'
    if kind == "response_not_contains" and value.lower() in response.lower():
        return f'the final response contains "{value}"'
    if kind == "no_errors" and value:
        errors = [f"{r.name}: {r.error}" for r in results if r.is_error]
        if errors:
            return f"{len(errors)} call(s) failed: " + "; ".join(errors)[:500]
    if kind == "completed_within" and rounds > value:
        return f"took {rounds} tool rounds, more than {value}"
    if kind == "tokens_under" and used >= value:
        return f"used {used} tokens, not under {value}"
    return None
