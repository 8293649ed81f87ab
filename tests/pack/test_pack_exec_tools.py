"""The starter pack's `run_command` and `git` tools through `harness call`."""

from __future__ import annotations

from pathlib import Path

import pytest
from pack_helpers import err, ok

# -- run_command -------------------------------------------------------------------------


def test_run_command_shell_string_and_argv(ws: Path) -> None:
    shell = ok(ws, "run_command", {"command": "echo hi && ls src | wc -l"})
    assert shell["ok"] is True and shell["exit_code"] == 0
    assert shell["stdout"].split() == ["hi", "1"]
    assert shell["command"] == "echo hi && ls src | wc -l"
    assert shell["timed_out"] is False and shell["truncated"] is False
    argv = ok(ws, "run_command", {"argv": ["printf", "%s|", "a b", "$HOME"]})
    assert argv["stdout"] == "a b|$HOME|"  # no shell: nothing expanded or split
    assert argv["command"] == "printf '%s|' 'a b' '$HOME'"


def test_run_command_exit_status_cwd_stdin(ws: Path) -> None:
    failed = ok(ws, "run_command", {"command": "echo oops >&2; exit 3"})
    assert (failed["ok"], failed["exit_code"], failed["stderr"]) == (False, 3, "oops\n")
    here = ok(ws, "run_command", {"argv": ["ls"], "cwd": "src"})
    assert here["stdout"] == "app.py\n"
    fed = ok(ws, "run_command", {"argv": ["cat"], "stdin": "fed in"})
    assert fed["stdout"] == "fed in"
    written = ok(ws, "run_command", {"command": "echo made > made.txt"})
    assert written["ok"] and (ws / "made.txt").read_text() == "made\n"


def test_run_command_timeout_and_truncation(ws: Path) -> None:
    slow = ok(ws, "run_command", {"command": "sleep 30", "timeout_ms": 300})
    assert slow["timed_out"] is True and slow["ok"] is False
    # 48 894 bytes: under exec.run's own cap, over the tool's 30 000-character budget,
    # which keeps the head and the tail.
    big = ok(ws, "run_command", {"command": "seq 1 10000"})
    assert big["truncated"] is True
    assert big["stdout"].startswith("1\n2\n3\n")
    assert big["stdout"].endswith("9999\n10000\n")
    assert "characters omitted" in big["stdout"]
    assert len(big["stdout"]) < 31000
    # Beyond max_output_bytes exec.run itself keeps only the head.
    huge = ok(ws, "run_command", {"command": "seq 1 100000"})
    assert huge["truncated"] is True and huge["stdout"].startswith("1\n2\n")


def test_run_command_argument_errors(ws: Path) -> None:
    assert err(ws, "run_command", {}).startswith("give command (a shell string")
    assert err(ws, "run_command", {"command": "ls", "argv": ["ls"]}) == (
        "give either command (a shell string) or argv (a list), not both"
    )
    assert "$.argv" in err(ws, "run_command", {"argv": []})
    assert "$.timeout_ms" in err(ws, "run_command", {"command": "ls", "timeout_ms": 0})
    assert "$.command" in err(ws, "run_command", {"command": ["ls"]})


def test_run_command_protected_paths_stay_intact(ws: Path) -> None:
    # With the sandbox the write fails; the tool reports it as a normal result.
    before = (ws / "harness.md").read_text()
    ok(ws, "run_command", {"command": "echo pwned > harness.md"})
    sandboxed = (ws / "harness.md").read_text() == before
    if not sandboxed:
        pytest.skip(
            "no bubblewrap sandbox on this machine: protected paths are not enforced for commands"
        )
    assert (ws / "harness.md").read_text() == before


# -- git ---------------------------------------------------------------------------------


def test_git_read_only_subcommands(repo: Path) -> None:
    status = ok(repo, "git", {"subcommand": "status", "args": ["--short"]})
    assert status["ok"] is True and " M app.py" in status["stdout"]
    assert status["command"] == "git status --short"
    log = ok(repo, "git", {"subcommand": "log", "args": ["--oneline", "-n", "5"]})
    assert "second commit" in log["stdout"] and "first commit" in log["stdout"]
    diff = ok(repo, "git", {"subcommand": "diff"})
    assert "-y = 3" in diff["stdout"] and "+y = 4" in diff["stdout"]
    show = ok(repo, "git", {"subcommand": "show", "args": ["--stat", "HEAD"]})
    assert "second commit" in show["stdout"] and "app.py" in show["stdout"]
    blame = ok(repo, "git", {"subcommand": "blame", "args": ["HEAD", "--", "app.py"]})
    assert blame["stdout"].count("\n") == 2
    missing = ok(repo, "git", {"subcommand": "show", "args": ["no-such-rev"]})
    assert missing["ok"] is False and missing["exit_code"] == 128 and missing["stderr"]


@pytest.mark.parametrize("sub", ["push", "commit", "checkout", "reset", "config", "clean"])
def test_git_refuses_other_subcommands(repo: Path, sub: str) -> None:
    text = err(repo, "git", {"subcommand": sub})
    assert f'"{sub}" is not one of ["status", "diff", "log", "show", "blame"]' in text


@pytest.mark.parametrize(
    "args",
    [
        ["--output=/tmp/x"],
        ["--output", "x"],
        ["--ext-diff"],
        ["--textconv"],
        ["-c"],
        ["--exec=sh"],
        ["--config-env=a=b"],
        ["--git-dir=/"],
        ["--work-tree=/"],
        ["-Oorder"],
        ["--no-index", "/etc/passwd", "app.py"],
        ["--outp=x"],
    ],
)
def test_git_refuses_options_that_write_or_run(repo: Path, args: list[str]) -> None:
    text = err(repo, "git", {"subcommand": "diff", "args": args})
    assert "is not allowed" in text and args[0] in text


def test_git_refuses_blame_revs_file_and_secret_blobs(repo: Path) -> None:
    assert "is not allowed" in err(
        repo, "git", {"subcommand": "blame", "args": ["-S", "/etc/passwd", "app.py"]}
    )
    assert "protected secret file" in err(
        repo, "git", {"subcommand": "show", "args": ["HEAD:.env"]}
    )
    # log -S (the pickaxe) is a search, not a file read: allowed.
    assert ok(repo, "git", {"subcommand": "log", "args": ["-S", "y = 3", "--oneline"]})["ok"]
