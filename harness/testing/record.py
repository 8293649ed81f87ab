"""``harness test --record``: write the fakes a real run produced into the test file.

Every command and request of the recorded cases ran for real; each case that made
any gets a ``fakes:`` key (an existing one is replaced) holding what they returned,
redacted as audit records are (:func:`harness.redact.redact`), with literal patterns
(glob characters escaped). The file is edited as text, so comments and layout
elsewhere stay; the result is parsed again and written only if it is a valid test
file declaring exactly the recorded fakes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.testing.spec import Case, parse


class _Dumper(yaml.SafeDumper):
    """Multi-line output as ``|`` blocks, as a person would write it."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value.rstrip("\n") or value.endswith("\n") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block(recorded: Sequence[tuple[str, dict[str, Any]]], indent: int) -> list[str]:
    fakes: dict[str, list[dict[str, Any]]] = {}
    for kind, item in recorded:
        if item not in fakes.setdefault(kind, []):
            fakes[kind].append(item)
    text = yaml.dump(
        {"fakes": fakes},
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        width=1000,
        indent=2,
    )
    pad = " " * indent
    return [pad + line for line in text.splitlines()]


def _case_span(lines: list[str], start: int) -> tuple[int, int, int]:
    """(first line index, end index (exclusive), key indentation) of the case whose
    ``- `` item starts at index ``start``."""
    first = lines[start]
    dash = _indent(first)
    rest = first[dash:]
    if not rest.startswith("- ") or rest[2:].lstrip().startswith("{"):
        raise ValueError(f"line {start + 1}: only block-style cases can be recorded")
    key = dash + 2 + (len(rest[2:]) - len(rest[2:].lstrip(" ")))
    end = start + 1
    while end < len(lines):
        line = lines[end]
        if line.strip() and not line.lstrip().startswith("#") and _indent(line) <= dash:
            break
        if line.strip() == "---" and _indent(line) == 0:
            break
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return start, end, key


def _without_fakes(lines: list[str], start: int, end: int, key: int) -> list[str]:
    """The case's lines with its own ``fakes:`` block (at key indentation) removed."""
    out: list[str] = []
    skipping = False
    for i in range(start, end):
        line = lines[i]
        body = line[key:] if i > start else line[key:]
        at_key = _indent(line) == key or i == start
        if skipping:
            if line.strip() and _indent(line) <= key:
                skipping = False
            else:
                continue
        if at_key and body.startswith("fakes:"):
            if i == start:
                raise ValueError(f"line {start + 1}: move fakes: below the case's first key")
            skipping = True
            continue
        out.append(line)
    return out


def write_recorded(
    path: Path, rel: str, cases: Sequence[tuple[Case, Sequence[tuple[str, dict[str, Any]]]]]
) -> str:
    """Write the recorded fakes of ``cases`` into ``path``; a one-line summary.
    Raises ValueError (the file unchanged) when the file cannot be edited safely."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    wanted: dict[str, int] = {}
    for case, recorded in sorted(cases, key=lambda cr: -cr[0].line):
        if not recorded:
            continue
        start, end, key = _case_span(lines, case.line - 1)
        body = _without_fakes(lines, start, end, key)
        lines[start:end] = body + _block(recorded, key)
        wanted[case.name] = len({(k, repr(v)) for k, v in recorded})
    new = "\n".join(lines) + ("\n" if text.endswith("\n") else "")
    check = parse(new, rel)
    errors = [p for p in check.problems if p.severity == "error"]
    if errors:
        first = errors[0]
        raise ValueError(f"the recorded file would not parse ({first.line}: {first.message})")
    for case in check.cases:
        if case.name in wanted:
            fakes = case.setup.fakes
            own = sum(f.scope == "case" for f in fakes.exec)
            own += sum(f.scope == "case" for f in fakes.http)
            if own != wanted[case.name]:
                raise ValueError(f'case "{case.name}": the recorded fakes did not come out whole')
    path.write_text(new, encoding="utf-8")
    total = sum(wanted.values())
    return f"{rel}: recorded {total} fake(s) in {len(wanted)} case(s)"
