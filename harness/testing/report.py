"""Output of ``harness test`` and ``harness eval``: text, json, github, junit.

Works on :class:`Outcome` rows so that tests and evals share the formats.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

FORMATS = ("text", "json", "github", "junit")


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """One case as reported: where it is, whether it passed, why not."""

    path: str
    line: int
    name: str
    passed: bool
    duration_ms: float = 0.0
    # (line, message, detail) of every failure; detail holds expected/got or a diff.
    failures: tuple[tuple[int, str, str], ...] = ()
    skipped: str = ""  # reason when the case did not run (eval dry run, budget spent)


def summary(rows: Sequence[Outcome], seconds: float, noun: str = "case") -> str:
    failed = sum(not r.passed and not r.skipped for r in rows)
    skipped = sum(bool(r.skipped) for r in rows)
    passed = len(rows) - failed - skipped
    parts = [f"{passed} passed", f"{failed} failed"]
    if skipped:
        parts.append(f"{skipped} skipped")
    plural = noun if len(rows) == 1 else noun + "s"
    return f"{len(rows)} {plural}: {', '.join(parts)} in {seconds:.2f}s"


def text(
    rows: Sequence[Outcome], seconds: float, extra: Iterable[str] = (), noun: str = "case"
) -> str:
    out = []
    for r in rows:
        mark = "SKIP" if r.skipped else ("PASS" if r.passed else "FAIL")
        out.append(f"{mark} {r.path}:{r.line} {r.name}" + (f" ({r.skipped})" if r.skipped else ""))
    failing = [r for r in rows if not r.passed and not r.skipped]
    if failing:
        out.append("")
        out.append("Failures:")
        for r in failing:
            out.append(f"--- {r.path}:{r.line} {r.name}")
            for line, message, detail in r.failures:
                out.append(f"{r.path}:{line}: {message}")
                if detail:
                    out.append(detail)
    extra = list(extra)
    if extra:
        out.append("")
        out.extend(extra)
    out.append(summary(rows, seconds, noun))
    return "\n".join(out)


def as_json(rows: Sequence[Outcome], seconds: float, extra: dict[str, object] | None = None) -> str:
    failed = sum(not r.passed and not r.skipped for r in rows)
    doc: dict[str, object] = {
        "ok": failed == 0,
        "passed": sum(r.passed for r in rows),
        "failed": failed,
        "skipped": sum(bool(r.skipped) for r in rows),
        "seconds": round(seconds, 3),
        "cases": [
            {
                "path": r.path,
                "line": r.line,
                "name": r.name,
                "passed": r.passed,
                "skipped": r.skipped or None,
                "duration_ms": round(r.duration_ms, 1),
                "failures": [{"line": ln, "message": m, "detail": d} for ln, m, d in r.failures],
            }
            for r in rows
        ],
    }
    if extra:
        doc.update(extra)
    return json.dumps(doc, indent=2, ensure_ascii=False)


def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def github(
    rows: Sequence[Outcome], seconds: float, extra: Iterable[str] = (), noun: str = "case"
) -> str:
    """One ``::error`` workflow command per failure, on the line of the case or step."""
    out = []
    for r in rows:
        for line, message, detail in r.failures:
            body = f"{r.name}: {message}" + (f"\n{detail}" if detail else "")
            out.append(
                f"::error file={_escape_prop(r.path)},line={line},"
                f"title={_escape_prop('harness ' + noun + ' failed')}::"
                f"{_escape_data(body)}"
            )
    for note in extra:
        out.append(f"::warning::{_escape_data(note)}")
    out.append(summary(rows, seconds, noun))
    return "\n".join(out)


def junit(rows: Sequence[Outcome], seconds: float, suite: str = "harness test") -> str:
    """JUnit XML: one ``<testsuite>`` per file, one ``<testcase>`` per case."""
    top = ET.Element(
        "testsuites",
        name=suite,
        tests=str(len(rows)),
        failures=str(sum(not r.passed and not r.skipped for r in rows)),
        skipped=str(sum(bool(r.skipped) for r in rows)),
        time=f"{seconds:.3f}",
    )
    by_file: dict[str, list[Outcome]] = {}
    for r in rows:
        by_file.setdefault(r.path, []).append(r)
    for path, items in by_file.items():
        ts = ET.SubElement(
            top,
            "testsuite",
            name=path,
            tests=str(len(items)),
            failures=str(sum(not r.passed and not r.skipped for r in items)),
            errors="0",
            skipped=str(sum(bool(r.skipped) for r in items)),
            time=f"{sum(r.duration_ms for r in items) / 1000:.3f}",
        )
        for r in items:
            tc = ET.SubElement(
                ts,
                "testcase",
                classname=path,
                name=r.name,
                file=path,
                line=str(r.line),
                time=f"{r.duration_ms / 1000:.3f}",
            )
            if r.skipped:
                ET.SubElement(tc, "skipped", message=r.skipped)
            elif not r.passed:
                first = r.failures[0][1] if r.failures else "failed"
                f = ET.SubElement(tc, "failure", message=first, type="AssertionError")
                f.text = "\n".join(
                    f"{path}:{ln}: {m}" + (f"\n{d}" if d else "") for ln, m, d in r.failures
                )
    ET.indent(top)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(top, encoding="unicode")


def render(
    fmt: str, rows: Sequence[Outcome], seconds: float, extra: Sequence[str] = (), noun: str = "case"
) -> str:
    if fmt == "json":
        return as_json(rows, seconds, {"notes": list(extra)} if extra else None)
    if fmt == "github":
        return github(rows, seconds, extra, noun)
    if fmt == "junit":
        return junit(rows, seconds, f"harness {'eval' if noun == 'eval' else 'test'}")
    return text(rows, seconds, extra, noun)
