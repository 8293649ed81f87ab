"""Shared by tests/security/test_crash_*.py: deeply nested sources and a project writer."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Nesting forms: each takes a depth and returns one Starlark expression.
FORMS = {
    "plus": lambda n: "+".join(["1"] * n),
    "list": lambda n: "[" * n + "]" * n,
    "dict": lambda n: "{1: " * n + "1" + "}" * n,
    "paren": lambda n: "(" * n + "1" + ")" * n,
    "unary": lambda n: "-" * n + "1",
    "not": lambda n: "not " * n + "True",
    "call": lambda n: "len(" * n + "[]" + ")" * n,
    "ifexp": lambda n: "1 if True else " * n + "1",
    "and": lambda n: " and ".join(["True"] * n),
    "index": lambda n: "[[1]]" + "[0]" * n,
    "lambda": lambda n: "lambda: " * n + "1",
    "comprehension": lambda n: "[1 for a in " * n + "[]" + "]" * n,
}


def tool_file(expr: str) -> str:
    return "---\nscript: |\n  def run(args):\n      return " + expr + "\n---\nA deep tool.\n"


def block_script(depth: int) -> str:
    """``run`` whose body is ``depth`` nested ``if`` blocks."""
    lines = ["def run(args):"]
    for level in range(depth):
        lines.append("    " + " " * level + "if True:")
    lines.append("    " + " " * depth + "pass")
    lines.append("    return 1")
    return "\n".join(lines) + "\n"


def elif_script(depth: int) -> str:
    lines = ["def run(args):", "    a = args.get('a', 0)", "    if a == -1:", "        pass"]
    for i in range(depth):
        lines += [f"    elif a == {i}:", "        pass"]
    lines.append("    return 1")
    return "\n".join(lines) + "\n"


def script_tool_file(script: str) -> str:
    return "---\nscript: |\n" + textwrap.indent(script, "  ") + "---\nA deep tool.\n"


def write_root(root: Path, config: str = "") -> Path:
    (root / ".harness" / "tools").mkdir(parents=True, exist_ok=True)
    (root / ".harness" / "hooks").mkdir(parents=True, exist_ok=True)
    (root / "harness.md").write_text(
        "---\nruntime: {isolation: inprocess}\n" + config + "---\nYou are a test agent.\n"
    )
    return root


def validate(root: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "validate", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=root,
    )


def python(code: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )
