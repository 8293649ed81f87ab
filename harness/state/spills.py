"""The server-wide store of spilled outputs behind ``read_output`` (``harness serve``).

A ref is unguessable (``out-`` and 128 random bits) and belongs to the scope that
made it: the auth identity of the client, or its connection when there is none. A ref
looked up from another scope is simply unknown. Refs expire after the backend's
``limits.spill_ttl_s`` and live in the state backend, so they survive ``--watch``
reloads and (with the redis backend) are readable from every replica. A ref dropped
to keep the state within its limits raises ``StateEvicted`` ("call the tool again").
"""

from __future__ import annotations

import secrets

from harness.state import StateBackend


class SpillStore:
    def __init__(self, backend: StateBackend, ttl_s: float | None = None) -> None:
        self.backend = backend
        # The TTL is the backend's limits.spill_ttl_s (state.spill_ttl_s); ``ttl_s`` is
        # accepted for callers that still pass it and must agree with it.
        self.ttl_s = backend.limits.spill_ttl_s if ttl_s is None else ttl_s

    def put(self, scope: str, text: str) -> str:
        ref = "out-" + secrets.token_urlsafe(16)
        self.backend.put_output(scope, ref, text.encode("utf-8"))
        return ref

    def get(self, scope: str, ref: str) -> bytes | None:
        if not isinstance(ref, str) or not ref.startswith("out-") or len(ref) > 64:
            return None
        return self.backend.get_output(scope, ref)
