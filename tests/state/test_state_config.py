"""The state limits of harness.md (``state.max_bytes``, ``max_keys``,
``max_session_bytes``, ``value_ttl_s``, ``spill_ttl_s``): validated, and what serve uses."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from harness.cli.main import cli
from harness.config import StateConfig, parse_config
from harness.state.limits import DEFAULT, from_config


def validate(tmp_path: Path, state: str) -> tuple[int, str]:
    (tmp_path / "harness.md").write_text(f"---\nstate:\n{state}---\nA project.\n")
    r = CliRunner().invoke(cli, ["validate", "--root", str(tmp_path)])
    return r.exit_code, r.stdout + (r.stderr if r.stderr_bytes else "")


def test_the_defaults_are_the_limits_defaults() -> None:
    assert from_config(StateConfig()) == DEFAULT


def test_state_limits_are_read(tmp_path: Path) -> None:
    state = {"max_bytes": 4096, "max_keys": 10, "max_session_bytes": 1024, "value_ttl_s": 7200}
    config, problems = parse_config({"state": state}, tmp_path)
    assert problems == []
    limits = from_config(config.state)
    assert (limits.max_bytes, limits.max_items, limits.session_cache_bytes) == (4096, 10, 1024)
    assert (limits.value_ttl_s, limits.spill_ttl_s) == (7200, 3600)


def test_bad_state_limits_fail_validate_naming_the_key(tmp_path: Path) -> None:
    code, out = validate(tmp_path, "  max_bytes: 0\n")
    assert code != 0 and "harness.md:3" in out and "state.max_bytes must be > 0" in out, out
    code, out = validate(tmp_path, '  max_keys: "many"\n')
    assert code != 0 and "state.max_keys must be an integer" in out, out
    code, out = validate(tmp_path, "  max_bytes: 1000\n  max_session_bytes: 2000\n")
    assert code != 0 and "harness.md:4" in out, out
    assert "state.max_session_bytes (2000) is over state.max_bytes (1000)" in out, out
    code, out = validate(tmp_path, "  value_ttl_s: 60\n")
    assert code != 0 and "state.spill_ttl_s (3600) is over state.value_ttl_s (60)" in out, out
    code, out = validate(tmp_path, "  value_ttl_s: 7200\n  max_keys: 50\n")
    assert code == 0, out
