"""Serving the loaded tools to other programs: the MCP server (docs/spec.md §11).

``harness.serve.mcp`` needs the optional ``mcp`` dependency (``pip install
'harness-md[mcp]'``); it is imported only when a server is started.

This package is also callable: ``harness.serve(h, transport="stdio", ...)`` serves a
loaded :class:`harness.Harness`, Python tools included, through the same pipeline as
``harness serve`` (:func:`harness.serve.entry.serve_harness`). The package's module
object is callable (rather than a function shadowing it) so that ``harness.serve``
means the same thing whether or not a submodule was imported first.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _ServePackage(types.ModuleType):
    def __call__(self, harness: Any, **options: Any) -> None:
        from harness.serve.entry import serve_harness

        serve_harness(harness, **options)


sys.modules[__name__].__class__ = _ServePackage
