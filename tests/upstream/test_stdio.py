"""Upstream servers over stdio, through the whole pipeline, against real MCP servers."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from upstream_helpers import INPROCESS, TIME_SERVER, sdk, server_pids, write_project

import harness

BLOCK_CONVERT = """---
event: tool.pre
when: payload["name"] == "time.convert_time"
script: |
  def handle(event, payload):
      return block("converting times is not allowed here")
---
"""

REDACT = """---
event: tool.post
script: |
  def handle(event, payload):
      r = payload["result"]
      s = r if type(r) == "string" else json.encode(r)
      if "sk-live-" in s:
          return modify({"result": re.sub("sk-live-[0-9A-Za-z]+", "[REDACTED]", s)})
      return allow()
---
"""

BAD_MODIFY = """---
event: tool.pre
when: payload["name"] == "sdk.add"
script: |
  def handle(event, payload):
      return modify({"arguments": {"a": "one", "b": 2}})
---
"""


def wait_for(predicate, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Harness]:
    """One project with the SDK server and nothing else, for the tests below that only
    list and call its tools (no hook, no setting, nothing a call changes): one server
    process for all of them instead of one each."""
    folder = tmp_path_factory.mktemp("plain")
    root = write_project(folder, {"sdk": sdk(folder)}, config=INPROCESS)
    h = harness.load(root)
    yield h
    h.close()


def test_sdk_tools_are_registry_tools_with_schemas(plain: harness.Harness) -> None:
    h = plain
    tools = h.connect_tools()
    assert "sdk.echo" in tools and "sdk.write_once" in tools
    add = tools["sdk.add"]
    assert add.description == "Add two integers."
    assert add.input_schema["required"] == ["a", "b"]
    assert add.returns is not None
    assert tools["sdk.write_once"].annotations == {"destructive": True, "idempotent": False}
    (mcp_def,) = h.definitions("mcp", names=["sdk.write_once"])
    assert mcp_def["annotations"]["idempotentHint"] is False
    (oa,) = h.definitions("openai", names=["sdk.echo"])
    assert oa["function"]["name"] == "sdk_echo"
    r = h.call("sdk.add", {"a": 2, "b": 3})
    assert not r.is_error and r.value == {"sum": 5}


def test_arguments_are_validated_before_the_call(plain: harness.Harness) -> None:
    h = plain
    r = h.call("sdk.add", {"a": "x"})
    assert r.is_error
    assert r.error == (
        'invalid arguments for tool "sdk.add": $.a: "x" is not of type '
        '"integer"; $.b: "b" is a required property'
    )


def test_upstream_is_error_is_an_error_result(plain: harness.Harness) -> None:
    h = plain
    r = h.call("sdk.fail", {"reason": "because"})
    assert r.is_error and "failing on purpose: because" in r.error
    assert not h.call("sdk.echo", {"text": "still up"}).is_error


def test_third_party_time_server(tmp_path: Path, make) -> None:
    h = make(tmp_path, {"time": {"command": [TIME_SERVER]}}, config=INPROCESS)
    assert {"time.get_current_time", "time.convert_time"} <= set(h.connect_tools())
    r = h.call("time.get_current_time", {"timezone": "UTC"})
    assert not r.is_error, r.error
    assert r.value["timezone"] == "UTC" and "datetime" in r.value
    bad = h.call("time.get_current_time", {})
    assert bad.error == (
        'invalid arguments for tool "time.get_current_time": $.timezone: '
        '"timezone" is a required property'
    )


def test_hook_blocks_one_upstream_tool(tmp_path: Path, make) -> None:
    h = make(
        tmp_path,
        {"time": {"command": [TIME_SERVER]}},
        hooks={"no_convert": BLOCK_CONVERT},
        config=INPROCESS,
    )
    r = h.call(
        "time.convert_time",
        {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"},
    )
    assert r.is_error and r.blocked_by == "no_convert"
    assert r.error == 'blocked by hook "no_convert": converting times is not allowed here'
    assert not h.call("time.get_current_time", {"timezone": "UTC"}).is_error


def test_post_hook_redacts_upstream_output(tmp_path: Path, make) -> None:
    h = make(tmp_path, {"sdk": sdk(tmp_path)}, hooks={"redact": REDACT}, config=INPROCESS)
    r = h.call("sdk.secret", {})
    assert not r.is_error
    assert "sk-live" not in r.text and "[REDACTED]" in r.text


def test_modified_arguments_are_validated_again(tmp_path: Path, make) -> None:
    h = make(tmp_path, {"sdk": sdk(tmp_path)}, hooks={"bad": BAD_MODIFY}, config=INPROCESS)
    r = h.call("sdk.add", {"a": 1, "b": 2})
    assert r.is_error and r.error.startswith(
        'hook "bad" failed: modified arguments are invalid for tool "sdk.add": $.a: '
    )


def test_large_upstream_output_is_capped_and_spilled(plain: harness.Harness) -> None:
    h = plain
    r = h.call("sdk.big", {"kb": 300})
    assert r.truncated and len(r.text.encode()) <= 65536
    assert "[output truncated at 65536 bytes]" in r.text
    ref = r.text.split('read_output(ref="')[1].split('"')[0]
    page = h.call("read_output", {"ref": ref, "offset": 70000, "limit": 1000})
    assert not page.is_error and "0123456789abcdef" in page.text


def test_call_many_mixes_upstream_servers(tmp_path: Path, make) -> None:
    h = make(tmp_path, {"sdk": sdk(tmp_path), "time": {"command": [TIME_SERVER]}}, config=INPROCESS)
    calls = [
        harness.ToolCall(id=str(i), name="sdk.echo", arguments={"text": f"t{i}"}) for i in range(4)
    ]
    calls.append(
        harness.ToolCall(id="t", name="time.get_current_time", arguments={"timezone": "UTC"})
    )
    results = h.call_many(calls)
    assert [r.call_id for r in results] == ["0", "1", "2", "3", "t"]
    assert [r.value for r in results[:4]] == [{"result": f"t{i}"} for i in range(4)]
    assert results[4].value["timezone"] == "UTC"


def test_audit_records_upstream_calls(tmp_path: Path, make) -> None:
    h = make(
        tmp_path,
        {"sdk": sdk(tmp_path)},
        config=INPROCESS + "audit: {path: .harness/state/audit.jsonl}\n",
    )
    h.call("sdk.echo", {"text": "hi"})
    h.close()
    events = [
        json.loads(line)
        for line in (tmp_path / ".harness/state/audit.jsonl").read_text().splitlines()
    ]
    mine = [e["event"] for e in events if e.get("tool") == "sdk.echo"]
    assert mine == ["tool.resolve", "tool.validate", "tool.execute", "tool.result"]


def test_tools_allow_and_deny_filter_upstream_names(tmp_path: Path, make) -> None:
    h = make(
        tmp_path,
        {"sdk": sdk(tmp_path, tools={"allow": ["e*", "a*"], "deny": ["add"]})},
        config=INPROCESS,
    )
    assert sorted(n for n in h.connect_tools() if n.startswith("sdk.")) == ["sdk.echo"]
    r = h.call("sdk.add", {"a": 1, "b": 1})
    assert r.is_error and r.error.startswith('unknown tool "sdk.add"')


def test_tools_policy_applies_to_upstream_tools(tmp_path: Path, make) -> None:
    h = make(
        tmp_path,
        {"sdk": sdk(tmp_path)},
        config=INPROCESS + 'tools_policy: {deny: ["sdk.write*"]}\n',
    )
    assert "sdk.write_file" not in h.connect_tools()
    r = h.call("sdk.write_file", {"path": "x", "text": "y"})
    assert r.error == 'tool "sdk.write_file" is denied by tools_policy'
    assert not (tmp_path / "x").exists()


def test_env_is_explicit_and_scrubbed(tmp_path: Path, make, monkeypatch) -> None:
    monkeypatch.setenv("UP_TOKEN", "s3cret-value-77")
    monkeypatch.setenv("UP_OTHER", "leak")
    monkeypatch.setenv("USER", "operator")
    h = make(
        tmp_path,
        {"sdk": sdk(tmp_path, env={"TOKEN": "${env:UP_TOKEN}", "MODE": "x"})},
        config=INPROCESS,
    )
    env = h.call("sdk.whoami_env", {}).value
    assert env["TOKEN"] == "s3cret-value-77" and env["MODE"] == "x"
    assert "UP_OTHER" not in env and "UP_TOKEN" not in env and "USER" not in env
    assert set(env) <= {"TOKEN", "MODE", "PATH", "HOME", "LANG", "TERM"}
    # The secret is in the server's environment, never on a command line (ps shows those).
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            assert b"s3cret-value-77" not in cmdline


def test_missing_env_variable_is_a_clear_error(tmp_path: Path, make, monkeypatch) -> None:
    monkeypatch.delenv("UP_NOPE", raising=False)
    h = make(tmp_path, {"sdk": sdk(tmp_path, env={"TOKEN": "${env:UP_NOPE}"})}, config=INPROCESS)
    r = h.call("sdk.echo", {"text": "x"})
    assert r.is_error
    assert 'needs ${env:UP_NOPE}, but "UP_NOPE" is not set' in r.error
    assert "harness.md" in r.error


def test_crash_without_retry_is_an_error_then_restarts(tmp_path: Path, make) -> None:
    h = make(tmp_path, {"sdk": sdk(tmp_path)}, config=INPROCESS)
    marker = str(tmp_path / "flaky.marker")
    r = h.call("sdk.flaky", {"marker": marker})
    assert r.is_error
    assert (
        'upstream server "sdk" crashed or closed the connection during the call to "sdk.flaky"'
        in r.error
        and "restarted on the next call" in r.error
    )
    assert 'its last stderr line: "flaky: going down on purpose"' in r.error
    assert h.call("sdk.flaky", {"marker": marker}).value == {"result": "recovered"}


def test_retry_after_a_transient_failure(tmp_path: Path, make) -> None:
    h = make(
        tmp_path,
        {"sdk": sdk(tmp_path, retry={"max_attempts": 2, "backoff_ms": 10})},
        config=INPROCESS,
    )
    r = h.call("sdk.flaky", {"marker": str(tmp_path / "m")})
    assert not r.is_error, r.error
    assert r.value == {"result": "recovered"}
    assert (tmp_path / "m").exists()


def test_non_idempotent_tool_is_not_retried_unless_the_operator_says_so(
    tmp_path: Path, make
) -> None:
    retry = {"max_attempts": 3, "backoff_ms": 0}
    h = make(tmp_path / "a", {"sdk": sdk(tmp_path, retry=retry)}, config=INPROCESS)
    marker = tmp_path / "a" / "w"
    r = h.call("sdk.write_once", {"marker": str(marker)})
    assert r.is_error and "not retried: the tool's annotations say it is not idempotent" in r.error
    assert marker.read_text() == "x"  # exactly one attempt
    per_tool = {"write_once": {"retry": {"retry_non_idempotent": True}}}
    h2 = make(
        tmp_path / "b", {"sdk": sdk(tmp_path, retry=retry, per_tool=per_tool)}, config=INPROCESS
    )
    marker2 = tmp_path / "b" / "w"
    assert h2.call("sdk.write_once", {"marker": str(marker2)}).value == {"result": "written"}
    assert marker2.read_text() == "xx"


def test_server_killed_mid_call_is_restarted(tmp_path: Path, make) -> None:
    tag = f"kill-{tmp_path.name}"
    h = make(tmp_path, {"sdk": sdk(tag)}, config=INPROCESS)
    assert not h.call("sdk.echo", {"text": "up"}).is_error
    (pid,) = server_pids(tag)
    out: list[harness.ToolResult] = []
    t = threading.Thread(target=lambda: out.append(h.call("sdk.slow", {"ms": 20000})))
    t.start()
    time.sleep(0.5)
    os.kill(pid, signal.SIGKILL)
    t.join(10)
    assert not t.is_alive()
    (r,) = out
    assert r.is_error and "crashed or closed the connection" in r.error
    again = h.call("sdk.echo", {"text": "back"})
    assert not again.is_error and again.value == {"result": "back"}
    assert wait_for(lambda: len(server_pids(tag)) == 1)
    assert server_pids(tag) != [pid]


def test_server_that_exited_between_calls_is_started_again(tmp_path: Path, make) -> None:
    tag = f"idle-{tmp_path.name}"
    h = make(tmp_path, {"sdk": sdk(tag)}, config=INPROCESS)
    assert not h.call("sdk.echo", {"text": "up"}).is_error
    (pid,) = server_pids(tag)
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: not h.upstream._conns["sdk"].alive())
    # No call was in flight: nothing was lost, so the next call just works.
    assert h.call("sdk.echo", {"text": "again"}).value == {"result": "again"}
    assert server_pids(tag) not in ([], [pid])


def test_hung_server_times_out_and_is_restarted(tmp_path: Path, make) -> None:
    tag = f"hang-{tmp_path.name}"
    h = make(tmp_path, {"sdk": sdk(tag, per_tool={"slow": {"timeout_ms": 300}})}, config=INPROCESS)
    assert h.call("sdk.echo", {"text": "up"}).value == {"result": "up"}
    old = server_pids(tag)
    t0 = time.monotonic()
    r = h.call("sdk.slow", {"ms": 30000})
    assert time.monotonic() - t0 < 5
    assert r.error == (
        'upstream server "sdk" did not answer the call to "sdk.slow" within '
        "300 ms; the server was stopped and is restarted on the next call"
    )
    assert h.call("sdk.echo", {"text": "again"}).value == {"result": "again"}
    assert wait_for(lambda: not set(old) & set(server_pids(tag)))


def test_timeouts_are_retried_only_when_asked(tmp_path: Path, make) -> None:
    slow = {
        "slow": {
            "timeout_ms": 200,
            "retry": {"max_attempts": 2, "retry_on": ["timeout"], "backoff_ms": 0},
        }
    }
    h = make(tmp_path, {"sdk": sdk(tmp_path, per_tool=slow)}, config=INPROCESS)
    r = h.call("sdk.slow", {"ms": 5000})
    assert r.is_error and r.error.endswith("(gave up after 2 attempts)")
    assert h.call("sdk.slow", {"ms": 1}).value == {"result": "slept 1 ms"}


def test_list_changed_refreshes_the_tools(tmp_path: Path, make) -> None:
    h = make(tmp_path, {"sdk": sdk(tmp_path)}, config=INPROCESS)
    assert "sdk.newt" not in h.tools
    seen: list[int] = []
    h.upstream.listeners.append(lambda: seen.append(1))
    assert not h.call("sdk.grow", {"name": "newt"}).is_error
    assert wait_for(lambda: "sdk.newt" in h.tools)
    assert seen
    assert h.call("sdk.newt", {}).value == {"result": "I am newt"}


def test_deferred_server_starts_on_first_call_and_close_leaves_no_process(
    tmp_path: Path, make
) -> None:
    tag = f"life-{tmp_path.name}"
    h = make(tmp_path, {"sdk": sdk(tag)}, config=INPROCESS)
    assert server_pids(tag) == []  # deferred: nothing started at load
    assert h.call("sdk.echo", {"text": "x"}).value == {"result": "x"}
    assert len(server_pids(tag)) == 1
    h.close()
    assert wait_for(lambda: server_pids(tag) == [])


def test_eager_server_starts_at_load(tmp_path: Path, make) -> None:
    tag = f"eager-{tmp_path.name}"
    h = make(tmp_path, {"sdk": sdk(tag, loading="eager")}, config=INPROCESS)
    assert len(server_pids(tag)) == 1
    h.close()
    assert wait_for(lambda: server_pids(tag) == [])


def test_server_that_cannot_start_is_an_error_result(tmp_path: Path, make) -> None:
    h = make(tmp_path, {"nope": {"command": ["no-such-mcp-server-xyz"]}}, config=INPROCESS)
    assert not [n for n in h.connect_tools() if n.startswith("nope.")]
    r = h.call("nope.anything", {})
    assert r.is_error
    assert r.error == (
        'upstream server "nope": program "no-such-mcp-server-xyz" is not on '
        "PATH; install it or give its full path in harness.md"
    )


def test_close_during_a_call_ends_it_with_an_error(tmp_path: Path, make) -> None:
    tag = f"closing-{tmp_path.name}"
    h = make(tmp_path, {"sdk": sdk(tag)}, config=INPROCESS)
    assert not h.call("sdk.echo", {"text": "up"}).is_error
    out: list[harness.ToolResult] = []
    t = threading.Thread(target=lambda: out.append(h.call("sdk.slow", {"ms": 30000})))
    t.start()
    time.sleep(0.5)
    h.close()
    t.join(15)
    assert not t.is_alive()  # the caller is never left hanging
    (r,) = out
    assert r.is_error
    assert wait_for(lambda: server_pids(tag) == [])
