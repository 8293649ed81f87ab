"""The server-wide store of spilled outputs behind ``read_output`` (``harness serve``).

A ref is unguessable (``out-`` and 128 random bits) and belongs to the scope that
made it: the auth identity of the client, or its connection when there is none. A ref
looked up from another scope is simply unknown. Refs expire after ``ttl_s`` and live
in the state backend, so they survive ``--watch`` reloads and (with the redis backend)
are readable from every replica.
"""

from __future__ import annotations

import hashlib
import secrets

from harness.state import StateBackend

DEFAULT_TTL_S = 3600.0


def _key(scope: str, ref: str) -> str:
    tag = hashlib.sha256(scope.encode("utf-8")).hexdigest()[:24]
    return f"spill:{tag}:{ref}"


class SpillStore:
    def __init__(self, backend: StateBackend, ttl_s: float = DEFAULT_TTL_S) -> None:
        self.backend = backend
        self.ttl_s = ttl_s

    def put(self, scope: str, text: str) -> str:
        ref = "out-" + secrets.token_urlsafe(16)
        self.backend.put_blob(_key(scope, ref), text.encode("utf-8"), self.ttl_s)
        return ref

    def get(self, scope: str, ref: str) -> bytes | None:
        if not isinstance(ref, str) or not ref.startswith("out-") or len(ref) > 64:
            return None
        return self.backend.get_blob(_key(scope, ref))
