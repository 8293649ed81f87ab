"""The ``expect:`` keys: compare what came back with what a case expects.

Every mismatch is a :class:`Failure` naming the case's file and line, what was
expected, what came back and, for values, a unified diff.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.results import ToolResult
from harness.testing.spec import Case, Step

_ABSENT = object()


class CaseError(Exception):
    """A case that cannot run (its configuration is invalid)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    path: str
    line: int
    message: str
    expected: Any = None
    got: Any = None
    diff: str = ""

    def detail(self) -> str:
        """A diff for values, else expected and got on two lines."""
        if self.diff:
            return self.diff
        if self.expected is None and self.got is None:
            return ""
        return f"  expected: {_show(self.expected)}\n  got:      {_show(self.got)}"

    def render(self) -> str:
        detail = self.detail()
        return f"{self.path}:{self.line}: {self.message}" + (f"\n{detail}" if detail else "")


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 2000 else text[:2000] + "…"


def subset(expected: Any, got: Any) -> bool:
    """``expected`` matches ``got``: every key of an expected mapping is in ``got``
    and matches; lists match item by item (same length); scalars are equal (a boolean
    is never equal to a number)."""
    if isinstance(expected, Mapping):
        return isinstance(got, Mapping) and all(
            k in got and subset(v, got[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(got, list)
            and len(got) == len(expected)
            and all(subset(e, g) for e, g in zip(expected, got, strict=True))
        )
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(expected) is type(got) and expected == got
    return bool(expected == got)


def _project(expected: Any, got: Any) -> Any:
    """``got`` cut down to the shape of ``expected`` (so the diff shows what matters)."""
    if isinstance(expected, Mapping) and isinstance(got, Mapping):
        return {
            k: _project(expected[k], got[k]) if k in expected else got[k]
            for k in got
            if k in expected
        } | ({k: "<missing>" for k in expected if k not in got})
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        return [_project(e, g) for e, g in zip(expected, got, strict=True)]
    return got


def diff(expected: Any, got: Any) -> str:
    def dump(v: Any) -> list[str]:
        return json.dumps(v, indent=2, sort_keys=True, ensure_ascii=False, default=str).splitlines()

    lines = difflib.unified_diff(
        dump(expected), dump(_project(expected, got)), "expected", "got", lineterm="", n=3
    )
    return "\n".join("  " + line for line in lines)


def _texts(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def call(step: Step, result: ToolResult, workspace: Path, path: str) -> list[Failure]:  # noqa: C901
    """Failures of one call against its ``expect``. With none of ``ok``,
    ``error_contains`` or ``blocked_by`` given, the call must succeed."""
    want = dict(step.expect)
    out: list[Failure] = []
    label = f'call "{step.call}"' + (f" ({step.name})" if step.name else "")

    def fail(message: str, expected: Any = None, got: Any = None, d: str = "") -> None:
        out.append(
            Failure(
                path=path,
                line=step.line,
                message=f"{label}: {message}",
                expected=expected,
                got=got,
                diff=d,
            )
        )

    shown = result.error if result.is_error else result.text
    if not any(k in want for k in ("ok", "error_contains", "blocked_by")):
        want["ok"] = True
    if "ok" in want and want["ok"] == result.is_error:
        fail(
            "expected "
            + ("success" if want["ok"] else "an error result")
            + (
                f", got an error: {result.error}"
                if result.is_error
                else f", got success: {_show(result.text)}"
            )
        )
    if "value" in want and not subset(want["value"], result.value):
        fail(
            "value does not match (subset match)",
            want["value"],
            result.value,
            diff(want["value"], result.value),
        )
    for text in _texts(want.get("text_contains", [])):
        if text not in result.text:
            fail(f"text does not contain {json.dumps(text)}", text, result.text)
    if "error_contains" in want:
        if not result.is_error:
            fail("expected an error result, got success", want["error_contains"], shown)
        else:
            for text in _texts(want["error_contains"]):
                if text not in (result.error or ""):
                    fail(f"error does not contain {json.dumps(text)}", text, result.error)
    if "blocked_by" in want and result.blocked_by != want["blocked_by"]:
        got = (f'blocked by "{result.blocked_by}"' if result.blocked_by else "not blocked") + (
            f" ({shown})" if shown else ""
        )
        fail(f'expected to be blocked by hook "{want["blocked_by"]}"', want["blocked_by"], got)
    if "truncated" in want and result.truncated != want["truncated"]:
        fail(
            f"expected truncated: {str(want['truncated']).lower()}",
            want["truncated"],
            result.truncated,
        )
    for rel, expected in (want.get("files") or {}).items():
        target = (workspace / rel).resolve()
        base = workspace.resolve()
        try:
            if target != base and base not in target.parents:
                raise OSError("it leads outside the workspace copy")
            content: Any = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            content = _ABSENT
        except OSError as exc:
            content = f"<unreadable: {exc}>"
        if isinstance(expected, Mapping) and expected.get("absent"):
            if content is not _ABSENT:
                fail(f'file "{rel}" should be absent but exists', "absent", content)
        elif content is _ABSENT:
            fail(f'file "{rel}" does not exist', expected, "absent")
        elif isinstance(expected, Mapping):
            if expected["contains"] not in content:
                fail(
                    f'file "{rel}" does not contain {json.dumps(expected["contains"])}',
                    expected["contains"],
                    content,
                )
        elif content != expected:
            fail(
                f'file "{rel}" has other content', expected, content, _text_diff(expected, content)
            )
    return out


def _text_diff(expected: str, got: str) -> str:
    lines = difflib.unified_diff(
        expected.splitlines(), got.splitlines(), "expected", "got", lineterm=""
    )
    return "\n".join("  " + line for line in lines)


def hook(case: Case, decision: str, reason: str, payload: dict[str, Any]) -> list[Failure]:
    want = case.expect
    out: list[Failure] = []

    def fail(message: str, expected: Any = None, got: Any = None, d: str = "") -> None:
        out.append(
            Failure(
                path=case.path,
                line=case.line,
                message=f'hook "{case.hook}": {message}',
                expected=expected,
                got=got,
                diff=d,
            )
        )

    expected = want.get("decision")
    if expected is not None and expected != decision:
        fail(
            f"expected decision {expected}, got {decision}" + (f": {reason}" if reason else ""),
            expected,
            decision,
        )
    if "reason_contains" in want and want["reason_contains"] not in reason:
        fail(
            f"reason does not contain {json.dumps(want['reason_contains'])}",
            want["reason_contains"],
            reason,
        )
    if "payload" in want and not subset(want["payload"], payload):
        fail(
            "payload after the hook does not match (subset match)",
            want["payload"],
            payload,
            diff(want["payload"], payload),
        )
    return out
