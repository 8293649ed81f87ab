"""``harness eval``: model-driven cases (``.harness/evals/*.md``) graded after the run.

An eval case sends its ``turns:`` (user messages) through the agent loop
(``Harness.run``) in one session over a fresh copy of the workspace, then applies its
``grade:`` checks to what happened: tools called, hooks that blocked, the final
response, errors, rounds and tokens. Not deterministic and it costs tokens: keep
``harness test`` for what can be checked without a model.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.testing.evalspec import EvalCase
from harness.testing.report import Outcome
from harness.testing.runner import Recording, Runner


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
            total += sum(
                v
                for k, v in u.items()
                if k in ("input_tokens", "output_tokens", "prompt_tokens", "completion_tokens")
                and isinstance(v, int)
            )
    return total


def run_eval(
    runner: Runner,
    case: EvalCase,
    budget: Budget,
    transcript: dict[str, Any] | None = None,
    **agent: Any,
) -> Outcome:
    """Run one eval case through the agent loop and grade it; ``transcript`` (if
    given) receives what happened (:func:`transcript_of`)."""
    if budget.exhausted:
        return Outcome(
            path=case.path,
            line=case.line,
            name=case.name,
            passed=False,
            skipped=f"token budget of {budget.limit} spent",
        )
    from harness.agent.base import ModelConfigError, ProviderError, RoundLimitError

    start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="harness-eval-"))
    failures: list[tuple[int, str, str]] = []
    texts: list[str] = []
    results: list[Any] = []
    calls: dict[str, Any] = {}  # call id -> the ToolCall (its arguments)
    rounds = 0
    history: Any = None  # each turn continues the conversation of the one before
    used, decisions = 0, []
    try:
        try:
            h = runner.harness_for(case.setup, tmp / "root")
        except Exception as exc:  # noqa: BLE001 - one broken case never stops the run
            return Outcome(
                path=case.path,
                line=case.line,
                name=case.name,
                passed=False,
                failures=((case.line, f"the case could not run: {exc}", ""),),
                duration_ms=(time.perf_counter() - start) * 1000,
            )
        with h:
            session = Recording(h)
            with session:
                try:
                    for turn in case.turns:
                        if budget.exhausted:
                            failures.append(
                                (
                                    case.line,
                                    f"token budget of {budget.limit} spent before the last turn",
                                    "",
                                )
                            )
                            break
                        before = len(session.usage)
                        try:
                            res = h.run(turn, session=session, history=history, **agent)
                            history = res.messages
                        finally:
                            budget.spent += tokens(session.usage[before:])
                        texts.append(res.text)
                        results.extend(res.results)
                        calls.update((c.id, c) for c in res.calls)
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
    out = Outcome(
        path=case.path,
        line=case.line,
        name=case.name,
        passed=not failures,
        failures=tuple(failures),
        duration_ms=(time.perf_counter() - start) * 1000,
    )
    if transcript is not None:
        transcript.update(transcript_of(case, out, history, results, calls, decisions, texts, used))
    return out


def transcript_of(
    case: EvalCase,
    out: Outcome,
    messages: Any,
    results: Sequence[Any],
    calls: Mapping[str, Any],
    decisions: Sequence[tuple[str, str]],
    texts: Sequence[str],
    used: int,
) -> dict[str, Any]:
    """What ``harness eval`` keeps of a case (redacted like audit records)."""
    from harness.redact import redact

    return redact(
        {
            "case": case.name,
            "path": case.path,
            "line": case.line,
            "passed": out.passed,
            "failures": [{"line": line, "message": msg} for line, msg, _ in out.failures],
            "turns": list(case.turns),
            "response": texts[-1] if texts else "",
            "tokens": used,
            "results": [
                {
                    "tool": r.name,
                    "arguments": dict(calls[r.call_id].arguments) if r.call_id in calls else None,
                    "is_error": r.is_error,
                    "text": r.text,
                    "error": r.error,
                }
                for r in results
            ],
            "decisions": [{"hook": h, "decision": d} for h, d in decisions],
            "messages": list(messages or ()),
        }
    )


def _grade(
    kind: str,
    value: Any,
    called: list[str],
    blocked: list[str],
    response: str,
    results: list[Any],
    rounds: int,
    used: int,
) -> str | None:
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
