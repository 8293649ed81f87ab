"""Decisions a hook script writes but the runtime never sees (issue 23): a ``block(...)``,
``modify(...)`` or ``allow()`` whose value is discarded (a forgotten ``return``), and a
returned dict that is not a decision (``{"decision": "block"}``, Claude Code's form, or an
``action`` harness does not know, such as ``"deny"``).

Purely syntactic: one walk over the script's tree, anywhere in it (``handle`` and helpers).
"""

from __future__ import annotations

import ast

from harness.artifacts.problems import suggest
from harness.guards.model import Finding

DECISIONS = ("block", "modify", "allow")
ACTIONS = ("allow", "continue", "block", "modify")
# Keys of other tools' hook outputs (Claude Code, Cursor...) that mean a decision there.
FOREIGN_KEYS = frozenset(
    (
        "decision",
        "permissionDecision",
        "permission",
        "hookSpecificOutput",
        "block",
        "deny",
        "blocked",
        "allow",
        "continue",
    )
)


def _at(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1


def _key(node: ast.expr | None) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    return None


def check(module: ast.Module) -> list[Finding]:
    """Every discarded decision and foreign decision dict in ``module``."""
    shadowed = {
        n.name for n in module.body if isinstance(n, ast.FunctionDef) and n.name in DECISIONS
    }
    found: list[Finding] = []
    for node in ast.walk(module):
        if isinstance(node, ast.Expr):
            found += _discarded(node, shadowed)
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
            found += _foreign(node.value)
        elif isinstance(node, ast.Dict):
            found += _action(node)
    return found


def _discarded(node: ast.Expr, shadowed: set[str]) -> list[Finding]:
    call = node.value
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id in DECISIONS
        and call.func.id not in shadowed
    ):
        return []
    name = call.func.id
    shown = f'{name}("...")' if name == "block" else f"{name}(...)" if call.args else f"{name}()"
    return [
        Finding(
            *_at(node),
            "guard-decision-discarded",
            f"the decision is discarded: {name}() only builds a decision, the hook's "
            f"return value is what counts; write return {shown}",
        )
    ]


def _foreign(node: ast.Dict) -> list[Finding]:
    keys = {_key(k) for k in node.keys if k is not None}
    if "action" in keys:
        return []
    foreign = sorted(k for k in keys if isinstance(k, str) and k in FOREIGN_KEYS)
    if not foreign:
        return []
    return [
        Finding(
            *_at(node),
            "guard-decision-form",
            f'this dict is not a decision (no "action" key; "{foreign[0]}" is another '
            "tool's hook format), so the hook allows everything; write "
            'return block("reason") (or modify({...}) / allow())',
        )
    ]


def _action(node: ast.Dict) -> list[Finding]:
    for k, v in zip(node.keys, node.values, strict=True):
        if _key(k) != "action":
            continue
        action = _key(v)
        if isinstance(action, str) and action not in ACTIONS:
            return [
                Finding(
                    *_at(v),
                    "guard-decision-form",
                    f'"{action}" is not an action{suggest(action, ACTIONS)}: the hook fails '
                    f"at every call (with on_error: allow it never acts); write "
                    f'return block("reason") (actions: {", ".join(ACTIONS)})',
                )
            ]
    return []


def unchanged(fn: ast.FunctionDef, payload: str) -> list[Finding]:
    """``modify(payload)`` in a handle that never changes ``payload`` itself: it passes
    the payload as received, so it changes nothing (the copy the hook edited is lost)."""
    for node in ast.walk(fn):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                if t.value.id == payload:
                    return []
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == payload
        ):
            return []  # payload.update(...), payload.pop(...)
    found = []
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "modify"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == payload
        ):
            found.append(
                Finding(
                    *_at(node),
                    "guard-modify-unchanged",
                    f"modify({payload}) passes the payload as it came in, so it changes "
                    "nothing; pass the dict you changed (p = dict(payload); p[...] = ...; "
                    'return modify(p)) or only the keys: modify({"content": ...})',
                )
            )
    return found
