"""Conditions that never change (issue 23): ``x == "a" or "b"`` (a non-empty literal in an
``or`` makes it always true) and ``x == "a" and x == "b"`` (never true). Syntactic: every
``when:`` expression and every ``if`` / ``while`` / conditional-expression test.
"""

from __future__ import annotations

import ast

from harness.guards.model import Finding


def check(tree: ast.AST) -> list[Finding]:
    found: list[Finding] = []
    tests: list[ast.expr] = []
    if isinstance(tree, ast.Expression):
        tests.append(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            tests.append(node.test)
    for test in tests:
        for node in ast.walk(test):
            if isinstance(node, ast.BoolOp):
                found += _always(node) if isinstance(node.op, ast.Or) else _never(node)
    return found


def _at(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1


def _always(node: ast.BoolOp) -> list[Finding]:
    for value in node.values:
        if isinstance(value, ast.Constant) and value.value and not isinstance(value.value, bool):
            shown = f'"{value.value}"' if isinstance(value.value, str) else repr(value.value)
            fix = ""
            first = node.values[0]
            if (
                isinstance(value.value, str)
                and isinstance(first, ast.Compare)
                and len(first.ops) == 1
                and isinstance(first.ops[0], ast.Eq)
                and isinstance(first.comparators[0], ast.Constant)
            ):
                subject = ast.unparse(first.left)
                fix = f'; write {subject} in ("{first.comparators[0].value!s}", {shown})'
            return [
                Finding(
                    *_at(value),
                    "guard-always-true",
                    f"this condition is always true: {shown} is a non-empty literal, and "
                    f"`or` does not repeat the comparison{fix}",
                )
            ]
    return []


def _never(node: ast.BoolOp) -> list[Finding]:
    seen: dict[str, tuple[object, ast.AST]] = {}
    for value in node.values:
        if not (
            isinstance(value, ast.Compare)
            and len(value.ops) == 1
            and isinstance(value.ops[0], ast.Eq)
            and isinstance(value.comparators[0], ast.Constant)
        ):
            continue
        subject = ast.dump(value.left)
        constant = value.comparators[0].value
        if subject in seen and seen[subject][0] != constant:
            shown = ast.unparse(value.left)
            return [
                Finding(
                    *_at(value),
                    "guard-never-true",
                    f"this condition is never true: {shown} cannot equal both "
                    f"{seen[subject][0]!r} and {constant!r}; to accept either write "
                    f"{shown} in ({seen[subject][0]!r}, {constant!r})",
                )
            ]
        seen.setdefault(subject, (constant, value))
    return []
