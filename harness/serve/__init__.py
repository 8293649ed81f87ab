"""Serving the loaded tools to other programs: the MCP server (docs/spec.md §11).

``harness.serve.mcp`` needs the optional ``mcp`` dependency (``pip install
'harness-md[mcp]'``); it is imported only when a server is started.
"""
