"""The built-in seam of ``harness test``'s test doubles (``fakes:``, ``real:``, ``--record``).

When a case runs (``Config.doubles`` is set by the test runner, never by harness.md),
``exec.run`` and ``http.*`` check their arguments and the policy as always, then ask
the session (``ctx.host``) before doing anything: a declared fake answers, an
unexpected command or request fails the call, or the case said ``real:`` and the call
runs for real (and, with ``--record``, what it returned is kept). The question goes
through ``ctx.host``, which the worker pool proxies, so process workers get the same
fakes as in-process runs; the test file's scripts cannot reach or patch any of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from harness.errors import BuiltinError
from harness.runtime.context import CallContext


def _ask(ctx: CallContext, fn: str, method: str, payload: Mapping[str, Any]) -> Any:
    if ctx.host is None:  # a context outside any session: nothing may pass silently
        raise BuiltinError(f"{fn}: test doubles are on but this call has no session")
    return ctx.host(method, payload)


def exec_run(
    ctx: CallContext,
    cmd: str,
    argv: list[str],
    timeout_ms: float,
    real: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """A fake's result, or ``real()``'s (recorded when asked)."""
    request = {"kind": "exec", "program": cmd, "args": list(argv)}
    answer = _ask(ctx, "exec.run", "test.exec", request)
    if "result" in answer:
        result = dict(answer["result"])
        limit = ctx.config.limits.max_output_bytes
        over = False
        for key in ("stdout", "stderr"):
            if len(result[key].encode()) > limit:
                result[key] = result[key].encode()[:limit].decode("utf-8", "ignore")
                over = True
        result["truncated"] = over
        if result["duration_ms"] > timeout_ms:  # as the real run would end: killed
            result.update(
                ok=False, exit_code=-9, timed_out=True, duration_ms=round(timeout_ms), stdout=""
            )
        return result
    out = real()
    if answer.get("record"):
        ctx.host("test.record", {**request, "result": out})  # type: ignore[misc]
    return out


def http(
    ctx: CallContext,
    fn: str,
    method: str,
    url: str,
    real: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """A fake's response, or ``real()``'s (recorded when asked)."""
    request = {"kind": "http", "method": method, "url": url}
    answer = _ask(ctx, fn, "test.http", request)
    if "result" in answer:
        result = dict(answer["result"])
        limit = ctx.config.limits.max_output_bytes
        if len(result["body"].encode()) > limit:
            result["body"] = result["body"].encode()[:limit].decode("utf-8", "ignore")
        return result
    out = real()
    if answer.get("record"):
        ctx.host("test.record", {**request, "result": out})  # type: ignore[misc]
    return out
