"""``harness test``: expect keys both ways, isolation, clock, formats, coverage, exit codes."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import cli

HARNESS_MD = "---\nruntime: {isolation: inprocess}\n---\nPrompt.\n"

TOOLS = {
    "echo": """\
        ---
        parameters:
          text: {type: string, required: true}
        script: |
          def run(args):
              return {"text": args["text"], "n": len(args["text"]), "tags": ["a", "b"]}
        ---
        Echo.
        """,
    "save": """\
        ---
        parameters:
          path: {type: string, required: true}
          content: {type: string, required: true}
        script: |
          def run(args):
              return fs.write(args["path"], args["content"])
        ---
        Save a file.
        """,
    "clock": """\
        ---
        script: |
          def run(args):
              return {"now": time.now(), "day": time.weekday("Europe/Berlin")}
        ---
        """,
    "counter": """\
        ---
        script: |
          def run(args):
              n = cache.get("n", 0) + 1
              cache.set("n", n)
              return n
        ---
        """,
    "big": """\
        ---
        script: |
          def run(args):
              return "x" * 500
        ---
        """,
    "deploy": """\
        ---
        parameters:
          target: {type: string}
        script: |
          def run(args):
              return "deployed " + args.get("target", "staging")
        ---
        """,
}

HOOKS = {
    "prod_guard": """\
        ---
        event: tool.pre
        script: |
          def handle(event, payload):
              if payload["name"] == "deploy" and payload["arguments"].get("target") == "prod":
                  return block("no deploys to prod from an agent")
              return allow()
        ---
        """,
    "shout": """\
        ---
        event: tool.post
        script: |
          def handle(event, payload):
              if payload["name"] == "echo" and payload["result"]["text"] == "shout":
                  return modify({"result": {"text": "SHOUT"}})
              return allow()
        ---
        """,
}


def project(
    tmp_path: Path,
    tests: dict[str, str],
    tools: dict[str, str] | None = None,
    hooks: dict[str, str] | None = None,
) -> Path:
    (tmp_path / "harness.md").write_text(HARNESS_MD)
    for kind, items in (
        ("tools", TOOLS if tools is None else tools),
        ("hooks", HOOKS if hooks is None else hooks),
        ("tests", tests),
    ):
        folder = tmp_path / ".harness" / kind
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in items.items():
            (folder / f"{name}.md").write_text(textwrap.dedent(text))
    return tmp_path


def run(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["test", "--root", str(root), *args])
    return result.exit_code, result.output


PASSING = """\
    ---
    files:
      seed.txt: seed
    cases:
      - name: value and text
        call: echo
        args: {text: hi}
        expect: {ok: true, value: {text: hi, tags: [a, b]}, text_contains: ["hi", '"n":2']}
      - name: invalid args are errors
        call: echo
        args: {}
        expect: {ok: false, error_contains: required property}
      - name: blocked
        call: deploy
        args: {target: prod}
        expect: {blocked_by: prod_guard, error_contains: no deploys to prod}
      - name: truncated
        config: {limits: {max_output_bytes: 100}}
        call: big
        expect: {truncated: true}
      - name: not truncated
        call: big
        expect: {truncated: false}
      - name: files written
        call: save
        args: {path: out/a.txt, content: A}
        expect:
          files:
            out/a.txt: A
            seed.txt: {contains: ee}
            nothing.txt: {absent: true}
      - name: isolation
        call: echo
        args: {text: x}
        expect:
          files:
            out/a.txt: {absent: true}
            seed.txt: seed
      - name: fixed clock
        now: "2026-01-09T23:30:00Z"
        call: clock
        expect: {value: {now: "2026-01-09T23:30:00.000Z", day: Saturday}}
      - name: cache carries over between steps
        steps:
          - call: counter
            expect: {value: 1}
          - call: counter
            expect: {value: 2}
      - name: a fresh session per case
        call: counter
        expect: {value: 1}
      - name: guard blocks
        hook: prod_guard
        payload: {name: deploy, arguments: {target: prod}}
        expect: {decision: block, reason_contains: prod}
      - name: guard allows
        hook: prod_guard
        event: tool.pre
        payload: {name: deploy, arguments: {target: staging}}
        expect: {decision: allow}
      - name: rewrite
        hook: shout
        payload: {name: echo, result: {text: shout}}
        expect: {decision: modify, payload: {result: {text: SHOUT}}}
    ---
    Passing cases.
    """


def test_every_expect_key_passes(tmp_path: Path) -> None:
    code, out = run(project(tmp_path, {"pass": PASSING}), "--jobs", "4")
    assert code == 0, out
    assert "13 cases: 13 passed, 0 failed" in out
    assert not (tmp_path / "out").exists()  # the real workspace is never touched


FAILING = """\
    ---
    cases:
      - name: ok fails
        call: echo
        args: {text: hi}
        expect: {ok: false}
      - name: value fails
        call: echo
        args: {text: hi}
        expect: {value: {text: ho, tags: [a]}}
      - name: text fails
        call: echo
        args: {text: hi}
        expect: {text_contains: nope}
      - name: error fails
        call: echo
        args: {text: hi}
        expect: {error_contains: boom}
      - name: blocked fails
        call: deploy
        args: {target: staging}
        expect: {blocked_by: prod_guard}
      - name: truncated fails
        call: big
        expect: {truncated: true}
      - name: files fail
        call: save
        args: {path: a.txt, content: A}
        expect: {files: {a.txt: B, b.txt: X}}
      - name: hook decision fails
        hook: prod_guard
        payload: {name: deploy, arguments: {target: staging}}
        expect: {decision: block}
      - name: hook payload fails
        hook: shout
        payload: {name: echo, result: {text: shout}}
        expect: {payload: {result: {text: whisper}}}
      - name: a step fails
        steps:
          - call: counter
            expect: {value: 1}
          - call: counter
            expect: {value: 5}
      - name: no expect means success
        call: echo
    ---
    """


def test_every_expect_key_fails_with_file_line_and_diff(tmp_path: Path) -> None:
    code, out = run(project(tmp_path, {"fail": FAILING}))
    assert code == 1
    assert "11 cases: 0 passed, 11 failed" in out
    f = ".harness/tests/fail.md"
    assert f'{f}:3: call "echo": expected an error result, got success' in out
    assert f'{f}:7: call "echo": value does not match (subset match)' in out
    assert '-  "text": "ho"' in out and '+  "text": "hi"' in out  # the diff
    assert f'{f}:11: call "echo": text does not contain "nope"' in out
    assert f'{f}:15: call "echo": expected an error result, got success' in out
    assert f'{f}:19: call "deploy": expected to be blocked by hook "prod_guard"' in out
    assert f'{f}:23: call "big": expected truncated: true' in out
    assert f'{f}:26: call "save": file "a.txt" has other content' in out
    assert "  -B\n  +A" in out
    assert 'file "b.txt" does not exist' in out
    assert f'{f}:30: hook "prod_guard": expected decision block, got allow' in out
    assert f'{f}:34: hook "shout": payload after the hook does not match' in out
    assert f'{f}:42: call "counter": value does not match' in out  # the step's own line
    assert "  -5\n  +2" in out
    assert f'{f}:44: call "echo": expected success, got an error: invalid arguments' in out


def test_k_selects_cases_and_output_file(tmp_path: Path) -> None:
    root = project(tmp_path, {"pass": PASSING, "fail": FAILING})
    report = tmp_path / "report.json"
    code, out = run(root, "-k", "pass.md::GUARD", "--format", "json", "-o", str(report))
    assert code == 0
    assert out.strip() == "2 cases: 2 passed, 0 failed in " + out.split(" in ")[1].strip()
    doc = json.loads(report.read_text())
    assert [c["name"] for c in doc["cases"]] == ["guard blocks", "guard allows"]
    assert doc["ok"] is True
    code, _ = run(root, str(root / ".harness/tests/fail.md"), "-k", "ok fails")
    assert code == 1
    code, out = run(root, "-k", "no such case")
    assert code == 2 and 'no test cases match -k "no such case"' in out


def test_junit_is_valid_xml(tmp_path: Path) -> None:
    root = project(tmp_path, {"pass": PASSING, "fail": FAILING})
    code, out = run(root, "--format", "junit")
    assert code == 1
    top = ET.fromstring(out.split("\n", 1)[1])
    assert top.tag == "testsuites" and top.get("tests") == "24" and top.get("failures") == "11"
    suites = {s.get("name"): s for s in top.findall("testsuite")}
    assert set(suites) == {".harness/tests/pass.md", ".harness/tests/fail.md"}
    cases = suites[".harness/tests/fail.md"].findall("testcase")
    first = cases[0]
    assert first.get("name") == "ok fails" and first.get("line") == "3"
    failure = first.find("failure")
    assert failure is not None and "expected an error result" in (failure.get("message") or "")
    assert all(c.find("failure") is None for c in suites[".harness/tests/pass.md"])


def test_github_annotates_the_case_line(tmp_path: Path) -> None:
    root = project(tmp_path, {"fail": FAILING})
    code, out = run(root, "--format", "github", "-k", "hook decision")
    assert code == 1
    line = next(x for x in out.splitlines() if x.startswith("::error"))
    assert line.startswith("::error file=.harness/tests/fail.md,line=30,")
    assert "expected decision block, got allow" in line


def test_coverage_names_untested_tools_hooks_and_block_paths(tmp_path: Path) -> None:
    tests = {
        "some": """\
        ---
        cases:
          - name: deploy to staging
            call: deploy
            args: {target: staging}
        ---
        """
    }
    hooks = {
        **HOOKS,
        "on_custom": """\
        ---
        event: custom.review
        script: |
          def handle(event, payload):
              return allow()
        ---
        """,
    }
    code, out = run(project(tmp_path, tests, hooks=hooks), "--coverage")
    assert code == 0
    assert 'tool "echo" has no case' in out
    assert 'tool "deploy" has no case' not in out
    assert 'hook "on_custom" has no case' in out
    assert 'hook "shout" has no case' not in out  # it ran (and allowed) after the call
    assert 'hook "prod_guard" has no case' not in out  # it ran (and allowed) in a call
    assert 'hook "prod_guard" never produced "block" in any case (an untested guard)' in out
    assert 'hook "shout" never produced "modify"' in out
    code, out = run(project(tmp_path, tests, hooks=hooks), "--coverage", "--format", "json")
    cov = json.loads(out)["coverage"]
    assert "echo" in cov["untested_tools"] and cov["untested_hooks"] == ["on_custom"]
    assert {"hook": "prod_guard", "decision": "block"} in cov["unproduced"]
    code, out = run(project(tmp_path, tests, hooks=hooks), "--coverage", "--format", "github")
    assert '::warning::hook "prod_guard" never produced "block" in any case' in out


def test_load_errors_and_bad_test_files_exit_2(tmp_path: Path) -> None:
    bad = {
        "bad": """\
        ---
        cases:
          - name: typo
            call: ecko
            args: {text: hi}
        ---
        """
    }
    code, out = run(project(tmp_path, bad))
    assert code == 2
    assert (
        '.harness/tests/bad.md:3:1: error: case "typo": unknown tool "ecko" (did you mean '
        '"echo"?)' in out
    )
    (tmp_path / ".harness/tools/broken.md").write_text("no frontmatter")
    code, out = run(tmp_path)
    assert code == 2 and "broken.md" in out
    code, out = run(tmp_path, "missing.md")
    assert code == 2


def test_validate_reports_test_file_problems(tmp_path: Path) -> None:
    tests = {
        "t": """\
        ---
        cases:
          - name: a
            call: echo
            args: {text: hi}
            expct: {ok: true}
          - name: b
            hook: prod_gaurd
            payload: {}
          - name: c
            hook: shout
            event: tool.pre
          - name: d
            call: echo
            hook: shout
          - name: e
            call: deploy
            expect: {blocked_by: nobody, okay: true}
        ---
        """
    }
    root = project(tmp_path, tests)
    result = CliRunner().invoke(cli, ["validate", "--root", str(root)])
    out = result.output
    assert result.exit_code == 1, out
    t = ".harness/tests/t.md"
    assert f'{t}:6:5: error: unknown key "expct" in case 1 (did you mean "expect"?)' in out
    assert (
        f'{t}:7:1: error: case "b": unknown hook "prod_gaurd" (did you mean "prod_guard"?)' in out
    )
    assert f'{t}:10:1: error: case "c": hook "shout" handles "tool.post", not "tool.pre"' in out
    assert (
        f'{t}:13:5: error: case "d" needs exactly one of call:, hook: or steps: (has '
        "call, hook)" in out
    )
    assert f'{t}:16:1: error: case "e": expect.blocked_by names unknown hook "nobody"' in out
    assert 'unknown key "okay" in a call\'s expect (did you mean "ok"?)' in out
    strict = CliRunner().invoke(cli, ["validate", "--strict", "--root", str(root)])
    assert f'{t}:6:5: error: unknown key "expct"' in strict.output


@pytest.mark.parametrize("isolation", ["process"])
def test_env_and_config_reach_commands_in_worker_processes(tmp_path: Path, isolation: str) -> None:
    tools = {
        "show_env": """\
        ---
        script: |
          def run(args):
              return exec.run("sh", ["-c", "echo $GREETING"])["stdout"].strip()
        ---
        """
    }
    tests = {
        "env": """\
        ---
        config: {exec: {env: [PATH, GREETING]}, runtime: {isolation: process}}
        real: [exec]                  # the commands run: no fakes
        cases:
          - name: with env
            env: {GREETING: hello}
            call: show_env
            expect: {value: hello}
          - name: without env
            call: show_env
            expect: {value: ""}
        ---
        """
    }
    code, out = run(project(tmp_path, tests, tools=tools, hooks={}), "--jobs", "2")
    assert code == 0, out


def test_case_copies_are_removed_and_go_to_memory_when_there_is_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.testing import runner as runner_mod

    (tmp_path / "p").mkdir()
    root = project(tmp_path / "p", {"pass": PASSING})
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(runner_mod.tempfile, "tempdir", None)  # re-read TMPDIR
    with runner_mod.Runner(root) as r:
        assert r.choose_scratch(4) is None  # TMPDIR set by the user wins
        files, _ = r.collect()
        assert r.run(files, jobs=2).ok
    assert list(scratch.iterdir()) == []  # every copy deleted by close()
    monkeypatch.delenv("TMPDIR")
    with runner_mod.Runner(root) as r:
        assert r.choose_scratch(2) == "/dev/shm"
        monkeypatch.setattr(
            runner_mod.shutil, "disk_usage", lambda _p: type("U", (), {"free": 1000})()
        )
        assert r.choose_scratch(2) is None  # not enough room: the default temp folder
        monkeypatch.undo()
        monkeypatch.delenv("TMPDIR", raising=False)
        real = runner_mod.os.statvfs

        class NoExec:
            def __init__(self, path: str) -> None:
                self.real = real(path)
                self.f_flag = self.real.f_flag | runner_mod.os.ST_NOEXEC

            def __getattr__(self, name: str) -> object:
                return getattr(self.real, name)

        monkeypatch.setattr(runner_mod.os, "statvfs", NoExec)
        assert r.choose_scratch(2) is None  # noexec: programs in the copy could not run


def test_adversarial_test_files_get_clear_errors(tmp_path: Path) -> None:
    tests = {
        "yaml": """\
            ---
            cases:
              - name: a
                call: echo
                args: {text: [unclosed
            ---
            """,
        "setup": """\
            ---
            now: next tuesday
            files:
              ../escape.txt: x
              .harness/tools/evil.md: x
              ok.txt: 5
            config: {limits: {max_output_bytes: -1}, tols: {}}
            cases:
              - call: echo
                args: {text: hi}
                expect: {ok: maybe, files: {a.txt: {size: 3}}}
              - 42
              - steps: []
            ---
            """,
        "empty": "---\n---\nNo cases.\n",
    }
    evals = tmp_path / ".harness" / "evals"
    evals.mkdir(parents=True)
    (evals / "e.md").write_text(
        "---\ncases:\n  - turns: [hi]\n    grade: [{tool_calld: echo}]\n---\n"
    )
    root = project(tmp_path, tests)
    result = CliRunner().invoke(cli, ["validate", "--root", str(root)])
    out = result.output
    assert result.exit_code == 1
    y, s = ".harness/tests/yaml.md", ".harness/tests/setup.md"
    assert f"{y}:6:1: error: parse test yaml.md: yaml: line 6:" in out
    assert (
        f'{s}:2:1: error: now must be an RFC 3339 time such as "2026-01-05T09:00:00Z", '
        "got 'next tuesday'" in out
    )
    assert (
        f'{s}:4:3: error: files: "../escape.txt" must be a relative path inside the '
        "workspace" in out
    )
    assert f'{s}:5:3: error: files: ".harness/tools/evil.md" must be a relative path' in out
    assert f'{s}:6:3: error: files: the content of "ok.txt" must be a string, got ' in out
    assert (
        f'{s}:7:1: error: case "call echo #1": config limits.max_output_bytes must be > 0, '
        "got -1" in out
    )
    assert (
        f'{s}:7:1: error: case "call echo #1": config key "tols" cannot be overridden '
        '(did you mean "tools"?)' in out
    )
    assert f"{s}:11:14: error: expect.ok must be true or false" in out
    assert (
        'expect.files: "a.txt" must be the exact content (a string), {absent: true} or '
        "{contains: TEXT}" in out
    )
    assert f"{s}:12:5: error: case 2 must be a mapping, got " in out
    assert f"{s}:13:5: error: steps must be a non-empty list of calls" in out
    assert ".harness/tests/empty.md:1:1: error: a test file needs `cases:`" in out
    assert (
        '.harness/evals/e.md:4:13: error: case "eval 1": unknown grade "tool_calld" (did '
        'you mean "tool_called"?)' in out
    )
    code, out = run(root)
    assert code == 2


def test_fixture_files_never_escape_through_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "p").mkdir()
    tests = {
        "link": """\
        ---
        cases:
          - name: writes through a link
            files: {link/evil.txt: pwned}
            call: echo
            args: {text: hi}
          - name: reads through a link
            call: echo
            args: {text: hi}
            expect: {files: {link/secret.txt: s}}
          - name: still runs
            call: echo
            args: {text: hi}
        ---
        """
    }
    root = project(tmp_path / "p", tests)
    (outside / "secret.txt").write_text("s")
    (root / "link").symlink_to(outside)  # an absolute link, kept as a link in the copy
    code, out = run(root)
    assert code == 1
    assert not (outside / "evil.txt").exists()
    assert 'files: "link/evil.txt" leads outside the workspace copy (through a symlink)' in out
    assert (
        'file "link/secret.txt" has other content' in out
        and "<unreadable: it leads outside the workspace copy>" in out
    )
    assert "PASS .harness/tests/link.md:11 still runs" in out


def test_the_real_root_gets_no_audit_or_state(tmp_path: Path) -> None:
    root = project(tmp_path, {"pass": PASSING})
    (root / "harness.md").write_text(
        "---\nruntime: {isolation: inprocess}\naudit: {path: .harness/state/audit.jsonl}\n---\n"
    )
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    code, out = run(root, "-k", "files written")
    assert code == 0, out
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


def test_fixture_files_go_into_the_configured_workspace(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "ws": """\
        ---
        files: {data.txt: inside}
        cases:
          - name: reads from the workspace folder
            call: save
            args: {path: out.txt, content: x}
            expect: {files: {data.txt: inside, out.txt: x}}
        ---
        """
        },
    )
    (root / "work").mkdir()
    (root / "harness.md").write_text("---\nruntime: {isolation: inprocess}\nworkspace: work\n---\n")
    code, out = run(root)
    assert code == 0, out
    assert not (root / "work" / "out.txt").exists()
