"""``harness test`` and ``harness eval``: tests for tools and hooks as files.

- :mod:`harness.testing.spec`: test files (``.harness/tests/*.md``) -> frozen cases (pure);
- :mod:`harness.testing.runner`: each case in a fresh copy of the workspace, in parallel;
- :mod:`harness.testing.expect`: the ``expect:`` keys and failure messages;
- :mod:`harness.testing.report`: text, json, github and junit output;
- :mod:`harness.testing.coverage`: tools, hooks and hook decisions no case reached;
- :mod:`harness.testing.evalspec`, :mod:`harness.testing.evals`: model-driven evals
  (``.harness/evals/*.md``): parsing (pure), running and grading;
- :mod:`harness.testing.pytest_plugin`: the same files as pytest items.

- :mod:`harness.testing.fake_models`: fake OpenAI-compatible and Anthropic model
  servers for agent tests without a network (``from harness.testing import
  FakeModelServer, Reply, ToolUse``; docs/testing.md).

This package imports the pipeline (``harness.load``, ``Harness``, ``Session``); nothing
in the pipeline imports it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.testing.fake_models import (  # noqa: F401
        FakeModelServer,
        Reply,
        Request,
        ToolUse,
    )

# Loaded on first use, like ``harness``'s own names: importing a submodule (the pytest
# plugin, the runner) does not start an HTTP server module.
_WHERE = {
    "FakeModelServer": "harness.testing.fake_models",
    "Reply": "harness.testing.fake_models",
    "Request": "harness.testing.fake_models",
    "ToolUse": "harness.testing.fake_models",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'harness.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
