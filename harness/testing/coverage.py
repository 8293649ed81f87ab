"""Coverage of governance: tools no case called, hooks no case ran, and hook decisions
(``block``, ``modify``) that a hook can produce but no case produced."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from harness.artifacts.model import Project
from harness.testing.runner import CaseResult

_BLOCK = re.compile(r"\bblock\s*\(|[\"']action[\"']\s*:\s*[\"']block[\"']")
_MODIFY = re.compile(r"\bmodify\s*\(|[\"']action[\"']\s*:\s*[\"']modify[\"']")


@dataclass(frozen=True, slots=True, kw_only=True)
class Coverage:
    untested_tools: tuple[str, ...] = ()
    untested_hooks: tuple[str, ...] = ()
    # (hook, decision) pairs the hook's script can return but no case produced.
    unproduced: tuple[tuple[str, str], ...] = ()

    @property
    def complete(self) -> bool:
        return not (self.untested_tools or self.untested_hooks or self.unproduced)

    def lines(self) -> list[str]:
        out = []
        for name in self.untested_tools:
            out.append(f'tool "{name}" has no case')
        for name in self.untested_hooks:
            out.append(f'hook "{name}" has no case')
        for name, decision in self.unproduced:
            out.append(
                f'hook "{name}" never produced "{decision}" in any case '
                f"(an untested {'guard' if decision == 'block' else 'rewrite'})"
            )
        return out


def possible(script: str) -> tuple[str, ...]:
    """The decisions besides allow that a hook script can return (read from its text)."""
    return tuple(d for d, rx in (("block", _BLOCK), ("modify", _MODIFY)) if rx.search(script))


def measure(project: Project, results: Iterable[CaseResult]) -> Coverage:
    called: set[str] = set()
    ran: set[str] = set()
    produced: set[tuple[str, str]] = set()
    for r in results:
        called.update(r.tools)
        for hook, decision in r.decisions:
            ran.add(hook)
            produced.add((hook, decision))
        if r.case.kind == "hook":
            ran.add(r.case.hook)
    tools = tuple(n for n, t in sorted(project.tools.items()) if t.enabled and n not in called)
    hooks = tuple(sorted(h.name for h in project.hooks if h.name not in ran))
    missing = tuple(
        (h.name, d)
        for h in sorted(project.hooks, key=lambda h: h.name)
        for d in possible(h.script)
        if (h.name, d) not in produced
    )
    return Coverage(untested_tools=tools, untested_hooks=hooks, unproduced=missing)
