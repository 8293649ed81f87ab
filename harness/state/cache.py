"""``cache.get/set/delete`` values kept in a state backend (shared by replicas).

Values are scoped like spilled outputs: to the auth identity of the client (or its
connection). The per-value size limit is the one of the in-process cache.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from harness.errors import BuiltinError
from harness.runtime.builtins.cache import encoded_size
from harness.state import StateBackend


class BackendCache:
    def __init__(self, backend: StateBackend, scope: str) -> None:
        self._backend = backend
        self._prefix = "cache:" + hashlib.sha256(scope.encode("utf-8")).hexdigest()[:24] + ":"

    def get(self, key: str, default: Any = None) -> Any:
        try:
            raw = self._backend.get_value(self._prefix + key)
        except Exception as exc:  # noqa: BLE001 - the script sees a built-in error
            raise BuiltinError(f"cache.get: the shared state store failed: {exc}") from None
        return default if raw is None else json.loads(raw)

    def set(self, key: str, value: Any) -> None:
        encoded_size(key, value)  # JSON-compatible and within the per-value limit
        try:
            self._backend.set_value(self._prefix + key,
                                    json.dumps(value, separators=(",", ":")))
        except Exception as exc:  # noqa: BLE001
            raise BuiltinError(f"cache.set: the shared state store failed: {exc}") from None

    def delete(self, key: str) -> None:
        try:
            self._backend.delete_value(self._prefix + key)
        except Exception as exc:  # noqa: BLE001
            raise BuiltinError(f"cache.delete: the shared state store failed: {exc}") from None
