"""The agent loop (docs/spec.md §13): drive a model with the loaded tools.

``Harness.run(prompt, ...)`` and ``harness run "PROMPT"`` both call :func:`run_agent`.
"""

from __future__ import annotations

from .base import AgentError, ModelConfigError, ModelSettings, ProviderError, RoundLimitError
from .loop import AgentResult, ToolSession, ToolSide, resolve_settings, run_agent

__all__ = [
    "AgentError",
    "AgentResult",
    "ModelConfigError",
    "ModelSettings",
    "ProviderError",
    "RoundLimitError",
    "ToolSession",
    "ToolSide",
    "resolve_settings",
    "run_agent",
]
