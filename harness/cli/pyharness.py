"""``harness serve --python module:attr``: the Harness a Python module built (with its
Python tools), found the way ``uvicorn module:app`` finds an app."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from harness.cli.common import CliError


def import_harness(target: str, root: Path | None) -> Any:
    """The :class:`harness.Harness` at ``module:attr`` (an attribute, or a function
    taking no arguments that returns one). The current directory and ``root`` are put
    first on ``sys.path``, so a module beside the project imports."""
    from harness.core import Harness

    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise CliError(
            f'--python "{target}": write MODULE:ATTRIBUTE, e.g. --python my_tools:h', exit_code=2
        )
    for folder in (root, Path.cwd()):
        if folder is not None and str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(f'--python "{target}": cannot import {module_name}: {exc}', 2) from exc
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise CliError(
                f'--python "{target}": module {module_name} has no attribute {attr}', exit_code=2
            )
        value = getattr(value, part)
    if callable(value) and not isinstance(value, (Harness, type)):
        try:
            value = value()
        except Exception as exc:  # noqa: BLE001 - the user's factory: say what it did
            raise CliError(f'--python "{target}": {attr}() failed: {exc}', exit_code=2) from exc
    if not isinstance(value, Harness):
        raise CliError(
            f'--python "{target}" is {type(value).__name__}, not a harness.Harness; point '
            "it at the result of harness.load(...) (or a function returning it)",
            exit_code=2,
        )
    if root is not None and Path(root).resolve() != Path(value.root).resolve():
        raise CliError(
            f'--python "{target}" serves the project at {value.root}, not --root {root}; '
            "leave out --root",
            exit_code=2,
        )
    return value
