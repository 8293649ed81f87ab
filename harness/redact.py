"""Secret patterns shared by the audit trail (and mirrored by the starter pack's
``secret_redactor`` hook, which must use the same expressions)."""

from __future__ import annotations

import re
from typing import Any

PATTERNS: tuple[tuple[str, str], ...] = (
    ("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    # A key block, or its start when the text was cut before the END line.
    ("private-key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?"
                    r"(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"),
    # "password": "x" in JSON text, also JSON inside a JSON string (\"password\": \"x\").
    ("password-json", r'(?i)(\\?"(?:password|passwd|pwd|secret|api_?key|token)\\?"\s*:\s*\\?")'
                      r'[^"\\]*'),
    ("password", r"(?i)\b(password|passwd|pwd)\s*[=:]\s*[^\s,;&\"']+"),
)
# Object keys whose string values are secrets wherever they appear.
SECRET_KEYS = re.compile(r"(?i)^(password|passwd|pwd|secret|api_?key|token|access_?token)$")
_COMPILED = [(name, re.compile(rx)) for name, rx in PATTERNS]
MASK = "[REDACTED]"


def redact_text(text: str) -> str:
    for name, rx in _COMPILED:
        if name == "password":
            text = rx.sub(lambda m: f"{m.group(1)}={MASK}", text)
        elif name == "password-json":
            text = rx.sub(lambda m: f"{m.group(1)}{MASK}", text)
        else:
            text = rx.sub(MASK, text)
    return text


def redact(value: Any) -> Any:
    """Redact every string inside a JSON-compatible value."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, dict):
        return {k: MASK if isinstance(v, str) and v and isinstance(k, str)
                and SECRET_KEYS.match(k) else redact(v) for k, v in value.items()}
    return value
