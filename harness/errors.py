"""Every exception harness raises.

The tree::

    HarnessError                 base of everything below
    ├── LoadError                artifacts or config are broken; ``.problems`` lists them all
    ├── UsageError               the caller used the API or CLI wrongly (bad JSON, unknown flag)
    │   └── ModelConfigError     (harness.agent) model settings missing or wrong: no key, no model
    ├── BuiltinError             a built-in refused its arguments; becomes a Starlark error
    │   └── JailError            a path is outside the workspace, protected or sensitive
    └── AgentError               (harness.agent) the agent loop stopped; exit code 1
        ├── ProviderError        the model API answered with an error or broke the stream
        └── RoundLimitError      more tool rounds than limits.max_tool_calls_per_turn

The agent errors live in ``harness.agent.base`` (that package is loaded only by
``harness run``) and are re-exported from ``harness.agent``.

Failures of a *call* (bad arguments, hooks, timeouts, sandbox) are never raised out of
``Harness.call``: they are ``ToolResult(is_error=True)``. Only programmer errors and
broken artifacts raise, at load time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.artifacts.model import Problem


class HarnessError(Exception):
    """Base class of every harness exception."""

    exit_code = 2


class LoadError(HarnessError):
    """Artifacts or configuration could not be loaded; carries every problem found."""

    exit_code = 2

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        lines = [p.render() for p in self.problems if p.severity == "error"] or [
            p.render() for p in self.problems
        ]
        super().__init__("cannot load harness:\n" + "\n".join(lines))


class UsageError(HarnessError):
    """The API or the command line was used wrongly."""

    exit_code = 2


class BuiltinError(HarnessError):
    """A built-in refused its arguments. The message is what the script author sees."""


class JailError(BuiltinError):
    """A path argument escapes the workspace, or names a protected or sensitive file."""
