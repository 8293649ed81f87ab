"""The session and runtime wrapper a test case runs with.

:class:`Recording` remembers the hook decisions a case produced and answers the
built-ins' ``test.*`` questions (a case's fakes, :mod:`harness.testing.fakes`);
:class:`Shared` lets many cases use one script runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import harness
from harness.runtime.context import CallContext, Outcome, ScriptRuntime
from harness.session import Session
from harness.testing.fakes import CaseDoubles


class Shared:
    """A runtime shared by many cases: closing one case's Harness leaves it running."""

    def __init__(self, runtime: ScriptRuntime) -> None:
        self.inner = runtime

    def run_tool(
        self,
        script: str,
        filename: str,
        line: int,
        args: Mapping[str, Any],
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        return self.inner.run_tool(script, filename, line, args, ctx, timeout_ms)

    def run_hook(
        self,
        script: str,
        filename: str,
        line: int,
        event: object,
        payload: object,
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        return self.inner.run_hook(script, filename, line, event, payload, ctx, timeout_ms)

    def eval_when(
        self,
        expr: str,
        filename: str,
        line: int,
        event: str,
        payload: Mapping[str, Any],
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        return self.inner.eval_when(expr, filename, line, event, payload, ctx, timeout_ms)

    def close(self) -> None:
        pass


class Recording(Session):
    """A session that remembers every hook decision the pipeline reports, and answers
    its built-ins' questions about the case's test doubles (``doubles``)."""

    def __init__(self, h: harness.Harness, doubles: CaseDoubles | None = None) -> None:
        self.decisions: list[tuple[str, str]] = []
        self.usage: list[dict[str, Any]] = []  # model.response usage (harness eval)
        self.doubles = doubles
        super().__init__(h)
        self.auditing = True

    def host(self, method: str, payload: Mapping[str, Any]) -> Any:
        if method.startswith("test.") and self.doubles is not None:
            return self.doubles.host(method, payload)
        return super().host(method, payload)

    def emit(self, event: str, /, **fields: Any) -> None:
        if event == "hook.decision":
            self.decisions.append((str(fields.get("hook")), str(fields.get("decision"))))
        elif event == "model.response" and isinstance(fields.get("usage"), dict):
            self.usage.append(fields["usage"])
        super().emit(event, **fields)
