"""The agent-loop transcript (docs/spec.md §13): JSONL under ``.harness/state/sessions/``.

Written only when ``audit`` is on (``audit: {path: ...}`` in ``harness.md``): one line
per message added to the conversation and per tool result, appended and flushed as it
happens. Strings are capped at ``limits.max_output_bytes`` like tool output and
redacted with the audit trail's secret patterns.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from harness.config import Config
from harness.redact import redact
from harness.results import ToolCall, ToolResult

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _cap(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        raw = value.encode("utf-8")
        if len(raw) <= limit:
            return value
        return raw[:limit].decode("utf-8", "ignore") + f"[truncated at {limit} bytes]"
    if isinstance(value, dict):
        return {str(k): _cap(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cap(v, limit) for v in value]
    return value


class Transcript:
    """Appends one JSON object per line; a no-op when ``path`` is None."""

    def __init__(self, path: Path | None, session: str, limit: int) -> None:
        self.path, self.session, self.limit = path, session, limit
        self._file: IO[str] | None = None

    @classmethod
    def for_session(cls, config: Config, session: Any) -> Transcript:
        sid = str(
            getattr(session, "id", None) or getattr(session, "session_id", None) or uuid.uuid4().hex
        )
        path = None
        if config.audit.path:
            name = _UNSAFE.sub("_", sid) + ".jsonl"
            path = config.root / ".harness" / "state" / "sessions" / name
        return cls(path, sid, config.limits.max_output_bytes)

    def _write(self, kind: str, **fields: Any) -> None:
        if self.path is None:
            return
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            self._file = os.fdopen(fd, "a", encoding="utf-8")
        record = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "session": self.session,
            "kind": kind,
            **_cap(redact(fields), self.limit),
        }
        self._file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    def message(self, message: dict[str, Any]) -> None:
        self._write("message", message=message)

    def result(self, call: ToolCall, result: ToolResult) -> None:
        self._write(
            "tool_result",
            call_id=call.id,
            tool=call.name,
            arguments=dict(call.arguments),
            is_error=result.is_error,
            text=result.text,
            error=result.error,
            truncated=result.truncated,
            output_ref=result.output_ref,
        )

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
