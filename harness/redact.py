"""Secret patterns shared by the audit trail (and mirrored by the starter pack's
``secret_redactor`` hook, which must use the same expressions)."""

from __future__ import annotations

import re
from typing import Any

import re2

# A value after "name=" or "name:": quoted (the quotes included) or a bare word. A value
# starting with "$" is a shell reference ($PASSWORD), not a secret. RE2-compatible (no
# lookaround), so the starter hook uses the very same text.
_VALUE = r"""(?:"[^"$\n][^"\n]*"|'[^'$\n][^'\n]*'|[^\s,;&"'$][^\s,;&"']*)"""
# For a bare "pwd": a path (/..., ~...) is the working directory, not a secret.
_NOT_A_PATH = r"""(?:"[^"$/~\n][^"\n]*"|'[^'$/~\n][^'\n]*'|[^\s,;&"'$/~][^\s,;&"']*)"""
# Name parts before the secret word: DB_, mysql., x-...
_PREFIX = r"(?:[A-Za-z0-9]+[_.-])"

PATTERNS: tuple[tuple[str, str], ...] = (
    ("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    # A key block (PEM, OpenSSH, PGP), or its start when the text was cut before END.
    (
        "private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
    ),
    # "password": "x" in JSON text, also JSON inside a JSON string (\"password\": \"x\").
    (
        "password-json",
        r'(?i)(\\?"(?:' + _PREFIX + r"*(?:password|passwd|passphrase|secret|"
        r"api[_-]?key)|" + _PREFIX + r'+pwd)\\?"\s*:\s*\\?")[^"\\]*',
    ),
    (
        "token-json",
        r'(?i)(\\?"(?:(?:access|refresh|auth|bearer|session)[_-]?)?token\\?"'
        r'\s*:\s*\\?")[^"\\]*',
    ),
    ("pwd-json", r'(?i)(\\?"pwd\\?"\s*:\s*\\?")[^"\\/~$][^"\\]*'),
    # password=x, DB_PASSWORD="x", export PASSWORD='x', MYSQL_PWD=x, mysql.pwd: x
    (
        "password",
        r"(?i)\b("
        + _PREFIX
        + r"*(?:password|passwd|passphrase)|"
        + _PREFIX
        + r"+pwd)[ \t]*[=:][ \t]*"
        + _VALUE,
    ),
    # A bare pwd only as pwd=x, and not a path: "PWD=/src", "pwd: command not found".
    ("pwd", r"(?i)\b(pwd)[ \t]*=[ \t]*" + _NOT_A_PATH),
)
# Object keys whose string values are secrets wherever they appear (a bare "pwd" only
# when the value is not a path).
SECRET_KEYS = re.compile(
    r"(?i)^(?:[a-z0-9]+[_.-])*(?:password|passwd|passphrase|secret|"
    r"api[_-]?key|token|access[_-]?token)$|^(?:[a-z0-9]+[_.-])+pwd$"
)
PWD_KEY = re.compile(r"(?i)^pwd$")
# RE2 (linear time): redaction runs over command output and tool results of any size;
# with Python re, "a-" * 10_000 took 9 s (each word boundary rescanned the rest for a
# secret name, issue 22 review). ``\z``: the end of the text, as in the starter hook.
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_COMPILED = [(name, re2.compile(rx, options=_OPTIONS)) for name, rx in PATTERNS]
MASK = "[REDACTED]"


def redact_text(text: str) -> str:
    for name, rx in _COMPILED:
        if name in ("password", "pwd"):
            text = rx.sub(lambda m: f"{m.group(1)}={MASK}", text)
        elif name.endswith("-json"):
            text = rx.sub(lambda m: f"{m.group(1)}{MASK}", text)
        else:
            text = rx.sub(MASK, text)
    return text


def _secret_value(key: Any, value: Any) -> bool:
    if not isinstance(value, str) or not value or not isinstance(key, str):
        return False
    if SECRET_KEYS.match(key):
        return True
    return PWD_KEY.match(key) is not None and value[0] not in "/~$"


def _key(key: Any, done: dict[Any, Any], source: dict[Any, Any]) -> Any:
    """A key with secrets masked (``[REDACTED]``, ``[REDACTED]#2``...); a masked key never
    replaces another entry."""
    if not isinstance(key, str):
        return key
    masked = redact_text(key)
    if masked == key:
        return key
    unique, n = masked, 2
    while unique in done or unique in source:
        unique, n = f"{masked}#{n}", n + 1
    return unique


def redact(value: Any) -> Any:
    """Redact every string inside a JSON-compatible value."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            out[_key(k, out, value)] = MASK if _secret_value(k, v) else redact(v)
        return out
    return value
