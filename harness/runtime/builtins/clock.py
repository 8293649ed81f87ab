"""The ``time`` family: ``now``, ``weekday``, ``parse``, ``format`` with IANA zones.

Zones come from :mod:`zoneinfo`; the ``tzdata`` package supplies the database where
the system has none (slim containers, Windows), so a zone name means the same thing
everywhere. ``clock.fixed`` in harness.md (what a test file's ``now:`` sets) freezes
the clock: every ``time.now``/``time.weekday`` returns that instant.
"""

from __future__ import annotations

import datetime as _dt
import re
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from harness.artifacts.problems import suggest
from harness.errors import BuiltinError
from harness.runtime.context import CallContext

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# strftime/strptime directives that mean the same on every platform.
_DIRECTIVES = frozenset("aAwdbBmyYHIpMSfzZjUWcxX%GuVeT")
_DIRECTIVE = re.compile(r"%(.)?", re.S)


@lru_cache(maxsize=1)
def _zone_names() -> tuple[str, ...]:
    return tuple(sorted(available_timezones()))


@lru_cache(maxsize=256)
def zone(name: str, fn: str = "time") -> _dt.tzinfo:
    """The zone called ``name`` (``UTC`` or an IANA name), or a clear error."""
    if name in ("UTC", "Z", "utc"):
        return _dt.UTC
    try:
        if not name or name.startswith(("/", ".")) or ".." in name:
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        hint = suggest(name, _zone_names())
        raise BuiltinError(
            f'{fn}: unknown time zone "{name}"{hint}; use an IANA name such as '
            '"Europe/Berlin", "America/New_York" or "UTC"'
        ) from None


def _tz(fn: str, tz: Any) -> _dt.tzinfo | None:
    if tz is None:
        return None
    if not isinstance(tz, str):
        raise BuiltinError(
            f'{fn}: tz must be a string such as "Europe/Berlin", got {type(tz).__name__}'
        )
    return zone(tz, fn)


def parse_instant(text: str) -> _dt.datetime:
    """An RFC 3339 / ISO 8601 text as an aware datetime (naive text is UTC).

    Raises ValueError with the reason; used for ``clock.fixed`` too.
    """
    value = _dt.datetime.fromisoformat(text.strip())
    return value if value.tzinfo is not None else value.replace(tzinfo=_dt.UTC)


def _check_format(fn: str, fmt: Any) -> str:
    if not isinstance(fmt, str):
        raise BuiltinError(
            f'{fn}: format must be a string such as "%Y-%m-%d %H:%M", got {type(fmt).__name__}'
        )
    for m in _DIRECTIVE.finditer(fmt):
        code = m.group(1)
        if code is None:
            raise BuiltinError(
                f'{fn}: format "{fmt}" ends with a lone "%"; write "%%" for a percent sign'
            )
        if code not in _DIRECTIVES:
            raise BuiltinError(
                f'{fn}: format "{fmt}" has the unknown directive "%{code}"; '
                "use strftime directives such as %Y %m %d %H %M %S %z %a %A %b"
            )
    return fmt


def _current(ctx: CallContext) -> _dt.datetime:
    clock = getattr(ctx.config, "clock", None)
    fixed = getattr(clock, "fixed", None)
    if fixed:
        return parse_instant(fixed)
    return _dt.datetime.now(_dt.UTC)


def rfc3339(value: _dt.datetime) -> str:
    """Milliseconds, ``Z`` for UTC, the offset (``+01:00``) otherwise."""
    text = value.isoformat(timespec="milliseconds")
    return (
        text[:-6] + "Z"
        if value.utcoffset() == _dt.timedelta(0) and value.tzinfo is _dt.UTC
        else text
    )


def time_now(ctx: CallContext, tz: Any = None) -> str:
    zone_ = _tz("time.now", tz)
    now = _current(ctx)
    return rfc3339(now.astimezone(zone_ or _dt.UTC))


def time_weekday(ctx: CallContext, tz: Any = None) -> str:
    zone_ = _tz("time.weekday", tz)
    return WEEKDAYS[_current(ctx).astimezone(zone_ or _dt.UTC).weekday()]


def _fields(value: _dt.datetime) -> dict[str, Any]:
    offset = value.utcoffset() or _dt.timedelta(0)
    return {
        "text": rfc3339(value),
        "unix": value.timestamp(),
        "year": value.year,
        "month": value.month,
        "day": value.day,
        "hour": value.hour,
        "minute": value.minute,
        "second": value.second,
        "weekday": WEEKDAYS[value.weekday()],
        "offset_minutes": int(offset.total_seconds() // 60),
    }


def time_parse(ctx: CallContext, text: Any, format: Any = None, tz: Any = None) -> dict[str, Any]:
    if not isinstance(text, str):
        raise BuiltinError(f"time.parse: text must be a string, got {type(text).__name__}")
    zone_ = _tz("time.parse", tz)
    if format is None:
        try:
            value = _dt.datetime.fromisoformat(text.strip())
        except ValueError:
            raise BuiltinError(
                f'time.parse: "{text:.100}" is not an RFC 3339 time such as '
                '"2026-01-05T09:00:00Z"; pass format= for other layouts'
            ) from None
    else:
        fmt = _check_format("time.parse", format)
        try:
            value = _dt.datetime.strptime(text, fmt)
        except ValueError as exc:
            raise BuiltinError(
                f'time.parse: "{text:.100}" does not match format "{fmt}" ({exc})'
            ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone_ or _dt.UTC)
    elif zone_ is not None:
        value = value.astimezone(zone_)
    return _fields(value)


def _instant(fn: str, value: Any) -> _dt.datetime:
    if isinstance(value, bool):
        raise BuiltinError(f"{fn}: value must be an RFC 3339 string or a Unix time, got bool")
    if isinstance(value, (int, float)):
        return _dt.datetime.fromtimestamp(value, _dt.UTC)
    if isinstance(value, dict) and "text" in value:
        value = value["text"]
    if isinstance(value, str):
        try:
            return parse_instant(value)
        except ValueError:
            raise BuiltinError(
                f'{fn}: "{value:.100}" is not an RFC 3339 time such as "2026-01-05T09:00:00Z"'
            ) from None
    raise BuiltinError(
        f"{fn}: value must be an RFC 3339 string or a Unix time, got {type(value).__name__}"
    )


def time_format(ctx: CallContext, value: Any = None, format: Any = None, tz: Any = None) -> str:
    zone_ = _tz("time.format", tz)
    instant = _current(ctx) if value is None else _instant("time.format", value)
    if zone_ is not None:
        instant = instant.astimezone(zone_)
    if format is None:
        return rfc3339(instant)
    return instant.strftime(_check_format("time.format", format))


FUNCTIONS = {
    "time.now": time_now,
    "time.weekday": time_weekday,
    "time.parse": time_parse,
    "time.format": time_format,
}
