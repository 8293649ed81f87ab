"""Run test cases: each in a fresh copy of the workspace, through the full pipeline.

A :class:`Runner` loads the project once (``harness.load``), then for every case copies
the workspace into a temporary directory, writes the case's fixture files, builds the
case's config (harness.md + ``config:`` + ``now:`` + ``env:``) and runs the case with a
:class:`~harness.Harness` over that copy. Script runtimes are shared between cases with
the same isolation settings (starting a worker pool per case would dominate the run);
every case still gets its own config, workspace, session and cache.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import harness
from harness.artifacts.frontmatter import split
from harness.artifacts.loader import find_root
from harness.artifacts.model import Problem, Project
from harness.config import parse_config
from harness.errors import LoadError
from harness.hooks import HookChain
from harness.runtime.context import ScriptRuntime
from harness.testing import expect as check
from harness.testing.fakes import CaseDoubles
from harness.testing.paths import check_copy
from harness.testing.recording import Recording, Shared
from harness.testing.report import Outcome as Reported
from harness.testing.settle import SettleCheck, isolated, rerun
from harness.testing.spec import (
    Case,
    Setup,
    TestFile,
    _merge,
    check_against,
    check_config,
    parse,
    test_files,
)
from harness.testing.workspace import SKIP_DIRS, copy_workspace, inside, tree_size
from harness.validation import check_project

__all__ = ["SKIP_DIRS", "CaseResult", "Recording", "RunResult", "Runner", "inside", "outcome"]
SHM = "/dev/shm"


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    case: Case
    passed: bool
    failures: tuple[check.Failure, ...] = ()
    duration_ms: float = 0.0
    tools: tuple[str, ...] = ()  # tools called
    decisions: tuple[tuple[str, str], ...] = ()  # (hook, allow|block|modify|error) seen
    file_fakes: frozenset[tuple[str, int]] = frozenset()  # (kind, line) of file fakes used
    recorded: tuple[tuple[str, dict[str, Any]], ...] = ()  # harness test --record


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    results: tuple[CaseResult, ...] = ()
    duration_ms: float = 0.0
    files: tuple[TestFile, ...] = ()
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed

    @property
    def ok(self) -> bool:
        return self.failed == 0


def outcome(r: CaseResult) -> Reported:
    """A case result as the reporters show it."""
    return Reported(
        path=r.case.path,
        line=r.case.line,
        name=r.case.name,
        passed=r.passed,
        duration_ms=r.duration_ms,
        failures=tuple((f.line, f.message, f.detail()) for f in r.failures),
    )


class Runner:
    """Collects and runs the test files of one root. Use as a context manager."""

    def __init__(self, root: str | Path | None = None, record: bool = False) -> None:
        self.record = record  # --record: every command and request runs and is kept
        self.root = find_root(Path.cwd()) if root is None else Path(root).resolve()
        # What harness.load checks, without opening anything at the real root (a
        # Harness would open its audit log there). LoadError: exit 2 at the CLI.
        project = check_project(self.root)
        if not project.ok:
            raise LoadError([p for p in project.problems if p.severity == "error"])
        self.project: Project = project
        self._config_data = _harness_md(self.root)
        self._runtimes: dict[tuple[Any, ...], ScriptRuntime] = {}
        # Copies of finished cases are deleted in the background: removing a tree costs
        # as much as copying it, and nothing waits for it until close().
        self.scratch: str | None = None  # where case copies go; see choose_scratch()
        self._cleaner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-test-rm")

    # -- collecting ----------------------------------------------------------------

    def collect(
        self, paths: Sequence[str | Path] = (), pattern: str | None = None
    ) -> tuple[list[TestFile], list[Problem]]:
        """The test files under ``paths`` (default: ``.harness/tests/``), their cases
        filtered by ``pattern`` (a case-insensitive substring of ``FILE::NAME``), and
        every problem that makes them unrunnable."""
        files: list[TestFile] = []
        problems: list[Problem] = []
        for rel, path in self._paths(paths, problems):
            tf = parse(path.read_bytes(), rel)
            problems.extend(p for p in tf.problems if p.severity == "error")
            problems.extend(check_against(tf, self.project))
            problems.extend(p for p in check_config(tf, self.root) if p.severity == "error")
            if pattern:
                needle = pattern.lower()
                kept = tuple(c for c in tf.cases if needle in c.id.lower())
                tf = replace(tf, cases=kept, complete=len(kept) == len(tf.cases))
            files.append(tf)
        return files, problems

    def _paths(
        self, paths: Sequence[str | Path], problems: list[Problem]
    ) -> list[tuple[str, Path]]:
        if not paths:
            return test_files(self.root)
        out: list[tuple[str, Path]] = []
        for given in paths:
            path = Path(given)
            if not path.is_absolute() and not path.exists():
                path = self.root / path
            if path.is_dir():
                out.extend((self.rel(p), p) for p in sorted(path.glob("*.md")) if p.is_file())
            elif path.is_file():
                out.append((self.rel(path), path))
            else:
                problems.append(
                    Problem(
                        path=str(given),
                        line=0,
                        column=0,
                        code="test-missing",
                        message=f'test path "{given}" does not exist',
                    )
                )
        return out

    def rel(self, path: Path) -> str:
        """``path`` relative to the root (as reports show it), else as given."""
        try:
            return path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    # -- running -------------------------------------------------------------------

    def choose_scratch(self, jobs: int) -> str | None:
        """Put case copies in memory (``/dev/shm``) when it has room for ``jobs`` copies
        with a wide margin and allows running programs: on a busy disk, creating and
        deleting a tree of files costs several times more than the cases themselves.
        ``TMPDIR``, when set, wins."""
        if os.environ.get("TMPDIR") or not os.path.isdir(SHM):
            return None
        try:
            free = shutil.disk_usage(SHM).free
            if not os.access(SHM, os.W_OK):
                return None
            # Often mounted noexec (containers): workspace scripts could not run there.
            if os.statvfs(SHM).f_flag & getattr(os, "ST_NOEXEC", 0):
                return None
        except OSError:
            return None
        size = tree_size(self.root)
        return SHM if size * (jobs + 2) * 4 < free else None

    def run(self, files: Iterable[TestFile], jobs: int = 1) -> RunResult:
        files = tuple(files)
        if self.scratch is None:
            self.scratch = self.choose_scratch(jobs)
        cases = [c for tf in files for c in tf.cases]
        start = time.perf_counter()
        if jobs > 1 and len(cases) > 1:
            with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="harness-test") as ex:
                results = list(ex.map(self.run_case, cases))
        else:
            results = [self.run_case(c) for c in cases]
        if not self.record:
            results = unused_file_fakes(files, results)
        return RunResult(
            results=tuple(results), files=files, duration_ms=(time.perf_counter() - start) * 1000.0
        )

    def run_case(self, case: Case) -> CaseResult:
        start = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(prefix="harness-test-", dir=self.scratch))
        fakes = CaseDoubles(
            case.setup.fakes, case.setup.real, case.name, case.path, record=self.record
        )
        try:
            try:
                h = self.harness_for(case.setup, tmp / "root", doubles=True)
                with h:
                    if case.kind == "hook":
                        failures, decisions, tools = self._hook_case(h, case, fakes)
                    else:
                        failures, decisions, tools = self._call_case(h, case, fakes)
                failures.extend(
                    check.Failure(path=case.path, line=case.line, message=m)
                    for m in fakes.unexpected
                )
                if not self.record:
                    failures.extend(
                        check.Failure(
                            path=case.path,
                            line=case.line,
                            message=f"a declared fake was never used: {label}; remove it "
                            "or fix its pattern",
                        )
                        for label in fakes.unused("case")
                    )
            except check.CaseError as exc:
                return self._broken(case, str(exc), start)
            except Exception as exc:  # noqa: BLE001 - one broken case never stops the run
                return self._broken(
                    case, f"the case could not run: {type(exc).__name__}: {exc}", start
                )
        finally:
            self._discard(tmp)
        return CaseResult(
            case=case,
            passed=not failures,
            failures=tuple(failures),
            duration_ms=(time.perf_counter() - start) * 1000.0,
            tools=tuple(tools),
            decisions=tuple(decisions),
            file_fakes=fakes.used_file_fakes(),
            recorded=tuple(fakes.recorded),
        )

    @staticmethod
    def _broken(case: Case, message: str, start: float) -> CaseResult:
        return CaseResult(
            case=case,
            passed=False,
            failures=(check.Failure(path=case.path, line=case.line, message=message),),
            duration_ms=(time.perf_counter() - start) * 1000.0,
        )

    def harness_for(self, setup: Setup, copy: Path, doubles: bool = False) -> harness.Harness:
        """A Harness over a fresh copy of the workspace at ``copy`` (with the left-out
        paths the file's ``include:`` names), set up as ``setup`` says (fixture files,
        config, clock, env); ``doubles``: exec.run and http.* ask the session's fakes
        first. Close it when done."""
        include = setup.include
        data = _merge(self._config_data, setup.config)
        mode = (data.get("exec") or {}).get("sandbox", "auto")
        if include:
            from harness.runtime import sandbox

            sandboxed = mode != "off" and sandbox.status()[1] is not None
        else:
            sandboxed = False
        mounts = copy_workspace(self.root, copy, include, sandboxed)
        if setup.now:
            data = _merge(data, {"clock": {"fixed": setup.now}})
        config, problems = parse_config(data, copy)
        errors = [p.message for p in problems if p.severity == "error"]
        errors.extend(check_copy(config, copy, setup.config))
        if errors:
            raise check.CaseError("the case's configuration is invalid: " + "; ".join(errors))
        config = replace(config, env_values=tuple(sorted(setup.env.items())), doubles=doubles)
        if mounts:  # linked environments: read-only in the sandbox (testing/workspace.py)
            config = replace(
                config, exec=replace(config.exec, mounts=(*config.exec.mounts, *mounts))
            )
        ws = config.workspace
        for rel, text in setup.files.items():
            target = inside(ws, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            inside(ws, rel)  # a directory made above cannot lead out either
            target.write_text(text, encoding="utf-8")
        project = replace(self.project, root=copy.resolve(), config=config)
        return harness.Harness(
            project, runtime=self._runtime(config), chain=SettleCheck(project.hooks)
        )

    def _runtime(self, config: Any) -> ScriptRuntime:
        key = (config.runtime.isolation, config.limits.memory_mb, config.limits.max_concurrency)
        rt = self._runtimes.get(key)
        if rt is None:
            # Lazy on purpose: a run imports only the runtime its configs ask for.
            if config.runtime.isolation == "process":
                from harness.runtime.workers import ProcessRuntime

                rt = ProcessRuntime(config)
            else:
                from harness.runtime.engine import InProcessRuntime

                rt = InProcessRuntime()
            rt = self._runtimes.setdefault(key, rt)
        return Shared(rt)

    def _call_case(
        self, h: harness.Harness, case: Case, fakes: CaseDoubles
    ) -> tuple[list[check.Failure], list[tuple[str, str]], list[str]]:
        failures: list[check.Failure] = []
        tools: list[str] = []
        ws = h.config.workspace
        session = Recording(h, fakes)
        with session:
            for step in case.steps:
                tools.append(step.call)
                result = session.call(step.call, dict(step.args))
                failures.extend(check.call(step, result, ws, case.path))
            decisions = list(session.decisions)
        if isinstance(h.hook_chain, SettleCheck):
            failures.extend(
                check.Failure(path=case.path, line=case.line, message=f'hook "{name}": {why}')
                for name, why in h.hook_chain.found.items()
            )
        return failures, decisions, tools

    def _hook_case(
        self, h: harness.Harness, case: Case, fakes: CaseDoubles
    ) -> tuple[list[check.Failure], list[tuple[str, str]], list[str]]:
        hook = next(x for x in h.hooks if x.name == case.hook)
        event = case.event or hook.event
        seen: list[tuple[str, str]] = []
        with h.session() as session:
            payload = dict(case.payload)
            payload.setdefault("session", session.id)
            if event.startswith("tool."):
                payload.setdefault("id", "test-call")
            if event == "tool.post":
                for key, value in (
                    ("arguments", {}),
                    ("result", None),
                    ("is_error", False),
                    ("error", None),
                    ("duration_ms", 0.0),
                ):
                    payload.setdefault(key, value)

            def record(_event: str, name: str, decision: str, reason: str, _ms: float) -> None:
                seen.append((decision, reason))

            chain = HookChain([hook])
            out = chain.run(event, payload, h.runtime, session.hook_context(), on_decision=record)
            twice = None
            if event == "tool.pre" and not out.failed and any(d == "modify" for d, _ in seen):
                # The settle rule: run again on its own output, it must change nothing.
                twice = rerun(chain, out.payload, h.runtime, isolated(session.hook_context()))
        if out.failed:
            decision = "error"
        elif out.blocked_by is not None:
            decision = "block"
        elif any(d == "modify" for d, _ in seen):
            decision = "modify"
        else:
            decision = "allow"
        failures = check.hook(case, decision, out.reason, dict(out.payload))
        if twice is not None:
            failures.append(
                check.Failure(
                    path=case.path, line=case.line, message=f'hook "{hook.name}": {twice}'
                )
            )
        return failures, [(hook.name, decision)], []

    def _discard(self, tmp: Path) -> None:
        try:
            self._cleaner.submit(shutil.rmtree, tmp, ignore_errors=True)
        except RuntimeError:  # closed: delete now
            shutil.rmtree(tmp, ignore_errors=True)

    def close(self) -> None:
        self._cleaner.shutdown(wait=True)
        for rt in self._runtimes.values():
            rt.close()
        self._runtimes.clear()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _harness_md(root: Path) -> dict[str, Any]:
    path = root / "harness.md"
    if not path.is_file():
        return {}
    data, _body, _lines, _problems = split(path.read_bytes(), "harness.md", "config")
    return {k: v for k, v in data.items() if k not in ("tools", "hooks")}


def unused_file_fakes(files: Sequence[TestFile], results: list[CaseResult]) -> list[CaseResult]:
    """A file-level fake no case of its file used fails the file's last case (only
    when every case of the file ran: with -k, the others might have used it)."""
    for tf in files:
        mine = [i for i, r in enumerate(results) if r.case.path == tf.path]
        if not tf.fakes or not mine or len(mine) != len(tf.cases) or not tf.complete:
            continue
        used = set().union(*(results[i].file_fakes for i in mine))
        labels = [
            f"fakes.{kind}: {fake.label()}"
            for kind in ("exec", "http")
            for fake in getattr(tf.fakes, kind)
            if (kind, fake.line) not in used
        ]
        if labels:
            last = results[mine[-1]]
            extra = tuple(
                check.Failure(
                    path=tf.path,
                    line=last.case.line,
                    message=f"a file-level fake no case used: {label}; remove it or fix "
                    "its pattern",
                )
                for label in labels
            )
            results[mine[-1]] = replace(last, passed=False, failures=(*last.failures, *extra))
    return results
