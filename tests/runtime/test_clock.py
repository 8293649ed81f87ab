"""The ``time`` family: zones, weekday, parse/format, the fixed clock (issue 14 item 5)."""

from __future__ import annotations

import datetime as dt
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

import harness
from harness.config import ClockConfig, Config, parse_config
from harness.errors import BuiltinError
from harness.runtime.builtins import clock
from harness.runtime.context import CallContext

FIXED = "2026-01-05T09:00:00Z"  # a Monday


def ctx(fixed: str | None = FIXED) -> CallContext:
    return CallContext(config=replace(Config(), clock=ClockConfig(fixed=fixed)))


def test_now_utc_and_zones_with_fixed_clock() -> None:
    c = ctx()
    assert clock.time_now(c) == "2026-01-05T09:00:00.000Z"
    assert clock.time_now(c, "Europe/Berlin") == "2026-01-05T10:00:00.000+01:00"
    assert clock.time_now(c, "America/New_York") == "2026-01-05T04:00:00.000-05:00"
    assert clock.time_now(c, "UTC") == "2026-01-05T09:00:00.000Z"
    summer = ctx("2026-07-01T12:00:00+00:00")
    assert clock.time_now(summer, "Europe/Berlin") == "2026-07-01T14:00:00.000+02:00"


def test_real_clock_is_close_to_now() -> None:
    got = dt.datetime.fromisoformat(clock.time_now(ctx(None)))
    assert abs((got - dt.datetime.now(dt.UTC)).total_seconds()) < 5


def test_weekday_depends_on_zone() -> None:
    late = ctx("2026-01-04T23:30:00Z")  # Sunday in UTC, Monday in Berlin, Sunday in LA
    assert clock.time_weekday(late) == "Sunday"
    assert clock.time_weekday(late, "Europe/Berlin") == "Monday"
    assert clock.time_weekday(late, "America/Los_Angeles") == "Sunday"


def test_bad_zone_names_have_clear_errors() -> None:
    with pytest.raises(
        BuiltinError,
        match=r'time.now: unknown time zone "Europe/Berln" '
        r'\(did you mean "Europe/Berlin"\?\)',
    ):
        clock.time_now(ctx(), "Europe/Berln")
    for bad in ("", "../etc/passwd", "/etc/localtime", "Nowhere/Atall"):
        with pytest.raises(BuiltinError, match="unknown time zone"):
            clock.time_weekday(ctx(), bad)
    with pytest.raises(BuiltinError, match="tz must be a string"):
        clock.time_now(ctx(), 5)


def test_parse_rfc3339_and_formats() -> None:
    c = ctx()
    got = clock.time_parse(c, "2026-01-05T10:00:00+01:00")
    assert got["unix"] == dt.datetime(2026, 1, 5, 9, tzinfo=dt.UTC).timestamp()
    assert (got["hour"], got["weekday"], got["offset_minutes"]) == (10, "Monday", 60)
    local = clock.time_parse(c, "05.01.2026 10:00", "%d.%m.%Y %H:%M", "Europe/Berlin")
    assert local["text"] == "2026-01-05T10:00:00.000+01:00"
    assert local["unix"] == got["unix"]
    naive = clock.time_parse(c, "2026-01-05 09:00")
    assert naive["text"] == "2026-01-05T09:00:00.000Z"


def test_parse_errors() -> None:
    with pytest.raises(BuiltinError, match='"yesterday" is not an RFC 3339 time'):
        clock.time_parse(ctx(), "yesterday")
    with pytest.raises(BuiltinError, match=r'does not match format "%Y-%m-%d"'):
        clock.time_parse(ctx(), "05/01/2026", "%Y-%m-%d")
    with pytest.raises(BuiltinError, match=r'unknown directive "%Q"'):
        clock.time_parse(ctx(), "2026", "%Q")
    with pytest.raises(BuiltinError, match='lone "%"'):
        clock.time_format(ctx(), FIXED, "100%")


def test_format() -> None:
    c = ctx()
    assert clock.time_format(c) == "2026-01-05T09:00:00.000Z"
    assert clock.time_format(c, FIXED, "%A %H:%M", "Asia/Tokyo") == "Monday 18:00"
    assert clock.time_format(c, 0, "%Y-%m-%d") == "1970-01-01"
    assert (
        clock.time_format(c, clock.time_parse(c, FIXED), tz="Europe/Berlin")
        == "2026-01-05T10:00:00.000+01:00"
    )
    with pytest.raises(BuiltinError, match="not an RFC 3339 time"):
        clock.time_format(c, "soon")
    with pytest.raises(BuiltinError, match="got bool"):
        clock.time_format(c, True)


def test_clock_config_is_validated(tmp_path: Path) -> None:
    cfg, problems = parse_config({"clock": {"fixed": FIXED}}, tmp_path)
    assert cfg.clock.fixed == FIXED and not problems
    cfg, problems = parse_config({"clock": {"fixed": "next monday"}}, tmp_path)
    assert cfg.clock.fixed is None
    assert [p.message for p in problems] == [
        'config clock.fixed "next monday" is not an RFC 3339 time; write it like '
        '"2026-01-05T09:00:00Z"'
    ]
    _, problems = parse_config({"clock": {"fixd": FIXED}}, tmp_path)
    assert 'did you mean "fixed"' in problems[0].message


@pytest.mark.parametrize("isolation", ["process", "inprocess"])
def test_fixed_clock_reaches_scripts_and_hooks(tmp_path: Path, isolation: str) -> None:
    (tmp_path / "harness.md").write_text(
        textwrap.dedent(f"""\
        ---
        clock: {{fixed: "2026-01-09T16:30:00Z"}}
        runtime: {{isolation: {isolation}}}
        ---
        """)
    )
    tools = tmp_path / ".harness" / "tools"
    hooks = tmp_path / ".harness" / "hooks"
    tools.mkdir(parents=True)
    hooks.mkdir(parents=True)
    (tools / "stamp.md").write_text(
        textwrap.dedent("""\
        ---
        script: |
          def run(args):
              return {"utc": time.now(), "berlin": time.now("Europe/Berlin"),
                      "day": time.weekday("Europe/Berlin")}
        ---
        Time stamps.
        """)
    )
    (hooks / "no_friday_deploys.md").write_text(
        textwrap.dedent("""\
        ---
        event: tool.pre
        script: |
          def handle(event, payload):
              if payload["name"] == "deploy" and time.weekday("Europe/Berlin") == "Friday":
                  return block("no deploys on Friday")
              return allow()
        ---
        """)
    )
    (tools / "deploy.md").write_text("---\nscript: |\n  def run(args):\n      return 1\n---\n")
    with harness.load(tmp_path) as h:
        r = h.call("stamp", {})
        assert r.value == {
            "utc": "2026-01-09T16:30:00.000Z",
            "berlin": "2026-01-09T17:30:00.000+01:00",
            "day": "Friday",
        }
        r = h.call("deploy", {})
        assert r.blocked_by == "no_friday_deploys"


def test_validate_knows_the_new_functions(tmp_path: Path) -> None:
    tools = tmp_path / ".harness" / "tools"
    tools.mkdir(parents=True)
    (tools / "t.md").write_text(
        textwrap.dedent("""\
        ---
        script: |
          def run(args):
              return [time.weekday(), time.parse("2026-01-05"), time.format(None, "%Y")]
        ---
        """)
    )
    assert [p for p in harness.check(tmp_path) if p.severity == "error"] == []
