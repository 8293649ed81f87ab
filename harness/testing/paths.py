"""Path-valued settings of a test or eval case: each one written stays in the case's copy.

A case runs in a fresh copy of the workspace; nothing it does may reach the real one or
anything else (issue 22 item 12: ``config: {audit: {path: /elsewhere}}`` appended the
case's audit trail there). Every path-valued setting of :class:`~harness.config.Config`
is listed below as written (checked) or not written (with the reason);
``tests/security/test_attack3_case_paths.py`` fails for a new one that is in neither.

- :func:`static_problems` is what ``harness validate`` says about a case's ``config:``
  (an absolute path, or ``..`` leading out), as it refuses ``workspace``;
- :func:`check_copy` runs before every case on the copy itself: it also sees a symbolic
  link leading out, and a path harness.md gives (an absolute ``audit.path`` is fine for
  real runs, never for a case).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

# Settings a case writes to (relative to the root: the case's copy).
WRITTEN: dict[tuple[str, ...], str] = {
    ("audit", "path"): "the audit trail, appended to (spilled outputs and transcripts "
    "go to .harness/state under the root, which is the copy)",
    ("workspace",): "where tools read and write (config already keeps it in the root)",
}
# Settings that name a place a case never writes to.
NOT_WRITTEN: dict[tuple[str, ...], str] = {
    ("root",): "set by the runner: the case's copy",
    ("exec", "mounts"): "host directories bound read-only into the sandbox",
    ("fs", "protected"): "workspace entries tools may not write",
    ("state", "url"): "the state backend of harness serve; cases never open it",
    ("model", "base_url"): "the model's endpoint (harness eval)",
}

FIX = (
    "a case writes only inside its copy of the workspace: use a relative path such as "
    ".harness/state/audit.jsonl"
)


def _value(data: Any, key: tuple[str, ...]) -> Any:
    for part in key:
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def static_problems(overrides: Mapping[str, Any]) -> Iterator[str]:
    """What a case's ``config:`` sets outside its copy, as far as the file shows."""
    for key in WRITTEN:
        value = _value(overrides, key)
        if not isinstance(value, str) or not value:
            continue
        normal = os.path.normpath(value)
        if os.path.isabs(value) or normal == ".." or normal.startswith("../"):
            yield f'config {".".join(key)} "{value}" leads outside the case copy; {FIX}'


def check_copy(config: Any, copy: Path, case_config: Mapping[str, Any]) -> Iterator[str]:
    """Why a written setting of ``config`` (the case's, on the copy at ``copy``) leads
    outside the copy, symbolic links followed; ``case_config`` tells who set it."""
    base = copy.resolve()
    for key in WRITTEN:
        value: Any = config
        for part in key:
            value = getattr(value, part)
        if not value:
            continue
        target = (base / value).resolve()
        if target == base or base in target.parents:
            continue
        origin = "the case's config" if _value(case_config, key) is not None else "harness.md"
        yield (
            f'config {".".join(key)} "{value}" (from {origin}) leads outside the case copy '
            f"(to {target}); {FIX}"
        )
