"""How problems and summaries look in each output format of ``harness validate``.

Paths are shown relative to the current directory when the file lies inside it (so
GitHub annotations and terminal links resolve), absolute otherwise. Problems are
sorted by path, line and column.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.artifacts.model import Problem, Project


def display_path(path: str, root: Path | None) -> str:
    """``path`` (absolute, or relative to ``root``) as the user should see it."""
    if not path:
        return path
    p = Path(path)
    if not p.is_absolute():
        if root is None:
            return path
        p = root / p
    p = Path(os.path.abspath(p))
    cwd = Path.cwd()
    try:
        return p.relative_to(cwd).as_posix()
    except ValueError:
        return str(p)


def ordered(problems: Iterable[Problem], root: Path | None) -> list[Problem]:
    shown = [replace(p, path=display_path(p.path, root)) for p in problems]
    return sorted(shown, key=lambda p: (p.path, p.line, p.column))


def text_lines(problems: Iterable[Problem], root: Path | None = None) -> list[str]:
    """``PATH:LINE:COL: error|warning: MESSAGE [CODE]``, one per problem."""
    return [p.render() for p in ordered(problems, root)]


def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def github_lines(problems: Iterable[Problem], root: Path | None = None) -> list[str]:
    """GitHub Actions workflow commands: ``::error file=P,line=L,col=C::MSG [CODE]``.

    ``line``/``col`` are left out when unknown (0); values are escaped as GitHub
    requires (``%``, CR, LF everywhere; ``:`` and ``,`` in properties).
    """
    out = []
    for p in ordered(problems, root):
        props = [f"file={_escape_prop(p.path)}"]
        if p.line:
            props.append(f"line={p.line}")
            if p.column:
                props.append(f"col={p.column}")
        out.append(f"::{p.severity} {','.join(props)}::{_escape_data(p.message)} [{p.code}]")
    return out


def counts(problems: Iterable[Problem]) -> tuple[int, int]:
    errors = warnings = 0
    for p in problems:
        if p.severity == "error":
            errors += 1
        else:
            warnings += 1
    return errors, warnings


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def artifact_count(project: Project) -> int:
    """Distinct files that produced a tool, a hook or a problem."""
    paths = {t.source.path for t in project.tools.values()}
    paths.update(h.source.path for h in project.hooks)
    paths.update(p.path for p in project.problems if p.path)
    return len(paths)


def summary(project: Project) -> str:
    """``ok: 12 tools, 3 hooks`` (plus ``, 1 warning``) or ``2 errors, 1 warning in 14 files``."""
    errors, warnings = counts(project.problems)
    if errors:
        return (
            f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')} "
            f"in {_plural(artifact_count(project), 'file')}"
        )
    line = f"ok: {_plural(len(project.tools), 'tool')}, {_plural(len(project.hooks), 'hook')}"
    if warnings:
        line += f", {_plural(warnings, 'warning')}"
    return line


def json_report(project: Project, root: Path | None = None) -> dict[str, Any]:
    """``{"ok", "tools": [names], "hooks": [names], "problems": [...]}``."""
    return {
        "ok": project.ok,
        "tools": sorted(project.tools),
        "hooks": [h.name for h in project.hooks],
        "problems": [
            {
                "path": p.path,
                "line": p.line,
                "column": p.column,
                "severity": p.severity,
                "code": p.code,
                "message": p.message,
            }
            for p in ordered(project.problems, root)
        ],
    }


def dumps(value: Any) -> str:
    """JSON as printed by every command: two-space indent, UTF-8 kept."""
    return json.dumps(value, indent=2, ensure_ascii=False)
