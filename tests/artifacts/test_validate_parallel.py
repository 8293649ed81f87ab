"""``check_project`` on several processes reports exactly what the serial path reports.

The project is real files: every case of tests/fixtures/load merged into one root
(broken YAML, bad UTF-8, bad fields, bad scripts, duplicates, overrides, ignored
files...) plus generated good and broken tools and hooks, ~150 artifacts in all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness import validation
from harness.artifacts.model import Project

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "load"

TOOL = """---
parameters:
  path:
    type: {ptype}
    description: File to read
    required: true
  limit:
    type: integer
    minimum: 1
timeout_ms: {timeout}
script: |
  def run(args):
      text = fs.read(args["path"])
      lines = text.split("\\n")[:args.get("limit", 10)]
      log.info("read", count=len(lines))
      return {{"lines": lines, "n": {n}, "x": {extra}}}
---
Read the first lines of a file (tool {n}).
"""

HOOK = """---
event: {event}
priority: {n}
when: payload["name"] == "gen_{n}"
script: |
  def handle(event, payload):
      if payload["arguments"].get("path", "").startswith("/"):
          return block("absolute paths are not allowed")
      return {verdict}
---
Hook {n}.
"""


def build_project(root: Path, tools: int = 80, hooks: int = 20) -> int:
    """Write the merged fixtures and the generated artifacts; return the .md file count."""
    for case in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        for src in sorted(case.rglob("*")):
            rel = src.relative_to(case)
            if not src.is_file() or rel.parts[0] != ".harness":
                continue
            stem, ext = src.name.rsplit(".", 1)  # "9lives" stays invalid, a.b / a_b collide
            dest = root / rel.parent / f"{stem}_{case.name}.{ext}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
    shutil.copyfile(FIXTURES / "config_types" / "harness.md", root / "harness.md")
    (root / ".harness" / "plugins" / "dups.md").write_text(
        '---\ntools:\n  - name: t_duplicate\n    script: "def run(args): return 1"\n'
        '  - name: gen_3\n    script: "def run(args): return 3"\n---\n'
    )
    (root / ".harness" / "overrides" / "ov.md").write_text(
        '---\ntools:\n  - name: t_timeout_negative\n    script: "def run(args): return 2"\n'
        "hooks:\n  - name: hook_7\n    event: tool.post\n"
        '    script: "def handle(event, payload): return allow()"\n---\n'
    )
    for n in range(tools):
        text = TOOL.format(
            n=n,
            ptype="strin" if n % 11 == 5 else "string",
            timeout=-1 if n % 13 == 4 else 1000,
            extra="undefined_name" if n % 7 == 2 else "None",
        )
        if n % 17 == 9:
            text = text.replace("log.info(", "log.infox(")
        if n % 19 == 10:
            text = text.replace("limit:\n", "limit:\n    typo: 1\n")
        (root / ".harness" / "tools" / f"gen_{n}.md").write_text(text)
    for n in range(hooks):
        text = HOOK.format(
            n=n,
            event="tool.prex" if n % 6 == 1 else "tool.pre",
            verdict="allow()" if n % 5 else "allow(",
        )
        (root / ".harness" / "hooks" / f"hook_{n}.md").write_text(text)
    return sum(
        1
        for kind in ("tools", "hooks")
        for p in (root / ".harness" / kind).iterdir()
        if p.name.endswith(".md")
    )


@pytest.fixture(scope="module")
def project_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    root = tmp_path_factory.mktemp("parallel")
    files = build_project(root)
    yield root, files


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    saved = (validation.PARALLEL, validation.CHUNK_FILES, validation.analyse)
    yield
    validation.PARALLEL, validation.CHUNK_FILES, validation.analyse = saved


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


FORCE_SUBPROCESS = False  # tests of this helper set it


def alone(body: Callable[..., None], *args: Any) -> None:
    """Run ``body(*args)`` in a single-threaded process.

    check_project refuses to fork while other threads run, and earlier tests in the same
    pytest process may have left threads behind (thread pools, servers); then the body
    runs in a fresh interpreter, where nothing else runs, and must pass there.
    """
    if _threads() == 1 and not FORCE_SUBPROCESS:
        body(*args)
        return
    plain = tuple(str(a) if isinstance(a, Path) else a for a in args)
    code = (
        "import runpy\nfrom pathlib import Path\n"
        f"m = runpy.run_path({str(Path(__file__))!r})\n"
        f"args = [Path(a) if isinstance(a, str) else a for a in {plain!r}]\n"
        f"m[{body.__name__!r}](*args)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
    )
    assert done.returncode == 0, done.stdout + done.stderr


def run(root: Path, parallel: bool, strict: bool = False) -> Project:
    validation.PARALLEL = parallel
    return validation.check_project(root, strict=strict)


def assert_same(a: Project, b: Project) -> None:
    assert a.problems == b.problems  # same problems, same order
    assert a.tools == b.tools
    assert list(a.tools) == list(b.tools)
    assert a.hooks == b.hooks
    assert a.config == b.config
    assert a.system_prompt == b.system_prompt


def _gate_child_first(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``analyse`` (the child inherits the wrapper): this process takes its first chunk
    only once the child has started one, so both processes certainly work."""
    parent = os.getpid()
    read_fd, write_fd = os.pipe()
    state = {"waited": False}

    def gated(jobs: Sequence[Any]) -> Any:
        if os.getpid() != parent:
            os.write(write_fd, b"x")
        elif not state["waited"]:
            state["waited"] = True
            os.read(read_fd, 1)
        return original(jobs)

    return gated


@pytest.mark.parametrize("strict", [False, True])
def test_parallel_equals_serial(project_root: tuple[Path, int], strict: bool) -> None:
    alone(_parallel_equals_serial, project_root[0], project_root[1], strict)


def _parallel_equals_serial(root: Path, files: int, strict: bool) -> None:
    assert files >= 140
    serial = run(root, False, strict)
    assert validation.last_run.files == ()
    validation.CHUNK_FILES = 8
    validation.analyse = _gate_child_first(validation.analyse)
    parallel = run(root, True, strict)
    assert len(validation.last_run.files) == 2, "the parallel path was not taken"
    assert validation.last_run.files[1] > 0, "the child analysed nothing"
    assert sum(validation.last_run.files) == files
    assert validation.last_run.fallbacks == 0
    assert_same(serial, parallel)
    codes = {p.code for p in serial.problems}
    # The merged fixtures really are broken in many ways.
    for code in (
        "yaml-syntax",
        "encoding-invalid",
        "duplicate-name",
        "override-unused",
        "script-syntax",
        "script-undefined",
        "script-unknown-function",
        "event-unknown",
        "parameter-type-invalid",
        "timeout-negative",
        "tool-name-collision",
        "file-ignored",
        "unknown-key",
    ):
        assert code in codes, code
    assert len(serial.problems) > 100


def test_auto_mode_forks_for_large_projects(project_root: tuple[Path, int]) -> None:
    alone(_auto_mode_forks_for_large_projects, project_root[0])


def _auto_mode_forks_for_large_projects(root: Path) -> None:
    serial = run(root, False)
    validation.PARALLEL = None
    auto = validation.check_project(root)
    assert_same(serial, auto)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    assert len(validation.last_run.files) == (cores if cores > 1 else 0)


def test_a_dying_child_has_its_chunks_redone(project_root: tuple[Path, int]) -> None:
    alone(_a_dying_child_has_its_chunks_redone, project_root[0])


def _a_dying_child_has_its_chunks_redone(root: Path) -> None:
    serial = run(root, False)
    parent = os.getpid()
    original = validation.analyse

    def dies_in_child(jobs: Sequence[Any]) -> Any:
        if os.getpid() != parent:
            os._exit(3)
        return original(jobs)

    validation.CHUNK_FILES = 8
    validation.analyse = _gate_child_first(dies_in_child)
    parallel = run(root, True)
    assert validation.last_run.fallbacks >= 1
    assert validation.last_run.files[1] == 0
    assert_same(serial, parallel)


def test_no_fork_while_another_thread_runs(project_root: tuple[Path, int]) -> None:
    root, _files = project_root
    serial = run(root, False)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        threaded = run(root, True)
    finally:
        stop.set()
        thread.join()
    assert validation.last_run.files == ()
    assert_same(serial, threaded)


def test_small_project_stays_serial(tmp_path: Path) -> None:
    build_project(tmp_path, tools=0, hooks=0)
    validation.PARALLEL = None
    validation.check_project(tmp_path)
    assert validation.last_run.files == ()


def test_bodies_also_pass_in_a_fresh_interpreter(project_root: tuple[Path, int]) -> None:
    global FORCE_SUBPROCESS
    FORCE_SUBPROCESS = True
    try:
        alone(_auto_mode_forks_for_large_projects, project_root[0])
    finally:
        FORCE_SUBPROCESS = False
