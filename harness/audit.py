"""The audit trail: one JSON object per line, appended and flushed per event (docs/spec.md §9).

Values are capped like tool output and redacted with the secret patterns, so a crash
loses at most the event in flight and no matched secret reaches the file.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from harness.redact import redact

_log = logging.getLogger("harness.audit")


def _cap(value: Any, max_chars: int) -> Any:
    if isinstance(value, str):
        if len(value) > max_chars:
            return value[:max_chars] + f"[… {len(value) - max_chars} more characters]"
        return value
    if isinstance(value, list):
        return [_cap(v, max_chars) for v in value[:1000]]
    if isinstance(value, dict):
        return {str(k): _cap(v, max_chars) for k, v in list(value.items())[:1000]}
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return _cap(str(value), max_chars)


class AuditLog:
    """Append-only JSONL writer shared by every session of a Harness."""

    def __init__(self, path: Path, max_value_chars: int = 65536) -> None:
        self.path = path
        self.max_value_chars = max_value_chars
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self._lock = threading.Lock()

    def write(self, session: str, event: str, fields: dict[str, Any]) -> None:
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
        record = {
            "time": f"{stamp}.{int(now * 1000) % 1000:03d}Z",
            "session": session,
            "event": event,
        }
        # Redact before capping: a cut must not split a secret so that it escapes.
        # The keys written above are never replaced by a field of the same name.
        for key, value in _cap(redact(fields), self.max_value_chars).items():
            record.setdefault(key, value)
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        with self._lock:
            if self._fd >= 0:
                os.write(self._fd, line)  # O_APPEND: one write per event, never interleaved

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def log_event(session: str, event: str, fields: dict[str, Any]) -> None:
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug("%s %s", event, json.dumps(_cap(redact(fields), 2000), default=str))
