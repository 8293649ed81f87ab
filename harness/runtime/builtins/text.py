"""Pure built-ins: ``json``, ``re`` (RE2), ``string``, ``hash``, ``time``."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json as _json
from functools import lru_cache
from typing import Any

import re2

from harness.errors import BuiltinError
from harness.runtime import nesting
from harness.runtime.context import CallContext


def _str(name: str, arg: str, value: Any) -> str:
    if not isinstance(value, str):
        raise BuiltinError(f"{name}: {arg} must be a string, got {type(value).__name__}")
    return value


def _int(name: str, arg: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BuiltinError(f"{name}: {arg} must be an integer, got {type(value).__name__}")
    return value


# -- json ---------------------------------------------------------------------------


def json_encode(ctx: CallContext, v: Any) -> str:
    try:
        return _json.dumps(v, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise BuiltinError(f"json.encode: {exc}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_decode(ctx: CallContext, s: Any) -> Any:
    s = _str("json.decode", "s", s)
    try:
        return _json.loads(s, parse_constant=_no_constant)
    except RecursionError:  # deeper than Python decodes: the rule's words, no path
        raise BuiltinError(nesting.too_deep_to_decode("the value json.decode() returned")) from None
    except ValueError as exc:
        raise BuiltinError(f"json.decode: invalid JSON: {exc}") from None


# -- re (RE2: linear time, no backreferences) -----------------------------------------

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


@lru_cache(maxsize=512)
def _compile(pattern: str) -> Any:
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise BuiltinError(
            f"invalid regular expression {pattern!r}: {detail} (patterns use RE2 syntax: no "
            "backreferences or lookaround)"
        ) from None


def _pattern(name: str, p: Any) -> Any:
    return _compile(_str(name, "p", p))


def _match_dict(m: Any) -> dict[str, Any] | None:
    if m is None:
        return None
    return {
        "match": m.group(0),
        "groups": list(m.groups()),
        "named": m.groupdict(),
        "start": m.start(),
        "end": m.end(),
    }


def re_match(ctx: CallContext, p: Any, s: Any) -> dict[str, Any] | None:
    return _match_dict(_pattern("re.match", p).match(_str("re.match", "s", s)))


def re_search(ctx: CallContext, p: Any, s: Any) -> dict[str, Any] | None:
    return _match_dict(_pattern("re.search", p).search(_str("re.search", "s", s)))


def re_findall(ctx: CallContext, p: Any, s: Any) -> list[Any]:
    found = _pattern("re.findall", p).findall(_str("re.findall", "s", s))
    return [list(f) if isinstance(f, tuple) else f for f in found]


def re_sub(ctx: CallContext, p: Any, repl: Any, s: Any, count: Any = 0) -> str:
    compiled = _pattern("re.sub", p)
    repl = _str("re.sub", "repl", repl)
    try:
        return compiled.sub(repl, _str("re.sub", "s", s), count=_int("re.sub", "count", count))
    except re2.error as exc:
        raise BuiltinError(f"re.sub: {exc}") from None


def re_split(ctx: CallContext, p: Any, s: Any) -> list[str]:
    return list(_pattern("re.split", p).split(_str("re.split", "s", s)))


# -- string, hash, time ---------------------------------------------------------------


def string_truncate(ctx: CallContext, s: Any, max_chars: Any, marker: Any = "…") -> str:
    s = _str("string.truncate", "s", s)
    max_chars = _int("string.truncate", "max_chars", max_chars)
    marker = _str("string.truncate", "marker", marker)
    if max_chars < 0:
        raise BuiltinError("string.truncate: max_chars must be >= 0")
    if len(s) <= max_chars:
        return s
    if len(marker) >= max_chars:
        return marker[:max_chars]
    return s[: max_chars - len(marker)] + marker


def string_byte_len(ctx: CallContext, s: Any) -> int:
    """Length of ``s`` in UTF-8 bytes (``len`` counts characters)."""
    return len(_str("string.byte_len", "s", s).encode("utf-8"))


def hash_sha256(ctx: CallContext, s: Any) -> str:
    return hashlib.sha256(_str("hash.sha256", "s", s).encode("utf-8")).hexdigest()


def time_now(ctx: CallContext) -> str:
    now = _dt.datetime.now(_dt.UTC)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


FUNCTIONS = {
    "json.encode": json_encode,
    "json.decode": json_decode,
    "re.match": re_match,
    "re.search": re_search,
    "re.findall": re_findall,
    "re.sub": re_sub,
    "re.split": re_split,
    "string.truncate": string_truncate,
    "string.byte_len": string_byte_len,
    "hash.sha256": hash_sha256,
    "time.now": time_now,
}
