"""The one secret rule set, compiled once per process, and the walk that applies it.

Owned here and used by the audit trail (audit.py, agent/transcript.py), by the
``redact(value, rules=...)`` built-in (runtime/builtins/redaction.py) and so by the
starter pack's ``secret_redactor`` hook, which adds only its editable list of extra
patterns. The formats covered follow the public rule lists of gitleaks and
detect-secrets (which formats, not their code); docs/security.md lists them.

Speed: every rule goes into one RE2 set. A value is walked once, iteratively; its
strings (and object keys) are scanned together, joined by newlines, in one pass of
the set. Only when a rule hits does the walk run again to rebuild the value, masking
each string with the rules that hit it; a value with nothing to mask is returned as
it is (the same object). A newline is what the end of a string looks like to every
built-in rule (``\\b``, ``[^\\s...]``; a key block cut at the end of its string still
runs to the end of the joined text), so the joined scan misses nothing a string
scanned alone would hit. A user's extra rules are scanned the same way, unless one
anchors at the start or end of the text (``^``, ``$``, ``\\A``, ``\\z``): then string
by string.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

MASK = "[REDACTED]"
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False

# A value after "name=" or "name:": quoted (the quotes included) or a bare word. A value
# starting with "$" is a shell reference ($PASSWORD), not a secret.
_VALUE = r"""(?:"[^"$\n][^"\n]*"|'[^'$\n][^'\n]*'|[^\s,;&"'$][^\s,;&"']*)"""
# For a bare "pwd": a path (/..., ~...) is the working directory, not a secret.
_NOT_A_PATH = r"""(?:"[^"$/~\n][^"\n]*"|'[^'$/~\n][^'\n]*'|[^\s,;&"'$/~][^\s,;&"']*)"""
_PW = r"(?:password|passwd|passphrase)"
# Names of keys whose value is a secret: a prefix of any letters (PGPASSWORD,
# DB_PASSWORD, mysql.pwd only with a separator), and tokens only when they are named
# as credentials (next_token, page_token are pagination, not secrets).
_TOKEN_NAME = (
    r"(?:(?:[A-Za-z0-9]+[_.-])*(?:access|refresh|auth|bearer|session|api|private|oauth|id)"
    r"[_.-]?token|token)"
)
_KEY_WORDS = (
    r"(?:[A-Za-z0-9_.-]*" + _PW + r"|[A-Za-z0-9_.-]*secret|[A-Za-z0-9_.-]*api[_-]?key"
    r"|(?:[A-Za-z0-9]+[_.-])+pwd)"
)
# Generic assignments of credentials by name: quoted values, or NAME=value (no spaces,
# as in env files) of at least 8 characters; "secret = get_secret()" stays readable.
_CRED_NAME = (
    r"[A-Za-z0-9_.-]*(?:secret|api[_-]?key|access[_-]?key|auth[_-]?token|access[_-]?token"
    r"|api[_-]?token|private[_-]?token|client[_-]?secret)"
)


@dataclass(frozen=True, slots=True)
class Rule:
    """One format: its name, RE2 pattern and replacement (``\\1`` names a group)."""

    name: str
    pattern: str
    replacement: str = MASK


RULES: tuple[Rule, ...] = (
    # A key block (PEM, OpenSSH, PGP), or its start when the text was cut before END.
    Rule(
        "private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
    ),
    # "password": "x" in JSON text, also JSON inside a JSON string (\"password\": \"x\").
    Rule("password-json", r'(?i)(\\?"' + _KEY_WORDS + r'\\?"\s*:\s*\\?")[^"\\]*', r"\1" + MASK),
    Rule("token-json", r'(?i)(\\?"' + _TOKEN_NAME + r'\\?"\s*:\s*\\?")[^"\\]*', r"\1" + MASK),
    Rule("pwd-json", r'(?i)(\\?"pwd\\?"\s*:\s*\\?")[^"\\/~$][^"\\]*', r"\1" + MASK),
    Rule(
        "aws-secret-access-key",
        r"(?i)((?:aws[_.-]?)?secret[_.-]?access[_.-]?key|aws[_.-]?secret(?:[_.-]?key)?)"
        r"""(\\?["']?[ \t]*[=:][ \t]*\\?["']?)[A-Za-z0-9/+]{40}""",
        r"\1\2" + MASK,
    ),
    Rule("aws-access-key", r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    Rule("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    Rule("gitlab-token", r"\bgl(?:pat|dt|ptt|rt)-[0-9A-Za-z_-]{20,}"),
    Rule("anthropic-key", r"\bsk-ant-[a-z]{2,6}\d{2}-[A-Za-z0-9_-]{20,}"),
    Rule(
        "openai-key",
        r"\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9_-]{16,}T3BlbkFJ"
        r"[A-Za-z0-9_-]{16,})",
    ),
    Rule("slack-token", r"\bxox[abprse]-[0-9A-Za-z-]{10,}"),
    Rule("slack-app-token", r"\bxapp-\d-[A-Z0-9]+-\d+-[A-Za-z0-9]+"),
    Rule(
        "slack-webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{20,}"
    ),
    Rule("stripe-key", r"\b(?:sk|rk)_(?:test|live|prod)_[0-9A-Za-z]{10,99}\b"),
    Rule("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}"),
    Rule("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    Rule("pypi-token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),
    Rule("huggingface-token", r"\bhf_[A-Za-z]{34}\b"),
    Rule("jwt", r"\bey[A-Za-z0-9_-]{17,}\.ey[A-Za-z0-9_-]{17,}\.[A-Za-z0-9_-]*"),
    # Authorization: Bearer <token> / Basic <base64>: the scheme kept, the credential masked.
    Rule("auth-header", r"(?i)\b(bearer|basic)[ \t]+[A-Za-z0-9._~+/-]{16,}=*", r"\1 " + MASK),
    # scheme://user:password@host: the user and host kept.
    Rule(
        "url-password",
        r"""\b([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@"'<>]*:)[^\s/@"'<>]+@""",
        r"\1" + MASK + "@",
    ),
    # password=x, DB_PASSWORD="x", PGPASSWORD=x, export PASSWORD='x', MYSQL_PWD=x
    Rule(
        "password",
        r"(?i)\b([A-Za-z0-9_.-]*" + _PW + r"|(?:[A-Za-z0-9]+[_.-])+pwd)[ \t]*[=:][ \t]*" + _VALUE,
        r"\1=" + MASK,
    ),
    # A bare pwd only as pwd=x, and not a path: "PWD=/src", "pwd: command not found".
    Rule("pwd", r"(?i)\b(pwd)[ \t]*=[ \t]*" + _NOT_A_PATH, r"\1=" + MASK),
    Rule(
        "credential-assignment",
        r"(?i)\b(" + _CRED_NAME + r""")(=[^\s,;&"'$()][^\s,;&"'()]{7,}|[ \t]*[=:][ \t]*"""
        r"""(?:"[^"$\s][^"\s]{7,}"|'[^'$\s][^'\s]{7,}'))""",
        r"\1=" + MASK,
    ),
)
# Object keys whose string values are secrets wherever they appear (a bare "pwd" only
# when the value is not a path).
SECRET_KEY = r"(?i)^(?:" + _KEY_WORDS + r"|" + _TOKEN_NAME + r")$"
PWD_KEY = r"(?i)^pwd$"


class RuleError(ValueError):
    """An extra rule that is not a valid pattern or (pattern, replacement) pair."""


def _compile(pattern: str, where: str) -> Any:
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise RuleError(
            f"{where}: invalid regular expression {pattern!r}: {detail} (RE2 syntax: no "
            "backreferences or lookaround)"
        ) from None


@dataclass(frozen=True, slots=True)
class RuleSet:
    """Rules compiled once: the set that finds which hit, and each rule's regex."""

    rules: tuple[Rule, ...]
    compiled: tuple[Any, ...]
    scan: Any  # re2.Set over every rule
    joined: bool  # whether strings may be scanned together (see the module doc)

    @classmethod
    def build(cls, rules: Sequence[Rule], joined: bool) -> RuleSet:
        scan = re2.Set.SearchSet(_OPTIONS)
        compiled = []
        for i, rule in enumerate(rules):
            compiled.append(_compile(rule.pattern, f"rules[{i}] ({rule.name})"))
            scan.Add(rule.pattern)
        scan.Compile()
        return cls(tuple(rules), tuple(compiled), scan, joined)

    def hits(self, text: str) -> list[int]:
        return sorted(self.scan.Match(text) or ()) if text else []

    def apply(self, text: str, hits: Iterable[int] | None = None) -> str:
        """``text`` with the rules that hit it applied in order."""
        for i in self.hits(text) if hits is None else hits:
            text = self.compiled[i].sub(self.rules[i].replacement, text)
        return text


BUILTIN = RuleSet.build(RULES, joined=True)
_SECRET_KEY = _compile(SECRET_KEY, "SECRET_KEY")
_PWD_KEY = _compile(PWD_KEY, "PWD_KEY")


def extra_rules(spec: Any, where: str = "rules") -> tuple[Rule, ...]:
    """Rules from a list of patterns (masked whole) or [pattern, replacement] pairs."""
    if spec is None:
        return ()
    if not isinstance(spec, (list, tuple)):
        raise RuleError(f"{where} must be a list of patterns, got {type(spec).__name__}")
    out = []
    for i, item in enumerate(spec):
        if isinstance(item, str):
            pattern, replacement = item, MASK
        elif (
            isinstance(item, (list, tuple))
            and len(item) == 2
            and all(isinstance(x, str) for x in item)
        ):
            pattern, replacement = item
        else:
            raise RuleError(
                f"{where}[{i}] must be a pattern string or a [pattern, replacement] pair, "
                f"got {item!r:.80}"
            )
        _compile(pattern, f"{where}[{i}]")
        out.append(Rule(f"{where}[{i}]", pattern, replacement))
    return tuple(out)


@lru_cache(maxsize=64)
def rule_set(extra: tuple[Rule, ...]) -> RuleSet | None:
    """The compiled set of ``extra`` rules (once per process per list), or None."""
    return RuleSet.build(extra, joined=_joinable(extra)) if extra else None


def frozen_spec(spec: Any) -> Any:
    """A rules list as nested tuples (hashable: the cache key of its compiled set)."""
    if isinstance(spec, (list, tuple)):
        return tuple(frozen_spec(x) for x in spec)
    return spec


@lru_cache(maxsize=64)
def _compiled_spec(spec: Any, where: str) -> RuleSet | None:
    return rule_set(extra_rules(spec, where))


def compiled_extra(spec: Any, where: str = "rules") -> RuleSet | None:
    """The compiled set of a user's extra rules (once per process per list); RuleError
    for a list that is not patterns or [pattern, replacement] pairs."""
    if spec is None or spec == [] or spec == ():
        return None
    try:
        return _compiled_spec(frozen_spec(spec), where)
    except TypeError:  # unhashable: not a list of strings or pairs
        raise RuleError(
            f"{where} must be a list of pattern strings or [pattern, replacement] pairs, "
            f"got {spec!r:.80}"
        ) from None


# The key of a ``modify()`` payload that asks the hook chain to redact the payload
# itself (a passthrough hook's ``modify(redact(payload, ...))``, runtime/reach.py):
# {"rules": [...], "keys": [...] or None}. It only ever masks.
REDACT_REQUEST = "__harness_redact__"


def apply_request(payload: Any, request: Any) -> dict[str, Any]:
    """The changes a redaction request makes to ``payload`` (see REDACT_REQUEST)."""
    if not isinstance(request, dict) or not isinstance(payload, dict):
        raise RuleError(f"{REDACT_REQUEST} must be a dict of rules and keys")
    extra = compiled_extra(request.get("rules"), "redact(): rules")
    keys = request.get("keys")
    if keys is None:
        masked = redact(payload, extra)
        return {k: v for k, v in masked.items() if k not in payload or payload[k] is not v}
    if not isinstance(keys, (list, tuple)) or not all(isinstance(k, str) for k in keys):
        raise RuleError(f"redact(): keys must be a list of strings, got {keys!r:.80}")
    return redact_keys(payload, keys, extra)


def redact_text(text: str, extra: RuleSet | None = None) -> str:
    text = BUILTIN.apply(text)
    return extra.apply(text) if extra is not None else text


def secret_value(key: Any, value: Any) -> bool:
    """Whether ``value`` under object key ``key`` is a secret by the key's name."""
    if type(value) is not str or not value or type(key) is not str:
        return False
    if _SECRET_KEY.match(key):
        return True
    return _PWD_KEY.match(key) is not None and value[0] not in "/~$"


_CONTAINERS = (dict, list, tuple)
_ANCHORS = ("^", "$", "\\A", "\\z", "\\Z")


def _joinable(rules: tuple[Rule, ...]) -> bool:
    """Whether strings can be scanned joined by newlines: no rule anchors at the start
    or end of the text (which a joined scan would move)."""
    return not any(a in r.pattern for r in rules for a in _ANCHORS)


def _walk(value: Any) -> tuple[list[str], bool]:
    """Every string in ``value`` (values, and each distinct object key once), and
    whether a key names a secret holding a string. Iterative: no depth limit of its own."""
    strings: list[str] = []
    add = strings.append
    keys: dict[Any, bool] = {}  # key -> whether it names a secret
    named = False
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        if type(node) is dict:
            for k, v in node.items():
                hit = keys.get(k)
                if hit is None:
                    hit = keys[k] = type(k) is str and bool(
                        _SECRET_KEY.match(k) or _PWD_KEY.match(k)
                    )
                if hit and not named:
                    named = secret_value(k, v)
                t = type(v)
                if t is str:
                    add(v)
                elif t in _CONTAINERS:
                    push(v)
        else:
            for v in node:
                t = type(v)
                if t is str:
                    add(v)
                elif t in _CONTAINERS:
                    push(v)
    strings.extend(k for k in keys if type(k) is str)
    return strings, named


def _hit(strings: list[str], rules: RuleSet) -> bool:
    if rules.joined:
        return bool(rules.scan.Match("\n".join(strings)))
    match = rules.scan.Match
    return any(match(s) for s in strings if s)


class _Masker:
    """Rebuilds a value with every string masked (each distinct string once)."""

    __slots__ = ("extra", "memo")

    def __init__(self, extra: RuleSet | None) -> None:
        self.extra = extra
        self.memo: dict[str, str] = {}

    def text(self, s: str) -> str:
        done = self.memo.get(s)
        if done is None:
            done = self.memo[s] = redact_text(s, self.extra)
        return done

    def key(self, key: Any, done: dict[Any, Any], source: dict[Any, Any]) -> Any:
        """A key with secrets masked (``[REDACTED]``, ``[REDACTED]#2``...); a masked key
        never replaces another entry."""
        if type(key) is not str:
            return key
        masked = self.text(key)
        if masked == key:
            return key
        unique, n = masked, 2
        while unique in done or unique in source:
            unique, n = f"{masked}#{n}", n + 1
        return unique

    def rebuild(self, value: Any) -> Any:
        stack: list[tuple[Any, Any]] = []
        root = self._child(value, stack)
        while stack:
            src, dst = stack.pop()
            if type(src) is dict:
                for k, v in src.items():
                    new = MASK if secret_value(k, v) else self._child(v, stack)
                    dst[self.key(k, dst, src)] = new
            else:
                dst.extend(self._child(v, stack) for v in src)
        return root

    def _child(self, v: Any, stack: list[tuple[Any, Any]]) -> Any:
        t = type(v)
        if t is str:
            return self.text(v)
        if t is dict:
            new: Any = {}
        elif t is list or t is tuple:
            new = []
        else:
            return v
        stack.append((v, new))
        return new


def redact(value: Any, extra: RuleSet | None = None) -> Any:
    """``value`` with every secret masked in every string at any depth (object keys
    too), and the string values of keys named like secrets; ``value`` itself (the same
    object) when there is nothing to mask. Tuples come back as lists."""
    if type(value) is str:
        return redact_text(value, extra)
    if type(value) not in _CONTAINERS:
        return value
    strings, named = _walk(value)
    if not (named or _hit(strings, BUILTIN) or (extra is not None and _hit(strings, extra))):
        return value
    return _Masker(extra).rebuild(value)


def redact_keys(payload: Any, keys: Sequence[str], extra: RuleSet | None = None) -> dict[str, Any]:
    """Of ``payload``'s ``keys``, those whose value had something masked, masked."""
    out = {}
    for key in keys:
        if key in payload:
            value = payload[key]
            masked = redact(value, extra)
            if masked is not value and masked != value:
                out[key] = masked
    return out
