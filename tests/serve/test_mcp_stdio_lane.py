"""The stdio transport and its tools/call lane (harness/serve/stdio.py).

A plain handshake-era ``tools/call`` is served without the SDK's dispatcher; its
answer must be the one the SDK's own handler path gives. The SDK path is forced by
adding an (empty) ``_meta`` to the same request, which the lane never takes.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from serve_helpers import add_sleeper, processes_with, serve_argv

from harness.serve.stdio import lane_request


class Raw:
    """``harness serve`` over real pipes, spoken to one JSON line at a time."""

    def __init__(self, root: Path, version: str = "2025-11-25") -> None:
        self.err = open(root / "serve-stderr.log", "a")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [*serve_argv(root), "--log-level", "debug"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        self.buf = b""
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        assert self.read()["result"]["protocolVersion"] == version
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # One round trip more: the SDK has then handled the notification (which makes
        # the connection's client; before that the SDK serves tools/call itself).
        self.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        assert self.read()["id"] == "list"

    def send(self, message: Any) -> None:
        line = message if isinstance(message, bytes) else json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 30) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"no answer within {timeout} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError("the server closed stdout")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def call(self, rid: Any, params: dict[str, Any]) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
        answer = self.read()
        assert answer["id"] == rid, answer
        return answer

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.err.close()


def lane_ids(root: Path) -> list[int]:
    """The ids of the requests the lane served (from its debug log)."""
    return [
        int(m)
        for m in re.findall(
            r"\(id (\d+)\) in the stdio lane", (root / "serve-stderr.log").read_text()
        )
    ]


def normalised(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer without its id, and with output refs (unique per spill) masked."""
    text = json.dumps({k: v for k, v in answer.items() if k != "id"})
    return json.loads(re.sub(r"out-[A-Za-z0-9_-]{22}", "out-REF", text))


CASES: list[dict[str, Any]] = [
    {"name": "add", "arguments": {"a": 2, "b": 3}},  # wrapped structured
    {"name": "echo", "arguments": {"text": "héllo ✓", "times": 2}},  # object structured
    {"name": "echo", "arguments": {"text": 5}},  # invalid arguments
    {"name": "echo", "arguments": {"text": "x", "extra": 1}},  # undeclared name note
    {"name": "danger", "arguments": {"target": "db"}},  # blocked by a hook
    {"name": "nope"},  # unknown tool
    {"name": "big"},  # spilled, capped text
    {"name": "big_typed"},  # capped typed: isError
    {"name": "slow"},  # timed out
    {"name": "echo", "arguments": None},  # null arguments
    {"name": "read_output", "arguments": {"ref": "missing"}},
]


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25"])
def test_lane_answers_equal_the_sdk_path(project: Path, version: str) -> None:
    server = Raw(project, version)
    try:
        rid = 1
        for params in CASES:
            lane = server.call(rid, params)
            sdk = server.call(rid + 1, {**params, "_meta": {}})
            rid += 2
            assert normalised(lane) == normalised(sdk), (params, lane, sdk)
        # a spilled output is paged by read_output through the lane as through the SDK
        text = server.call(100, {"name": "big"})["result"]["content"][0]["text"]
        ref = text.split('read_output(ref="')[1].split('"')[0]
        page = {"name": "read_output", "arguments": {"ref": ref, "offset": 0}}
        assert server.call(101, page)["result"] == server.call(102, {**page, "_meta": {}})["result"]
    finally:
        server.close()
    # every plain request went through the lane, none of the _meta ones
    assert lane_ids(project) == [*range(1, 2 * len(CASES), 2), 100, 101]


def test_cancelled_lane_call_stops_and_is_never_answered(project: Path) -> None:
    add_sleeper(project)
    marker = "1777.31"
    server = Raw(project)
    try:
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {"name": "sleeper", "arguments": {"marker": marker}},
            }
        )
        end = time.monotonic() + 30
        while not processes_with(f"sleep {marker}"):
            assert time.monotonic() < end, "the command never started"
            time.sleep(0.05)
        server.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 5, "reason": "user"},
            }
        )
        end = time.monotonic() + 10
        while processes_with(f"sleep {marker}"):
            assert time.monotonic() < end, "the command outlived its cancelled call"
            time.sleep(0.05)
        # the next request is answered, and it is the first answer: 5 never is
        answer = server.call(6, {"name": "add", "arguments": {"a": 1, "b": 1}})
        assert answer["result"]["content"][0]["text"] == "2"
    finally:
        server.close()
    audit = (project / ".harness" / "state" / "audit.jsonl").read_text()
    assert '"tool.cancelled"' in audit
    assert lane_ids(project) == [5, 6]


def test_end_of_input_still_answers_every_request(project: Path) -> None:
    """``printf ... | harness serve``: input ends at once, every answer still comes."""
    add_sleeper(project)
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "pipe", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "sleeper", "arguments": {"marker": "0.3"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 2, "b": 2}},
        },
    ]
    done = subprocess.run(
        serve_argv(project),
        cwd=project,
        timeout=60,
        input=b"".join(json.dumps(m).encode() + b"\n" for m in lines),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert sorted(answers) == [1, 2, 3, 4]
    assert answers[3]["result"]["isError"] is False, answers[3]
    assert answers[4]["result"]["content"][0]["text"] == "4"


def test_a_client_gone_stops_its_calls(project: Path) -> None:
    """The client closes stdin and stdout mid-call: the command is stopped."""
    add_sleeper(project)
    marker = "1777.32"
    server = Raw(project)
    server.send(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "sleeper", "arguments": {"marker": marker}},
        }
    )
    end = time.monotonic() + 30
    while not processes_with(f"sleep {marker}"):
        assert time.monotonic() < end, "the command never started"
        time.sleep(0.05)
    assert server.proc.stdout is not None and server.proc.stdin is not None
    server.proc.stdout.close()
    server.proc.stdin.close()
    try:
        server.proc.wait(timeout=20)
        end = time.monotonic() + 10
        while processes_with(f"sleep {marker}"):
            assert time.monotonic() < end, "the command outlived its client"
            time.sleep(0.05)
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
        server.err.close()


def test_odd_lines_go_to_the_sdk_and_the_server_keeps_serving(project: Path) -> None:
    server = Raw(project)
    try:
        odd: list[bytes] = [
            b"not json",
            b'{"jsonrpc": "2.0", "id": 50, "method": "tools/call", '
            b'"params": {"name": "add", "arguments": {"a": NaN, "b": 1}}}',
            b'{"jsonrpc": "2.0", "id": 51, "method": "tools/call", '
            b'"params": {"name": "echo", "arguments": {"text": "\\ud800"}}}',
            b'{"jsonrpc": "2.0", "id": 52, "method": "tools/call", "params": {"name": 7}}',
            b'{"jsonrpc": "2.0", "id": 53, "method": "tools/call", '
            b'"params": {"name": "add", "arguments": [1, 2]}}',
            b'{"jsonrpc": "2.0", "id": 54, "method": "tools/call", "params": '
            + b'{"name": "echo", "arguments": {"text": '
            + b"[" * 3000
            + b"]" * 3000
            + b"}}}",
            b"\xff\xfe{}",
        ]
        for line in odd:
            server.send(line)
        # The SDK answers the requests its parser reads (50, 52, 53) and drops the
        # lines it cannot parse (a lone surrogate escape, 3,000 levels of nesting).
        answers: dict[Any, Any] = {}
        while not {50, 52, 53} <= set(answers):
            answer = server.read()
            answers[answer.get("id")] = answer
        assert "NaN is not of type" in answers[50]["result"]["content"][0]["text"]
        assert answers[52]["error"]["code"] == answers[53]["error"]["code"] == -32602
        ok = server.call(60, {"name": "add", "arguments": {"a": 20, "b": 22}})
        assert ok["result"]["content"][0]["text"] == "42"
    finally:
        server.close()
    assert lane_ids(project) == [60]


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=8,
    ),
    st.sampled_from(["tools/call", "tools/list", "ping"]),
    st.one_of(st.integers(), st.text(), st.none(), st.booleans(), st.floats()),
    st.dictionaries(
        st.sampled_from(["name", "arguments", "_meta", "task", "x"]),
        st.one_of(st.text(), st.none(), st.dictionaries(st.text(), st.integers()), st.integers()),
        max_size=4,
    ),
    st.booleans(),
)
def test_the_lane_takes_only_what_the_sdk_hands_its_handler(
    extra: Any, method: str, rid: Any, params: dict[str, Any], with_extra: bool
) -> None:
    """Whatever the lane takes, the SDK parses to the same id, name and arguments."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    if with_extra:
        message["extra"] = extra
    line = json.dumps(message).encode()
    took = lane_request(line)
    if took is None:
        return
    parsed = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    assert isinstance(parsed, types.JSONRPCRequest) and parsed.method == "tools/call"
    typed = types.CallToolRequestParams.model_validate(parsed.params, by_name=False)
    assert (parsed.id, typed.name, typed.arguments or {}) == took
    assert type(parsed.id) is type(took[0])
