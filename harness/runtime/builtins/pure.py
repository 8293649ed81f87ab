"""Pure helpers ai-harness scripts use: ``re.find_all/replace``, ``string.*``, ``hash.md5``,
``base64``, ``uuid.v4``, ``math``, ``url``. No I/O, so hooks get them too.

Registered into the families of ``text.py`` by dotted name (one module per job; the
older names stay where they are).
"""

from __future__ import annotations

import base64 as _b64
import binascii
import hashlib
import math as _math
import re
import uuid as _uuid
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import re2

from harness.errors import BuiltinError
from harness.runtime.builtins.text import _compile, _int, _str
from harness.runtime.context import CallContext

# -- re ---------------------------------------------------------------------------------


def re_find_all(ctx: CallContext, p: Any, s: Any) -> list[str]:
    """Every full match (never group lists: ai-harness's shape)."""
    compiled = _compile(_str("re.find_all", "p", p))
    return [m.group(0) for m in compiled.finditer(_str("re.find_all", "s", s))]


_DOLLAR = re.compile(r"\$(?:\{(\w+)\}|(\d+)|(\$))")


def re_replace(ctx: CallContext, p: Any, repl: Any, s: Any) -> str:
    """Replace every match; ``$1`` / ``${name}`` name groups, ``$$`` is a dollar sign."""
    compiled = _compile(_str("re.replace", "p", p))
    template = _str("re.replace", "repl", repl)
    text = _str("re.replace", "s", s)

    def expand(m: Any) -> str:
        def one(ref: re.Match[str]) -> str:
            if ref.group(3):
                return "$"
            key = ref.group(1) or ref.group(2)
            try:
                group = m.group(int(key) if key.isdigit() else key)
            except (IndexError, KeyError, re2.error):
                raise BuiltinError(f"re.replace: the pattern has no group {key!r}") from None
            return group or ""

        return _DOLLAR.sub(one, template)

    return compiled.sub(expand, text)


# -- string ------------------------------------------------------------------------------


def string_upper(ctx: CallContext, s: Any) -> str:
    return _str("string.upper", "s", s).upper()


def string_lower(ctx: CallContext, s: Any) -> str:
    return _str("string.lower", "s", s).lower()


def string_trim(ctx: CallContext, s: Any, chars: Any = None) -> str:
    s = _str("string.trim", "s", s)
    return s.strip() if chars is None else s.strip(_str("string.trim", "chars", chars))


def string_split(ctx: CallContext, s: Any, sep: Any = None) -> list[str]:
    s = _str("string.split", "s", s)
    if sep is None:
        return s.split()
    sep = _str("string.split", "sep", sep)
    if not sep:
        return list(s)
    return s.split(sep)


def string_join(ctx: CallContext, parts: Any, sep: Any = "") -> str:
    sep = _str("string.join", "sep", sep)
    if not isinstance(parts, list):
        raise BuiltinError(
            f"string.join: parts must be a list of strings, got {type(parts).__name__}"
        )
    for i, part in enumerate(parts):
        _str("string.join", f"parts[{i}]", part)
    return sep.join(parts)


def _pad(name: str, s: Any, width: Any, char: Any) -> tuple[str, int, str]:
    s = _str(name, "s", s)
    width = _int(name, "n", width)
    char = _str(name, "char", char)
    if len(char) != 1:
        raise BuiltinError(f"{name}: char must be one character, got {char!r}")
    if width > 1_000_000:
        raise BuiltinError(f"{name}: n must be at most 1000000, got {width}")
    return s, width, char


def string_pad_left(ctx: CallContext, s: Any, n: Any, char: Any = " ") -> str:
    s, width, c = _pad("string.pad_left", s, n, char)
    return s.rjust(width, c)


def string_pad_right(ctx: CallContext, s: Any, n: Any, char: Any = " ") -> str:
    s, width, c = _pad("string.pad_right", s, n, char)
    return s.ljust(width, c)


# -- hash, base64, uuid --------------------------------------------------------------------


def hash_md5(ctx: CallContext, s: Any) -> str:
    return hashlib.md5(_str("hash.md5", "s", s).encode("utf-8"), usedforsecurity=False).hexdigest()


def base64_encode(ctx: CallContext, s: Any) -> str:
    return _b64.b64encode(_str("base64.encode", "s", s).encode("utf-8")).decode("ascii")


def base64_decode(ctx: CallContext, s: Any) -> str:
    s = _str("base64.decode", "s", s)
    try:
        data = _b64.b64decode(s + "=" * (-len(s) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BuiltinError(f"base64.decode: not valid base64: {exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BuiltinError("base64.decode: the decoded bytes are not UTF-8 text") from None


def uuid_v4(ctx: CallContext) -> str:
    return str(_uuid.uuid4())


# -- math ------------------------------------------------------------------------------------


def _number(name: str, value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BuiltinError(f"{name}: expected a number, got {type(value).__name__}")
    return value


def math_abs(ctx: CallContext, x: Any) -> int | float:
    return abs(_number("math.abs", x))


def _values(name: str, args: tuple[Any, ...]) -> list[int | float]:
    items = list(args[0]) if len(args) == 1 and isinstance(args[0], list) else list(args)
    if not items:
        raise BuiltinError(f"{name}: needs at least one number")
    return [_number(name, v) for v in items]


def math_min(ctx: CallContext, *args: Any) -> int | float:
    return min(_values("math.min", args))


def math_max(ctx: CallContext, *args: Any) -> int | float:
    return max(_values("math.max", args))


def _whole(name: str, fn: Any, x: Any) -> int:
    value = _number(name, x)
    if isinstance(value, float) and not _math.isfinite(value):
        raise BuiltinError(f"{name}: {value} has no integer value")
    return int(fn(value))


def math_floor(ctx: CallContext, x: Any) -> int:
    return _whole("math.floor", _math.floor, x)


def math_ceil(ctx: CallContext, x: Any) -> int:
    return _whole("math.ceil", _math.ceil, x)


# -- url ---------------------------------------------------------------------------------------


def url_parse(ctx: CallContext, s: Any) -> dict[str, Any]:
    """ai-harness's shape: scheme, host, hostname, port, path, raw_query, fragment,
    query (name -> list of values), string, and username/password when present."""
    s = _str("url.parse", "s", s)
    try:
        parts = urlsplit(s)
        port = parts.port
    except ValueError as exc:
        raise BuiltinError(f"url.parse: {exc}") from None
    out: dict[str, Any] = {
        "scheme": parts.scheme,
        "host": parts.netloc.rpartition("@")[2],
        "hostname": parts.hostname or "",
        "port": "" if port is None else str(port),
        "path": parts.path,
        "raw_query": parts.query,
        "fragment": parts.fragment,
        "query": {k: v for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
        "string": s,
    }
    if parts.username is not None:
        out["username"] = parts.username
    if parts.password is not None:
        out["password"] = parts.password
    return out


def url_encode(ctx: CallContext, params: Any) -> str:
    """A query string from a dict (values: strings, numbers, booleans or lists of them),
    keys sorted as ai-harness (Go's url.Values) sorts them."""
    if not isinstance(params, dict):
        raise BuiltinError(f"url.encode: params must be a dict, got {type(params).__name__}")
    pairs: list[tuple[str, str]] = []
    for key in sorted(params):
        value = params[key]
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, bool):
                item = "true" if item else "false"
            elif not isinstance(item, (str, int, float)):
                raise BuiltinError(
                    f"url.encode: value of {key!r} must be a string, number, "
                    f"boolean or a list of them, got {type(item).__name__}"
                )
            pairs.append((str(key), str(item)))
    return urlencode(pairs)


FUNCTIONS = {
    "re.find_all": re_find_all,
    "re.replace": re_replace,
    "string.upper": string_upper,
    "string.lower": string_lower,
    "string.trim": string_trim,
    "string.split": string_split,
    "string.join": string_join,
    "string.pad_left": string_pad_left,
    "string.pad_right": string_pad_right,
    "hash.md5": hash_md5,
    "base64.encode": base64_encode,
    "base64.decode": base64_decode,
    "uuid.v4": uuid_v4,
    "math.abs": math_abs,
    "math.min": math_min,
    "math.max": math_max,
    "math.floor": math_floor,
    "math.ceil": math_ceil,
    "url.parse": url_parse,
    "url.encode": url_encode,
}
