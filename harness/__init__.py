"""harness: tools for language models as Markdown files.

Public API (docs/spec.md §12)::

    h = harness.load(".")            # raises harness.LoadError listing every problem
    problems = harness.check(".")    # never raises for content problems
    r = h.call("read_file", {"path": "README.md"})

Names are imported lazily (PEP 562) so that ``harness validate`` does not pay for the
runtime at start-up.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

# A library does not configure logging: without this, warnings would reach stderr
# through Python's last-resort handler. The CLI and `harness serve` set up handlers.
logging.getLogger("harness").addHandler(logging.NullHandler())

# The distribution name on the package index (`pip install harness-md`); the import
# name and the command are `harness`.
DISTRIBUTION = "harness-md"

if TYPE_CHECKING:  # for type checkers and IDEs; at run time names load on first use
    from harness.artifacts.model import (  # noqa: F401
        HookSpec,
        Parameter,
        Problem,
        Project,
        ToolSpec,
    )
    from harness.config import Config  # noqa: F401
    from harness.core import Harness, Session, check, load  # noqa: F401
    from harness.errors import (  # noqa: F401
        BuiltinError,
        HarnessError,
        JailError,
        LoadError,
        UsageError,
    )
    from harness.results import ToolCall, ToolResult  # noqa: F401

_WHERE = {
    "BuiltinError": "harness.errors",
    "Config": "harness.config",
    "Harness": "harness.core",
    "HarnessError": "harness.errors",
    "HookSpec": "harness.artifacts.model",
    "JailError": "harness.errors",
    "LoadError": "harness.errors",
    "Parameter": "harness.artifacts.model",
    "Problem": "harness.artifacts.model",
    "Project": "harness.artifacts.model",
    "Session": "harness.core",
    "ToolCall": "harness.results",
    "ToolResult": "harness.results",
    "ToolSpec": "harness.artifacts.model",
    "UsageError": "harness.errors",
    "check": "harness.core",
    "load": "harness.core",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name == "serve":  # harness.serve(h): the callable package harness/serve/
        return importlib.import_module("harness.serve")
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
