"""Search and listing on a real source tree: harness against GNU grep and find.

Run: python bench/bench_search.py [--rounds N] [--cache DIR]

The tree is the django 5.2.19 and sympy 1.14.0 wheels, fetched once with ``pip download --no-deps``
and unpacked into ``~/.cache/harness-bench/project/tree`` (``--cache`` to move it):
about 5,240 files, 61 MB. A ``.gitignore`` typical of Python projects sits at its root
(it ignores nothing there, so every tool sees the same files; the rules are still
checked on every entry). The harness project around it (``harness.md``,
``.harness/tools`` = the starter tools) makes ``tree/`` the workspace.

Cases, each measured interleaved (one run of every contender per round; medians and
the per-round ratio's median):

* no match, full scan: ``grep -rnE P tree`` vs ``fs.grep(P)`` vs ``search_files``;
* a common pattern, 1000 matches: ``grep -rn import tree | head -1000`` vs
  ``fs.grep("import", max_matches=1000, order="walk")`` vs ``search_files``
  (max_matches 1000, ``order: walk``): all read directories in the file system's
  order and stop at the 1,000th line (here after 51 files). Then the default path
  order, which must read the 1,882 files that come first in path order:
  ``fs.grep``/``search_files`` against GNU grep given the same files in path order
  (``grep -n import FILE... | head -1000``), the same work; ratios are printed against
  both baselines;
* ``find tree -name '*.py'`` vs ``fs.glob("**/*.py")`` vs ``list_files``
  (``pattern: "**/*.py"``, ``max_entries: 5000``).

``search_files``/``list_files`` run end to end through ``harness.load(...).call`` with
process isolation (the default: the script runs in a worker process) and in-process,
each without hooks and with the starter pack's hooks (``command_guard``,
``secret_redactor``: what ``harness init`` installs, so what users run). The starter
hooks' cost on each call is printed too: the per-round difference with and without
them, against the call's own time without them (issue 26: under 20%).

``--pattern`` sets the common pattern of the 1000-match case (default ``import``;
issue 26 measured ``"def test_"``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import harness
from harness.config import Config
from harness.hooks import HookChain
from harness.output import render
from harness.runtime import jail as jail_mod
from harness.runtime.builtins import fs
from harness.runtime.context import CallContext
from harness.starter import files as starter_files

WHEELS = ("django", "sympy")
PINS = ("django==5.2.19", "sympy==1.14.0")  # the tree the documented figures used
GITIGNORE = """\
# Python
__pycache__/
*.py[cod]
*$py.class
*.so
build/
develop-eggs/
dist/
downloads/
eggs/
.eggs/
sdist/
wheels/
*.egg-info/
*.egg
pip-log.txt
htmlcov/
.tox/
.nox/
.coverage
.coverage.*
.cache
.pytest_cache/
.hypothesis/
.mypy_cache/
.ruff_cache/
*.log
local_settings.py
db.sqlite3
docs/_build/
.ipynb_checkpoints
.env
.venv
env/
venv/
node_modules/
!keep/
"""
NO_MATCH = r"zq[xy]jv_never_\w+\("
COMMON = "import"
HOOKED = " + starter hooks"


def install_hooks(project: Path) -> None:
    """The starter pack's hooks into ``project/.harness/hooks`` (as ``harness init``)."""
    for rel, text in starter_files().items():
        if rel.startswith(".harness/hooks/"):
            (project / rel).parent.mkdir(parents=True, exist_ok=True)
            (project / rel).write_text(text)


def build(cache: Path) -> Path:
    """The project directory (tree/ inside), fetched and unpacked once."""
    project = cache / "project"
    tree = project / "tree"
    if not (project / ".tree-complete").exists():
        wheels = cache / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        if not all(any(wheels.glob(f"{w}-*.whl")) for w in WHEELS):
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "-q",
                    "-d",
                    str(wheels),
                    *PINS,
                ],
                check=True,
            )
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        for w in WHEELS:
            wheel = sorted(wheels.glob(f"{w}-*.whl"))[-1]
            with zipfile.ZipFile(wheel) as z:
                z.extractall(tree / w)
        (tree / ".gitignore").write_text(GITIGNORE)
        (project / ".tree-complete").write_text("")
    tools = project / ".harness" / "tools"
    shutil.rmtree(project / ".harness", ignore_errors=True)
    for rel, text in starter_files().items():
        if rel.startswith(".harness/tools/"):
            tools.mkdir(parents=True, exist_ok=True)
            (project / rel).write_text(text)
    return project


def shell(cmd: str, cwd: Path) -> Callable[[], object]:
    return lambda: subprocess.run(cmd, shell=True, cwd=cwd, stdout=subprocess.DEVNULL, check=False)


def measure(cases: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    for fn in cases.values():
        fn()  # warm: page cache, compiled patterns, worker started
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        for label, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - t0)
    return times


def report(title: str, times: dict[str, list[float]], baselines: int = 1) -> None:
    """Medians and per-round ratios, then the starter hooks' cost per tool call."""
    labels = list(times)
    print(f"\n{title}" + "".join(f"   (ratio {i + 1}: to {labels[i]})" for i in range(baselines)))
    for label, ts in times.items():
        ratios = "".join(
            f"  {statistics.median(t / b for t, b in zip(ts, times[labels[i]], strict=True)):6.2f}x"
            for i in range(baselines)
        )
        print(f"  {label:<62} {statistics.median(ts) * 1000:8.1f} ms{ratios}")
    pairs = [(k, k + HOOKED) for k in labels if k + HOOKED in times]
    if pairs:
        hook_cost(times, pairs)


def hook_cost(times: dict[str, list[float]], pairs: list[tuple[str, str]]) -> None:
    """The starter hooks' cost per call: per-round (with - without), and its share of
    the call's own time (without hooks)."""
    print("  starter hooks' cost (per-round difference, median; share of the call without)")
    for plain, hooked in pairs:
        diffs = [h - p for p, h in zip(times[plain], times[hooked], strict=True)]
        shares = [d / p for d, p in zip(diffs, times[plain], strict=True)]
        print(
            f"    {plain:<58} {statistics.median(diffs) * 1000:+8.1f} ms"
            f"  {statistics.median(shares) * 100:+6.1f}%"
        )


def post_step(
    h: harness.Harness, name: str, arguments: dict[str, object], value: object, config: Config
) -> Callable[[], object]:
    """The tool.post step of ``h`` on ``value``, as the pipeline runs it."""
    chain: HookChain = h.hook_chain

    def post() -> object:
        payload = {
            "id": "c1",
            "call_id": "c1",
            "name": name,
            "arguments": arguments,
            "session": "s",
            "result": value,
            "content": render(value),
            "is_error": False,
            "error": None,
            "duration_ms": 1.0,
        }
        out = chain.run("tool.post", payload, h.runtime, lambda hook: CallContext(config=config))
        assert out.blocked_by is None and out.payload is payload, out
        return out

    return post


def post_hook_alone(hs: dict[str, harness.Harness], project: Path, rounds: int) -> None:
    """The tool.post step alone (the starter hooks on the very payload the pipeline
    builds: the result and its rendered text), against the call without hooks, in the
    same rounds: the hooks' share of the tool's own time without the noise of a
    difference of two end-to-end timings."""
    cases = [
        (
            "search_files",
            {"pattern": COMMON, "max_matches": 1000, "order": "walk"},
            "search_files order walk, 1000 matches",
        ),
        ("list_files", {"pattern": "**/*.py", "max_entries": 5000}, "list_files **/*.py"),
    ]
    print(
        "\nthe tool.post step alone (starter hooks) against the tool call without hooks "
        "(medians of per-round shares)"
    )
    for name, arguments, shown in cases:
        for iso in ("process", "inprocess"):
            plain, hooked = hs[iso], hs[iso + "+hooks"]
            value = plain.call(name, arguments).value
            config = Config(root=project, workspace=project / "tree")

            post = post_step(hooked, name, arguments, value, config)
            tool = functools.partial(plain.call, name, arguments)
            wall, cpu = measure_both({"tool": tool, "post": post}, rounds)
            line = f"  {shown} ({iso}):"
            for what, times in (("wall", wall), ("CPU of this process", cpu)):
                if what != "wall" and iso != "inprocess":
                    continue  # the worker's CPU time is not this process's
                shares = [b / a for a, b in zip(times["tool"], times["post"], strict=True)]
                line += (
                    f" {what}: tool {statistics.median(times['tool']) * 1000:.1f} ms,"
                    f" tool.post {statistics.median(times['post']) * 1000:.2f} ms ="
                    f" {statistics.median(shares) * 100:.1f}%;"
                )
            print(line.rstrip(";"))


def measure_both(
    cases: dict[str, Callable[[], object]], rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Like :func:`measure`, in wall time and in this process's CPU time (which the
    load of other processes on the machine does not inflate)."""
    for fn in cases.values():
        fn()
    wall: dict[str, list[float]] = {k: [] for k in cases}
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        for label, fn in cases.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            cpu[label].append(time.process_time() - c0)
            wall[label].append(time.perf_counter() - t0)
    return wall, cpu


def main() -> None:
    global COMMON
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "harness-bench")
    ap.add_argument("--pattern", default=COMMON, help="the 1000-match pattern (default import)")
    args = ap.parse_args()
    COMMON = args.pattern
    project = build(args.cache)
    tree = project / "tree"
    count = subprocess.run(
        "find tree -type f | wc -l; du -sb tree",
        shell=True,
        cwd=project,
        capture_output=True,
        text=True,
    ).stdout.split()
    print(
        f"tree: {count[0]} files, {int(count[1]) / 1e6:.0f} MB ({tree}); "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    ctx = CallContext(config=Config(root=project, workspace=tree))

    with contextlib.ExitStack() as stack:
        hs = {}
        # Loaded without hooks first, then with the starter hooks (a load reads the
        # project once: the first two never see the hooks added after them).
        for hooks in ("", "+hooks"):
            if hooks:
                install_hooks(project)
            for iso in ("process", "inprocess"):
                (project / "harness.md").write_text(
                    f"---\nworkspace: tree\nruntime: {{isolation: {iso}}}\n---\n"
                )
                hs[iso + hooks] = stack.enter_context(harness.load(project))
        assert [h.name for h in hs["process+hooks"].hooks] == ["command_guard", "secret_redactor"]
        assert not hs["process"].hooks

        def tool(iso: str, name: str, arguments: dict[str, object]) -> Callable[[], object]:
            def call() -> object:
                res = hs[iso].call(name, arguments)
                if res.is_error:
                    raise SystemExit(f"{name} failed: {res}")
                return res

            return call

        def tools(
            name: str, arguments: dict[str, object], how: str = ""
        ) -> dict[str, Callable[[], object]]:
            """The tool in both isolations, without and with the starter hooks."""
            out = {}
            for iso, shown in (("process", "process isolation"), ("inprocess", "in-process")):
                out[f"{name} {how}({shown})"] = tool(iso, name, arguments)
                out[f"{name} {how}({shown}){HOOKED}"] = tool(iso + "+hooks", name, arguments)
            return out

        # sanity: same answers as the baselines
        assert fs.grep(ctx, NO_MATCH, max_matches=10000) == []
        got = fs.grep(ctx, COMMON, max_matches=1000)
        assert len(got) == 1000, len(got)
        py = subprocess.run(
            "find tree -name '*.py' | wc -l",
            shell=True,
            cwd=project,
            capture_output=True,
            text=True,
        ).stdout.strip()
        assert len(fs.glob(ctx, "**/*.py")) == int(py), (len(fs.glob(ctx, "**/*.py")), py)

        report(
            f"no match, full scan ({NO_MATCH!r})",
            measure(
                {
                    "grep -rnE": shell(f"grep -rnE '{NO_MATCH}' tree", project),
                    "fs.grep": lambda: fs.grep(ctx, NO_MATCH, max_matches=10000),
                    **tools("search_files", {"pattern": NO_MATCH}),
                },
                args.rounds,
            ),
        )
        listed = subprocess.run(
            "find tree -type f | LC_ALL=C sort",
            shell=True,
            cwd=project,
            capture_output=True,
            text=True,
        ).stdout.split()
        listed = [f for f in listed if "/." not in f]  # harness skips hidden files
        ordered = ["sh", "-c", f'grep -n {shlex.quote(COMMON)} "$@" | head -1000', "sh", *listed]

        def in_order() -> object:
            return subprocess.run(
                ordered,
                cwd=project,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )

        walked = fs.grep(ctx, COMMON, max_matches=1000, order="walk")
        head = subprocess.run(
            f"grep -rn {shlex.quote(COMMON)} tree | head -1000",
            shell=True,
            cwd=project,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        assert len(walked) == 1000 and {m["path"] for m in walked} == {
            h.split(":", 1)[0].removeprefix("tree/") for h in head
        }, "not grep -r's files"
        print(
            "\nmax_matches 1000: grep -r reads directories in file-system order and stops "
            "after the first\n1,000 lines, as harness does with order walk. In path order "
            "(the default) harness must\nread every file that comes first in path order: "
            "ratio 2 compares that with GNU grep given\nthe same files in path order "
            "(see docs/search.md)."
        )
        report(
            f"common pattern ({COMMON!r}), max_matches 1000",
            measure(
                {
                    "grep -rn | head -1000 (directory order)": shell(
                        f"grep -rn {shlex.quote(COMMON)} tree | head -1000", project
                    ),
                    "grep -n FILES in path order | head -1000": in_order,
                    'fs.grep order="walk"': lambda: fs.grep(
                        ctx, COMMON, max_matches=1000, order="walk"
                    ),
                    **tools(
                        "search_files",
                        {"pattern": COMMON, "max_matches": 1000, "order": "walk"},
                        "order walk ",
                    ),
                    "fs.grep": lambda: fs.grep(ctx, COMMON, max_matches=1000),
                    **tools("search_files", {"pattern": COMMON, "max_matches": 1000}),
                },
                args.rounds,
            ),
            baselines=2,
        )
        report(
            f"files by name: {py} of '*.py'",
            measure(
                {
                    "find -name '*.py'": shell("find tree -name '*.py'", project),
                    "fs.glob": lambda: fs.glob(ctx, "**/*.py"),
                    **tools("list_files", {"pattern": "**/*.py", "max_entries": 5000}),
                },
                args.rounds,
            ),
        )
        post_hook_alone(hs, project, args.rounds)
    jail_mod.clear_jails()
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
