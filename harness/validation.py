"""``check_project``: everything ``harness validate`` can know without running a tool.

Loading (:mod:`harness.artifacts.loader`) + structural checks
(:mod:`harness.artifacts.checks`) + static Starlark checks
(:mod:`harness.runtime.static`). Returns a :class:`Project` whose ``problems`` are
sorted by path, line and column. Never raises for content problems.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness.artifacts import checks
from harness.artifacts.loader import find_root, load
from harness.artifacts.model import Problem, Project


def check_project(root: Path | None = None, *, strict: bool = False) -> Project:
    """Load ``root`` (default: discovered from the current directory) and check everything.

    ``strict`` turns unknown-key warnings into errors.
    """
    from harness.runtime.static import check_script

    root = find_root(Path.cwd()) if root is None else Path(root)
    loaded = load(root)
    project = loaded.project
    problems: list[Problem] = list(project.problems)
    for name, spec in project.tools.items():
        entry = loaded.tool_entries[name]
        problems.extend(checks.schema_problems(entry, spec))
        problems.extend(checks.script_warnings(entry, spec))
        if spec.script is not None:
            problems.extend(check_script(spec.script, entry.path, spec.script_line, "tool",
                                         first_column=spec.script_column, owner=entry.label))
    for hook in project.hooks:
        entry = loaded.hook_entries[hook.name]
        if hook.script:
            problems.extend(check_script(hook.script, entry.path, hook.script_line, "hook",
                                         first_column=hook.script_column, owner=entry.label))
        if hook.when is not None:
            problems.extend(check_script(hook.when, entry.path, hook.when_line, "when",
                                         first_column=hook.when_column, owner=entry.label))
    if strict:
        problems = [replace(p, severity="error") if p.code in checks.UNKNOWN_KEY_CODES else p
                    for p in problems]
    problems.sort(key=lambda p: (p.path, p.line, p.column, p.code))
    return replace(project, problems=tuple(problems))
