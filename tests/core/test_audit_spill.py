"""Audit trail (JSONL, flushed per event, redacted) and spilled outputs (read_output)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from core_samples import ECHO

import harness

MakeHarness = Callable[..., harness.Harness]

BIG = """
---
parameters:
  size: {type: integer, required: true}
script: |
  def run(args):
      line = "0123456789abcdef" * 4 + "\\n"
      return line * (args["size"] // len(line))
---
Prints a lot.
"""
LEAK = """
---
script: |
  def run(args):
      return "token ghp_" + "a" * 36 + " and AKIAABCDEFGHIJKLMNOP and password=hunter2"
---
Leaks secrets.
"""
GUARD = """
---
event: tool.pre
when: 'payload["arguments"].get("path") == "blocked"'
script: |
  def handle(event, payload):
      return block("not this one")
---
Guard.
"""


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_pipeline_event_reaches_the_audit_file(
    make_harness: MakeHarness, tmp_path: Path
) -> None:
    h = make_harness(
        tools={"echo": ECHO},
        hooks={"guard": GUARD},
        config="audit: {path: .harness/state/audit.jsonl}\n",
    )
    with h.session("s1") as s:
        s.call("echo", {"path": "a"}, id="c1")
        s.call("echo", {"path": "blocked"}, id="c2")
    log = records(tmp_path / ".harness/state/audit.jsonl")
    events = [(r["event"], r.get("call_id")) for r in log]
    assert events[0] == ("session.start", None)
    assert [e for e in events if e[1] == "c1"] == [
        ("tool.resolve", "c1"),
        ("tool.validate", "c1"),
        ("hook.decision", "c1"),
        ("tool.execute", "c1"),
        ("tool.result", "c1"),
    ]
    decision = next(r for r in log if r["event"] == "hook.decision" and r["call_id"] == "c2")
    assert decision["decision"] == "block" and decision["hook"] == "guard"
    assert decision["reason"] == "not this one"
    assert events[-1] == ("session.end", None)
    assert all(r["session"] == "s1" and "time" in r for r in log)


def test_secrets_never_reach_the_audit_file(make_harness: MakeHarness, tmp_path: Path) -> None:
    h = make_harness(tools={"leak": LEAK}, config="audit: {path: audit.jsonl}\n")
    r = h.call("leak", {})
    assert "ghp_" in r.text  # the model's view is the tool's business (see secret_redactor)
    h.close()
    text = (tmp_path / "audit.jsonl").read_text()
    assert "ghp_aaaa" not in text and "AKIAABCDEFGHIJKLMNOP" not in text
    assert "hunter2" not in text and "[REDACTED]" in text


def test_audit_values_are_capped(make_harness: MakeHarness, tmp_path: Path) -> None:
    h = make_harness(
        tools={"big": BIG}, config="audit: {path: audit.jsonl}\nlimits: {max_output_bytes: 1000}\n"
    )
    h.call("big", {"size": 100_000})
    h.close()
    for line in (tmp_path / "audit.jsonl").read_text().splitlines():
        assert len(line) < 5000


def test_spill_and_page_through_a_1mb_output(make_harness: MakeHarness, tmp_path: Path) -> None:
    h = make_harness(tools={"big": BIG})
    with h.session() as s:
        r = s.call("big", {"size": 1_000_000})
        assert r.truncated and r.output_ref
        assert len(r.text.encode()) <= 65536
        assert r.text.endswith("[output truncated at 65536 bytes]")
        shown = r.text.split("\n[full output")[0]
        assert r.value.startswith(shown)
        pages: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = s.call("read_output", {"ref": r.output_ref, "offset": offset})
            assert not page.is_error and not page.truncated, page.text[-300:]
            assert len(page.text.encode()) <= 65536
            body, _, footer = page.value.rpartition("\n")
            pages.append(body)
            found = re.search(r"offset=(\d+)\)\]$", footer)
            offset = int(found.group(1)) if found else None
        assert "".join(pages) == r.value
        assert len(pages) == 16  # 999,999 bytes in pages of 65336
        spill_dir = tmp_path / ".harness/state/spill" / s.id
        assert spill_dir.is_dir()
    assert not spill_dir.exists()  # removed with the session (audit is off)


def test_read_output_unknown_ref(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"echo": ECHO})
    r = h.call("read_output", {"ref": "out-999"})  # never created
    assert r.is_error and r.error.startswith('unknown output ref "out-999"')  # type: ignore[union-attr]


def test_spills_are_per_session(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"big": BIG})
    with h.session() as a, h.session() as b:
        ref = a.call("big", {"size": 100_000}).output_ref
        assert ref and b.call("read_output", {"ref": ref}).is_error


def test_json_passwords_and_cut_keys_never_reach_the_audit_file(
    make_harness: MakeHarness, tmp_path: Path
) -> None:
    h = make_harness(
        tools={
            "echo": """
        ---
        parameters:
          user: {type: string}
          password: {type: string}
          content: {type: string}
        script: |
          def run(args):
              return args
        ---
        Echo.
    """
        },
        config="audit: {path: audit.jsonl}\n",
    )
    h.call(
        "echo",
        {
            "user": "bob",
            "password": "hunter7",
            "content": '{"password": "hunter8"} -----BEGIN RSA PRIVATE KEY-----\nMIIEow',
        },
    )
    h.close()
    text = (tmp_path / "audit.jsonl").read_text()
    for secret in ("hunter7", "hunter8", "MIIEow"):
        assert secret not in text
    times = [json.loads(line)["time"] for line in text.splitlines()]
    assert times == sorted(times)  # one clock reading per record


def test_redaction_patterns() -> None:
    from harness.redact import redact, redact_text

    assert redact_text('{"password": "a b"}') == '{"password": "[REDACTED]"}'
    assert redact_text('{\\"pwd\\": \\"x\\"}') == '{\\"pwd\\": \\"[REDACTED]\\"}'
    assert redact_text("PASSWORD: s3cret!") == "PASSWORD=[REDACTED]"
    assert redact_text("-----BEGIN EC PRIVATE KEY-----\nabc") == "[REDACTED]"
    assert redact({"api_key": "k", "n": [{"token": "t"}], "ok": "fine"}) == {
        "api_key": "[REDACTED]",
        "n": [{"token": "[REDACTED]"}],
        "ok": "fine",
    }
