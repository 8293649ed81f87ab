"""The doc-test collector's running half: what each kind of block must do to pass.

- ``python``: runs (``exec``) with the current directory in the page's project; with
  ``serve [ARGS]`` while ``harness serve --transport http ARGS`` serves that project
  (its ``:8000`` in the block becomes the server's free port).
- ``bash``/``sh``: each command runs; ``harness ...`` in-process (click's CliRunner),
  ``cd``, ``mkdir`` and ``git`` too; ``a && b`` runs ``b`` only when ``a`` succeeded.
  A command must exit 0 unless its line ends with a comment ``# exits N`` (or
  ``# exit N``). Any other program needs a skip marker.
- ``console``: ``$ COMMAND`` lines run as in ``bash``; the lines after one are its
  output and must match what it prints (a line ``...`` matches any lines, ``...``
  within a line any text); ``$ echo $?`` prints the last exit status.
- ``markdown`` (an artifact): needs ``file PATH``; it is written into the project,
  which must then pass ``harness validate --strict``; a test file (``.harness/tests/``)
  must also pass ``harness test``, an eval file ``harness eval --dry-run``.
- ``yaml``/``json``/``ini``: must parse; with ``file PATH`` written and validated as
  above (an ``ini`` named ``pytest.ini`` runs pytest in the project); ``config``: the
  YAML is harness.md's frontmatter and must validate cleanly.

The page's project is a temporary directory made by ``harness init`` (or a copy of
tests/docs/projects/NAME with ``project NAME``), with every earlier ``setup`` block
run in it, in page order among the ``file`` blocks, and holding every earlier ``file`` block
of the same page, as a reader following the page would have it.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner, Result
from docblocks import ROOT, Block

from harness.cli.main import cli

PROJECTS = Path(__file__).resolve().parent / "projects"


def harness(argv: list[str]) -> Result:
    result = CliRunner().invoke(cli, argv, prog_name="harness")
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def artifact_path(block: Block) -> str:
    return block.arg if block.directive == "file" else ""


def make_project(block: Block, page: list[Block], tmp: Path) -> Path:
    root = tmp / "project"
    if block.directive == "project":
        shutil.copytree(PROJECTS / block.arg, root, ignore=shutil.ignore_patterns(".keep"))
    else:
        root.mkdir()
        result = harness(["init", str(root)])
        assert result.exit_code == 0, result.output
    for earlier in page:
        if earlier.line >= block.line:
            break
        if earlier.directive == "file":
            write(root, earlier.arg, earlier.text)
        elif earlier.directive == "setup":  # what a reader built (a venv, git history)
            run_python(earlier, root)
    return root


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def validate(root: Path, quiet: str = "") -> None:
    """``harness validate --strict`` passes, and draws no warning about the file
    ``quiet`` (harness.md for ``config``). Other files may draw warnings (a tool
    without a script is a contract for a handler bound in Python)."""
    result = harness(["validate", "--strict", "--root", str(root)])
    assert result.exit_code == 0, result.output
    noisy = [line for line in result.output.splitlines() if "warning" in line]
    assert not quiet or not [line for line in noisy if f"/{quiet}:" in line], result.output


# ---------------------------------------------------------------- shell


def split_comment(line: str) -> tuple[str, str]:
    """The command and its trailing ``# comment`` (outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def run_command(cmd: str, state: dict[str, object]) -> tuple[int, str]:
    if "&&" in cmd:  # a && b: b runs only when a succeeded
        status, output = 0, ""
        for part in cmd.split(" && "):
            status, out = run_command(part, state)
            output += out
            if status:
                break
        return status, output
    argv = shlex.split(cmd)
    cwd = Path(str(state["cwd"]))
    if argv[0] == "cd":
        if not (cwd / argv[1]).is_dir():
            return 1, f"cd: {argv[1]}: No such file or directory\n"
        state["cwd"] = cwd / argv[1]
        return 0, ""
    if argv[0] == "mkdir":
        for name in (a for a in argv[1:] if not a.startswith("-")):
            (cwd / name).mkdir(parents="-p" in argv, exist_ok="-p" in argv)
        return 0, ""
    if argv == ["echo", "$?"]:
        return 0, f"{state['status']}\n"
    if argv[0] == "git":
        env = {**os.environ, "GIT_AUTHOR_NAME": "doc", "GIT_AUTHOR_EMAIL": "doc@example.com"}
        env |= {"GIT_COMMITTER_NAME": "doc", "GIT_COMMITTER_EMAIL": "doc@example.com"}
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=60)
        state["status"] = proc.returncode
        return proc.returncode, proc.stdout + proc.stderr
    if argv[0] != "harness":
        raise AssertionError(f"no runner for {argv[0]!r}; mark the block doc-test: skip — why")
    if argv[1:2] in (["serve"], ["run"]) or argv[1:2] == ["eval"] and "--dry-run" not in argv:
        raise AssertionError(f"`harness {argv[1]}` does not end or needs a model: mark it skip")
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = harness(argv[1:])
    finally:
        os.chdir(old)
    state["status"] = result.exit_code
    return result.exit_code, result.output


def logical_lines(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        if out and out[-1].endswith("\\"):
            out[-1] = out[-1][:-1].rstrip() + " " + line.strip()
        else:
            out.append(line)
    return out


def run_bash(block: Block, root: Path) -> None:
    state: dict[str, object] = {"cwd": root, "status": 0}
    for line in logical_lines(block.text):
        cmd, comment = split_comment(line)
        if not cmd:
            continue
        m = re.match(r"exits? (\d+)\b", comment)
        want = int(m.group(1)) if m else 0
        status, output = run_command(cmd, state)
        assert status == want, f"{cmd}\nexit {status} (want {want}):\n{output}"


def matches(want: list[str], got: list[str]) -> bool:
    if not want:
        return not got
    head = want[0]
    if head == "...":
        return any(matches(want[1:], got[i:]) for i in range(len(got) + 1))
    if not got:
        return False
    pattern = ".*".join(re.escape(part) for part in head.split("..."))
    return bool(re.fullmatch(pattern, got[0])) and matches(want[1:], got[1:])


def run_console(block: Block, root: Path) -> None:
    state: dict[str, object] = {"cwd": root, "status": 0}
    steps: list[tuple[str, list[str]]] = []
    for line in logical_lines(block.text):
        if line.startswith("$ "):
            steps.append((split_comment(line[2:])[0], []))
        else:
            assert steps, f"output before the first `$ ` command: {line!r}"
            steps[-1][1].append(line.rstrip())
    for cmd, want in steps:
        _, output = run_command(cmd, state)
        got = [line.rstrip() for line in output.splitlines()]
        while got and not got[-1]:
            got.pop()
        while want and not want[-1]:
            want.pop()
        assert matches(want, got), (
            f"$ {cmd}\nthe page shows:\n"
            + "\n".join(want)
            + "\nharness printed:\n"
            + "\n".join(got)
        )


# ---------------------------------------------------------------- files


def run_markdown(block: Block, root: Path) -> None:
    rel = artifact_path(block)
    assert rel, "a markdown block needs `<!-- doc-test: file PATH -->` (where it goes)"
    write(root, rel, block.text)
    validate(root)
    if rel.startswith(".harness/tests/"):
        result = harness(["test", "--root", str(root), str(root / rel)])
        assert result.exit_code == 0, result.output
    if rel.startswith(".harness/evals/"):
        result = harness(["eval", "--dry-run", "--root", str(root), str(root / rel)])
        assert result.exit_code == 0, result.output


def run_yaml(block: Block, root: Path) -> None:
    docs = [d for d in yaml.safe_load_all(block.text) if d is not None]
    assert docs, "empty YAML block"
    if block.directive == "config":
        frontmatter = block.text
        if not frontmatter.lstrip().startswith("---"):
            frontmatter = f"---\n{frontmatter}---\n"
        write(root, "harness.md", frontmatter)
        validate(root, quiet="harness.md")
    elif block.directive == "file":
        write(root, block.arg, block.text)
        validate(root)


def run_ini(block: Block, root: Path) -> None:
    parser = configparser.ConfigParser()
    parser.read_string(block.text)
    if block.directive != "file":
        return
    write(root, block.arg, block.text)
    if Path(block.arg).name == "pytest.ini":
        proc = subprocess.run(
            # The starter cases are run by other blocks already: collected, not run here.
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not starter"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert re.search(r"\d+ passed", proc.stdout), proc.stdout


def run_python(block: Block, root: Path) -> None:
    """The block as a reader runs it: its own Python process, in the project, with this
    environment (in-process, a block's stdio client met pytest's and click's captured
    streams, which have no file descriptor)."""
    compile(block.text, block.id, "exec", dont_inherit=True)  # a syntax error names its line
    done = subprocess.run(
        [sys.executable, "-c", block.text],
        cwd=root,
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (
        f"{block.id} exited {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )


@contextmanager
def http_server(root: Path, args: list[str], env: dict[str, str]) -> Iterator[int]:
    """``harness serve --transport http`` on a free loopback port, until the block ran."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    argv = [sys.executable, "-m", "harness.cli.main", "serve", "--root", str(root)]
    argv += ["--transport", "http", "--port", str(port), *args]
    log = root.parent / "serve.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120  # a readiness wait, not a timing assertion
        while f":{port}/mcp" not in log.read_text():
            assert proc.poll() is None, f"harness serve exited: {log.read_text()}"
            assert time.monotonic() < deadline, f"harness serve never listened: {log.read_text()}"
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run_served_python(block: Block, root: Path) -> None:
    """The block runs against a real HTTP server of the page's project: its port 8000
    becomes the free port the server got; ``HARNESS_TOKENS`` (the server's) and
    ``HARNESS_TOKEN`` (the client's) hold one fresh token."""
    token = secrets.token_urlsafe(24)
    env = {**os.environ, "HARNESS_TOKENS": token, "HARNESS_TOKEN": token}
    with http_server(root, shlex.split(block.arg), env) as port:
        served = replace(block, text=block.text.replace(":8000", f":{port}"))
        old = dict(os.environ)
        os.environ.update(HARNESS_TOKEN=token)
        try:
            run_python(served, root)
        finally:
            os.environ.clear()
            os.environ.update(old)


def run_starlark(block: Block, root: Path) -> None:
    tool = "---\nscript: |\n" + textwrap.indent(block.text, "  ") + "---\nA doc example.\n"
    write(root, ".harness/tools/doc_example.md", tool)
    validate(root, quiet=".harness/tools/doc_example.md")


# ---------------------------------------------------------------- text


def run_tree(block: Block, root: Path) -> None:
    listed = {line.split()[0] for line in block.text.splitlines() if line.strip()}
    written = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert listed == written, (
        f"the page lists {sorted(listed)}, harness init writes {sorted(written)}"
    )


def run_synopsis(block: Block, root: Path) -> None:
    words = block.text.split()
    assert words[0] == "harness", "a synopsis starts with `harness COMMAND`"
    command = cli.commands[words[1]]
    options = {o: p for p in command.params for o in (*p.opts, *p.secondary_opts)}
    shown = re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)(?:[ =]([\w|.:-]+))?", block.text)
    named = set()
    for opt, value in shown:
        assert opt in options, f"`harness {words[1]}` has no option {opt}"
        param = options[opt]
        named.add(param.name)
        if isinstance(param.type, click.Choice) and "|" in value:
            assert value.split("|") == list(param.type.choices), f"{opt} {value}"
    missing = {p.name for p in command.params if isinstance(p, click.Option)} - named - {"help"}
    assert not missing, f"the synopsis leaves out {sorted(str(m) for m in missing)}"


def run_block(block: Block, page: list[Block], tmp: Path) -> None:
    if block.directive == "skip":
        # What cannot run can still be read: a skipped block must at least parse.
        parse = {"python": lambda t: compile(t, block.id, "exec"), "json": json.loads}
        parse["yaml"] = lambda t: list(yaml.safe_load_all(t))
        parse.get(block.lang, str)(block.text)
        pytest.skip(block.reason)
    root = make_project(block, page, tmp)
    special = ("starlark", "tree", "synopsis", "serve")
    kind = block.directive if block.directive in special else block.lang
    runner = {
        "python": run_python,
        "bash": run_bash,
        "sh": run_bash,
        "console": run_console,
        "markdown": run_markdown,
        "yaml": run_yaml,
        "ini": run_ini,
        "json": lambda b, r: json.loads(b.text),
        "starlark": run_starlark,
        "tree": run_tree,
        "synopsis": run_synopsis,
        "serve": run_served_python,
    }.get(kind)
    assert runner, (
        f"{block.id}: no runner for a {kind or 'plain'} block; give it a language or a "
        "doc-test marker (see tests/docs/README.md)"
    )
    runner(block, root)


__all__ = ["ROOT", "run_block"]
