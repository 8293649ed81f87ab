"""Test doubles in test files: ``fakes:`` for exec.run and http.*, ``real:``, ``--record``.

Every test runs ``harness test`` (or ``harness validate``) on a real project in
tmp_path. The fakes are answered at the built-in seam (runtime/doubles.py) through the
session, so each behaviour is checked in both isolation modes.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import cli

MODES = ["inprocess", "process"]

TOOLS = {
    "run_tests": """\
        ---
        parameters:
          path: {type: string}
        script: |
          def run(args):
              r = exec.run(".venv/bin/python", ["-m", "pytest", "-q", args.get("path", "tests")])
              return {"ok": r["ok"], "code": r["exit_code"], "out": r["stdout"],
                      "err": r["stderr"], "ms": r["duration_ms"], "timed_out": r["timed_out"]}
        ---
        Run the project's tests.
        """,
    "two_commands": """\
        ---
        script: |
          def run(args):
              a = exec.run("git", ["status", "--short"])
              b = exec.run("git", ["log", "--oneline", "-n", "3"])
              return [a["stdout"], b["stdout"]]
        ---
        """,
    "shell": """\
        ---
        parameters:
          line: {type: string, required: true}
        script: |
          def run(args):
              return exec.run("sh", ["-c", args["line"]])["stdout"].strip()
        ---
        """,
    "http_status": """\
        ---
        parameters:
          url: {type: string, required: true}
        script: |
          def run(args):
              r = http.get(args["url"])
              return {"status": r["status"], "ok": r["ok"], "body": r["body"],
                      "type": r["headers"].get("content-type", "")}
        ---
        """,
    "notify": """\
        ---
        script: |
          def run(args):
              r = http.post("https://hooks.example.com/notify", json={"text": "hi"})
              return r["status"]
        ---
        """,
}


def project(tmp_path: Path, test: str, mode: str = "inprocess", extra: str = "") -> Path:
    (tmp_path / "harness.md").write_text(
        f"---\nruntime: {{isolation: {mode}}}\n"
        "network: {allowed_domains: [status.example.com, hooks.example.com]}\n"
        f"{extra}---\nPrompt.\n"
    )
    for folder, items in (("tools", TOOLS), ("tests", {"t": test})):
        d = tmp_path / ".harness" / folder
        d.mkdir(parents=True, exist_ok=True)
        for name, text in items.items():
            (d / f"{name}.md").write_text(textwrap.dedent(text))
    return tmp_path


def run(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["test", "--root", str(root), "-j", "1", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize("mode", MODES)
def test_exec_fakes_answer_by_program_and_argument_pattern(tmp_path: Path, mode: str) -> None:
    # .venv/bin/python does not exist: only the fake can answer.
    test = """\
        ---
        cases:
          - name: passing tests
            call: run_tests
            fakes:
              exec:
                - program: .venv/bin/python
                  args: ["-m", "pytest", "**"]
                  stdout: "3 passed in 0.01s\\n"
                  duration_ms: 40
            expect: {value: {ok: true, code: 0, out: "3 passed in 0.01s\\n", ms: 40}}
          - name: failing tests, matched by the program's name and a regex
            call: run_tests
            args: {path: tests/test_b.py}
            fakes:
              exec:
                - program: python
                  args: ["-m", "pytest", "-q", "re:^tests/test_[a-z]+\\\\.py$"]
                  exit_code: 1
                  stdout: "1 failed\\n"
                  stderr: boom
            expect: {value: {ok: false, code: 1, out: "1 failed\\n", err: boom}}
          - name: a fake slower than the timeout is a timeout
            call: run_tests
            fakes:
              exec: [{program: "*python", duration_ms: 9999999}]
            expect: {value: {ok: false, timed_out: true}}
        ---
        """
    code, out = run(project(tmp_path, test, mode))
    assert code == 0, out
    assert "3 passed" in out


@pytest.mark.parametrize("mode", MODES)
def test_an_unexpected_command_fails_the_case_by_name(tmp_path: Path, mode: str) -> None:
    # The case even expects an error: an unexpected command still fails it.
    test = """\
        ---
        cases:
          - name: only one of two commands is faked
            call: two_commands
            fakes:
              exec: [{program: git, args: [status, "**"], stdout: " M a.py\\n"}]
            expect: {ok: false}
        ---
        """
    code, out = run(project(tmp_path, test, mode))
    assert code == 1, out
    assert "unexpected command `git log --oneline -n 3`" in out
    assert "fakes.exec: git status ** (line 6)" in out
    assert "real: [exec]" in out


@pytest.mark.parametrize("mode", MODES)
def test_real_lets_a_command_run_for_real_and_nothing_else_does(tmp_path: Path, mode: str) -> None:
    test = """\
        ---
        cases:
          - name: real
            real: [exec]
            call: shell
            args: {line: "echo real-run"}
            expect: {value: real-run}
          - name: a fake still answers first
            real: [exec]
            call: shell
            args: {line: "echo real-run"}
            fakes:
              exec: [{program: sh, stdout: "faked\\n"}]
            expect: {value: faked}
          - name: not real
            call: shell
            args: {line: "echo real-run"}
            expect: {ok: false, error_contains: "unexpected command `sh -c 'echo real-run'`"}
        ---
        """
    code, out = run(project(tmp_path, test, mode))
    assert code == 1, out
    assert "3 cases: 2 passed, 1 failed" in out, out
    assert "not real" in out and "unexpected command" in out


def test_every_declared_fake_must_be_used(tmp_path: Path) -> None:
    test = """\
        ---
        fakes:
          exec:
            - {program: nothing-calls-me}
            - {program: sh, stdout: "file-level\\n"}
        cases:
          - name: uses the file-level fake
            call: shell
            args: {line: x}
            fakes:
              exec: [{program: git, args: [push]}]
            expect: {value: file-level}
          - name: another case
            call: shell
            args: {line: y}
            expect: {value: file-level}
        ---
        """
    code, out = run(project(tmp_path, test))
    assert code == 1, out
    assert "a declared fake was never used: fakes.exec: git push (line 11)" in out
    assert "a file-level fake no case used: fakes.exec: nothing-calls-me (line 4)" in out
    # With -k the other cases might have used it: only the case's own fakes count.
    code, out = run(tmp_path, "-k", "uses the file-level")
    assert "nothing-calls-me" not in out and "git push" in out


@pytest.mark.parametrize("mode", MODES)
def test_http_fakes_by_method_and_url_without_network(tmp_path: Path, mode: str) -> None:
    # status.example.com resolves nowhere here: a real request would fail.
    test = """\
        ---
        fakes:
          http:
            - method: GET
              url: "https://status.example.com/health*"
              status: 503
              headers: {Content-Type: text/plain}
              body: down for maintenance
        cases:
          - name: down
            call: http_status
            args: {url: "https://status.example.com/health?verbose=1"}
            expect:
              value: {status: 503, ok: false, body: down for maintenance, type: text/plain}
          - name: a post with a json fake
            call: notify
            fakes:
              http: [{method: POST, url: "https://hooks.example.com/*", status: 201, json: {id: 7}}]
            expect: {value: 201}
          - name: an unexpected request
            call: http_status
            args: {url: "https://status.example.com/other"}
            expect: {ok: false}
          - name: policy first, a host not allowed is refused with a fake or without
            call: http_status
            args: {url: "https://evil.example.net/health"}
            fakes:
              http: [{url: "https://evil.example.net/*"}]
            expect: {error_contains: not in network.allowed_domains}
        ---
        """
    code, out = run(project(tmp_path, test, mode))
    assert code == 1, out
    assert "unexpected request `GET https://status.example.com/other`" in out
    # The refused request never reached the fake: it was never used.
    assert "never used: fakes.http: * https://evil.example.net/*" in out
    assert "4 cases: 2 passed, 2 failed" in out


def test_allowed_commands_still_refuse_a_faked_program(tmp_path: Path) -> None:
    test = """\
        ---
        config: {exec: {allowed_commands: [git]}}
        cases:
          - name: refused
            call: shell
            args: {line: "echo hi"}
            fakes: {exec: [{program: sh}]}
            expect: {error_contains: not in exec.allowed_commands}
        ---
        """
    code, out = run(project(tmp_path, test))
    assert "never used: fakes.exec: sh" in out, out
    assert code == 1


def test_validate_reports_bad_fake_declarations_with_lines(tmp_path: Path) -> None:
    test = """\
        ---
        real: [exec, disk]
        fakes:
          exec:
            - {program: git, stdot: x}
            - {args: [status]}
          ftp: []
        cases:
          - name: bad
            call: shell
            args: {line: x}
            fakes:
              http:
                - {url: "re:([", method: FETCH, status: 42}
                - {url: "https://a.example/", body: x, json: {}}
        ---
        """
    root = project(tmp_path, test)
    result = CliRunner().invoke(cli, ["validate", "--root", str(root)])
    out = result.output
    assert result.exit_code == 1, out
    t = ".harness/tests/t.md"
    for line, text in (
        (2, "real: unknown 'disk'"),
        (5, 'unknown key "stdot" in a fake'),
        (6, "program must be a non-empty pattern string"),
        (7, 'unknown key "ftp" in fakes'),
        (14, "is not a valid regular expression"),
        (14, "method must be one of GET, POST"),
        (14, "status must be an HTTP status"),
        (15, "give body: or json:, not both"),
    ):
        assert any(f"{t}:{line}:" in x and text in x for x in out.splitlines()), (line, text, out)
    code, out = run(root)
    assert code == 2, out


def test_record_writes_redacted_fakes_that_replay_offline(tmp_path: Path) -> None:
    test = """\
        ---
        # A comment that stays.
        cases:
          - name: two commands
            real: [exec]
            call: two_commands
            expect: {ok: true}

          - name: a secret in the output
            real: [exec]
            call: shell
            env: {SECRET: hunter2}
            args: {line: "echo password=$SECRET '*'"}
            fakes:
              exec: [{program: old-fake}]
        ---
        Body text that stays.
        """
    root = project(tmp_path, test, extra="exec: {sandbox: off}\n")
    import subprocess

    subprocess.run(["git", "init", "-q", str(root)], check=True)
    code, out = run(root, "--record")
    assert code == 0, out
    text = (root / ".harness" / "tests" / "t.md").read_text()
    assert "# A comment that stays." in text and "Body text that stays." in text
    assert "password=hunter2" not in text and "password=[REDACTED]" in text
    assert "old-fake" not in text
    assert "program: git" in text and "- '[*]'" not in text or "[*]" in text
    # Without real:, the recorded fakes answer: same results, nothing runs.
    (root / ".harness" / "tests" / "t.md").write_text(text.replace("real: [exec]", "x-was: real"))
    code, out = run(root)
    assert code == 0, out


def test_record_an_http_request_then_replay_it_without_the_server(tmp_path: Path) -> None:
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            body = b'{"state": "green", "password": "hunter2"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}/health?token=abc&password=hunter2"
    test = f"""\
        ---
        config: {{network: {{allowed_domains: ["127.0.0.1:{port}"]}}}}
        cases:
          - name: live
            real: [http]
            call: http_status
            args: {{url: "{url}"}}
            expect: {{value: {{status: 200, type: application/json}}}}
        ---
        """
    root = project(tmp_path, test)
    try:
        code, out = run(root, "--record")
    finally:
        server.shutdown()
        server.server_close()
    assert code == 0, out
    text = (root / ".harness" / "tests" / "t.md").read_text()
    assert "hunter2" not in text.split("fakes:")[1], text
    assert "password=*" in text and '"password": "[REDACTED]"' in text
    # The server is gone, real: is gone: the recorded fake answers the same call.
    (root / ".harness" / "tests" / "t.md").write_text(text.replace("real: [http]", "x-: 1"))
    code, out = run(root)
    assert code == 0, out
