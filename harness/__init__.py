"""harness: tools for language models as Markdown files.

Public API (SPEC §12)::

    h = harness.load(".")            # raises harness.LoadError listing every problem
    problems = harness.check(".")    # never raises for content problems
    r = h.call("read_file", {"path": "README.md"})
"""

from __future__ import annotations

from harness.artifacts.model import HookSpec, Parameter, Problem, Project, ToolSpec
from harness.config import Config
from harness.core import Harness, Session, check, load
from harness.errors import BuiltinError, HarnessError, JailError, LoadError, UsageError
from harness.results import ToolCall, ToolResult

__all__ = sorted([
    "BuiltinError",
    "Config",
    "Harness",
    "HarnessError",
    "HookSpec",
    "JailError",
    "LoadError",
    "Parameter",
    "Problem",
    "Project",
    "Session",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "UsageError",
    "check",
    "load",
])
