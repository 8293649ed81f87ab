"""``check_project``: everything ``harness validate`` can know without running a tool.

Loading (:mod:`harness.artifacts.loader`) + structural checks
(:mod:`harness.artifacts.checks`) + static Starlark checks
(:mod:`harness.runtime.static`). Returns a :class:`Project` whose ``problems`` are
sorted by path, line and column. Never raises for content problems.

Large projects use every core (``PARALLEL``): the ``.harness/tools|hooks/*.md`` files
are cut into chunks that this process and forked children take from a shared queue;
each reads, splits and builds its files and runs their per-artifact checks
(:func:`analyse`). Layering, duplicates and overrides stay in this process, which
merges the results in the serial order: the problems are exactly those of the serial
path, in the same order. A fork happens only when no other thread runs (Linux).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.artifacts import checks
from harness.artifacts.checks import Entry
from harness.artifacts.frontmatter import KeyLines
from harness.artifacts.loader import Prepared, artifact_files, find_root, load, prepare_all
from harness.artifacts.model import HookSpec, Problem, Project, ToolSpec
from harness.guards import check as guards
from harness.runtime.static import check_script

# None: fork when the project has at least PARALLEL_MIN_FILES tool/hook files and more
# than one core is usable; True: always fork when it is safe (tests); False: never.
PARALLEL: bool | None = None
PARALLEL_MIN_FILES = 64
CHUNK_FILES = 32  # files per chunk: large enough to run each phase over many files
MAX_CHUNKS = 4096  # chunk numbers are queued in a pipe, 4 bytes each
RESULT_PIPE_BYTES = 1 << 20  # a child rarely waits for this process to read


@dataclass(frozen=True, slots=True, kw_only=True)
class Analysed:
    """One file's :class:`Prepared` plus the problems of its per-artifact checks."""

    prepared: Prepared
    checks: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelRun:
    """How the last :func:`check_project` split its files (for tests and benchmarks)."""

    files: tuple[int, ...] = ()  # files per process, this one first; () = serial
    fallbacks: int = 0  # chunks redone here because the child that took them died


last_run = ParallelRun()

Job = tuple[str, str, str]  # (relative path, path, kind)


def check_project(root: Path | None = None, *, strict: bool = False) -> Project:
    """Load ``root`` (default: discovered from the current directory) and check everything.

    ``strict`` turns the remaining unknown-key warnings (schema keywords in parameters
    and ``returns``, keys under ``annotations``) into errors; misspelt top-level and
    settings keys are errors anyway.
    """
    global last_run
    root = find_root(Path.cwd()) if root is None else Path(root)
    with _no_gc():
        analysed, last_run = _analyse_files(root)
        loaded = load(root, {rel: a.prepared for rel, a in analysed.items()})
        done = {
            id(a.prepared.entry): a.checks
            for a in analysed.values()
            if a.prepared.entry is not None
        }
        project = loaded.project
        items: list[tuple[Entry, ToolSpec | HookSpec]] = [
            (loaded.tool_entries[name], spec) for name, spec in project.tools.items()
        ]
        items.extend((loaded.hook_entries[hook.name], hook) for hook in project.hooks)
        todo = [item for item in items if id(item[0]) not in done]
        for (entry, _spec), found in zip(todo, run_checks(todo), strict=True):
            done[id(entry)] = tuple(found)
        problems: list[Problem] = list(project.problems)
        for entry, _spec in items:
            problems.extend(done[id(entry)])
        # What hooks read, checked against the payloads, tools and decisions of the
        # whole project (harness/guards): needs every tool, so it runs here.
        if project.hooks:
            known = guards.facts(project)
            for hook in project.hooks:
                entry = loaded.hook_entries[hook.name]
                problems.extend(
                    guards.check_hook(hook, entry.path, entry.label, known, entry.pos("event"))
                )
        problems.extend(_unbounded(project, loaded.tool_entries))
        if strict:
            problems = [
                replace(p, severity="error") if p.code in checks.UNKNOWN_KEY_CODES else p
                for p in problems
            ]
        problems.sort(key=lambda p: (p.path, p.line, p.column, p.code))
        # Drop the entries and file results before the collector runs again: it then
        # only has the project to look at.
        del analysed, loaded, done, items, todo
        return replace(project, problems=tuple(problems))


def _unbounded(project: Project, entries: Mapping[str, Entry]) -> Iterator[Problem]:
    """A warning for each script tool without ``timeout_ms`` when
    ``limits.default_timeout_ms`` is 0: nothing but ``limits.max_timeout_ms`` stops it."""
    limits = project.config.limits
    if limits.default_timeout_ms:
        return
    cap = f"{limits.max_timeout_ms} ms" if limits.max_timeout_ms else "no limit at all"
    for name, spec in project.tools.items():
        if spec.script and not spec.timeout_ms and name in entries:
            yield entries[name].problem(
                ("script",),
                "timeout-unbounded",
                f'tool "{name}" sets no timeout_ms and limits.default_timeout_ms is 0, so '
                f"a runaway call runs up to limits.max_timeout_ms ({cap}); add timeout_ms "
                "to the tool or set limits.default_timeout_ms in harness.md",
                "warning",
            )


def run_checks(items: Sequence[tuple[Entry, ToolSpec | HookSpec]]) -> list[list[Problem]]:
    """The per-artifact checks of each loaded tool (its schemas, then its script) and hook
    (its script, then its ``when``), in that order for each.

    Run phase by phase over all items (every schema, then every script): the same
    native code stays hot in the caches, which is measurably faster than item by item.
    """
    found: list[list[Problem]] = [[] for _ in items]
    for out, (entry, spec) in zip(found, items, strict=True):
        if isinstance(spec, ToolSpec):
            out.extend(checks.schema_problems(entry, spec))
            out.extend(checks.script_warnings(entry, spec))
    for out, (entry, spec) in zip(found, items, strict=True):
        if isinstance(spec, ToolSpec):
            if spec.script is not None:
                out.extend(
                    check_script(
                        spec.script,
                        entry.path,
                        spec.script_line,
                        "tool",
                        first_column=spec.script_column,
                        owner=entry.label,
                    )
                )
            continue
        if spec.script:
            out.extend(
                check_script(
                    spec.script,
                    entry.path,
                    spec.script_line,
                    "hook",
                    first_column=spec.script_column,
                    owner=entry.label,
                )
            )
        if spec.when is not None:
            out.extend(
                check_script(
                    spec.when,
                    entry.path,
                    spec.when_line,
                    "when",
                    first_column=spec.when_column,
                    owner=entry.label,
                )
            )
    return found


def analyse(jobs: Sequence[Job]) -> list[tuple[str, Analysed]]:
    """Prepare and check each file on its own (what one process does with its share).

    Phase by phase over the whole share, as the serial path does (:func:`run_checks`).
    """
    preps = prepare_all([(Path(path), rel, kind) for rel, path, kind in jobs])
    items = [(p.entry, p.spec) for p in preps if p.entry is not None and p.spec is not None]
    found = iter(run_checks(items))
    for entry, _spec in items:
        # Key positions are only read by the steps above: free them now (in every
        # process, while the others work) rather than all at once in this one at the end.
        entry.lines = KeyLines()
    out = []
    for (rel, _path, _kind), prep in zip(jobs, preps, strict=True):
        has = prep.entry is not None and prep.spec is not None
        out.append((rel, Analysed(prepared=prep, checks=tuple(next(found)) if has else ())))
    return out


def _analyse_files(root: Path) -> tuple[dict[str, Analysed], ParallelRun]:
    """Every tool/hook file analysed by this process and forked children, or nothing
    (``{}``: :func:`load` and :func:`run_checks` then do the work serially).

    The files are cut into chunks whose numbers wait in a pipe; every process takes the
    next number until none is left, so a process on a busy core simply takes fewer.
    A child sends each chunk's result as soon as it has it; any chunk whose result does
    not arrive intact (the child died) is redone here.
    """
    processes = _processes()
    if processes < 2:
        return {}, ParallelRun()
    jobs = [(rel, str(path), kind) for rel, path, kind in artifact_files(root)]
    if not jobs or (PARALLEL is None and len(jobs) < PARALLEL_MIN_FILES):
        return {}, ParallelRun()
    if not _single_threaded():
        return {}, ParallelRun()
    # Import what the children need before forking, so it is imported once.
    import jsonschema_rs  # noqa: F401

    size = max(CHUNK_FILES, -(-len(jobs) // MAX_CHUNKS))
    chunks = [jobs[i : i + size] for i in range(0, len(jobs), size)]
    queue_r, queue_w = os.pipe()
    queued = memoryview(b"".join(i.to_bytes(4, "little") for i in range(len(chunks))))
    try:  # at most MAX_CHUNKS * 4 bytes: fits the pipe before anybody reads
        while queued:
            queued = queued[os.write(queue_w, queued) :]
    finally:
        os.close(queue_w)
    children: list[_Child] = []
    results: dict[str, Analysed] = {}
    own: set[int] = set()
    try:
        for _ in range(processes - 1):
            children.append(_Child.fork(chunks, queue_r))
        # What only this process needs later is imported now, while the children work.
        import pickle  # noqa: F401

        import harness.config  # noqa: F401

        for index in _claims(queue_r):
            results.update(analyse(chunks[index]))
            own.add(index)
            for child in children:  # unpickle what has come while the children still work
                child.receive(block=False)
        for child in children:
            child.receive(block=True)
            for part in child.parts.values():
                results.update(part)
        # Chunks taken by a child that died before sending them.
        missing = [
            i
            for i in range(len(chunks))
            if i not in own and not any(i in child.parts for child in children)
        ]
        for index in missing:
            results.update(analyse(chunks[index]))
            own.add(index)
    finally:
        os.close(queue_r)
        for child in children:
            child.close()
    counts = [sum(len(chunks[i]) for i in own)]
    counts.extend(sum(map(len, child.parts.values())) for child in children)
    return results, ParallelRun(files=tuple(counts), fallbacks=len(missing))


def _processes() -> int:
    if PARALLEL is False or not hasattr(os, "fork"):
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(cores, 2) if PARALLEL else cores


def _single_threaded() -> bool:
    """Forking is only safe with no other thread (Python's or native): Linux tells."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _claims(queue: int) -> Iterator[int]:
    """Chunk numbers taken from the shared queue (4-byte reads are never split)."""
    while True:
        raw = os.read(queue, 4)
        if len(raw) != 4:
            return
        yield int.from_bytes(raw, "little")


class _Child:
    """A forked process taking chunks from the queue; its results arrive through a pipe,
    each as an 8-byte length and a pickle of ``(chunk number, wire)``."""

    def __init__(self, pid: int, fd: int, chunks: list[list[Job]]) -> None:
        self.pid: int | None = pid
        self.fd: int | None = fd
        self.chunks = chunks
        self.buffer = bytearray()
        self.parts: dict[int, list[tuple[str, Analysed]]] = {}

    @classmethod
    def fork(cls, chunks: list[list[Job]], queue: int) -> _Child:
        read_fd, write_fd = os.pipe()
        try:
            import fcntl

            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, RESULT_PIPE_BYTES)
        except (ImportError, AttributeError, OSError):
            pass  # a smaller pipe only makes the child wait for this process to read
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child (coverage does not follow it)
            code = 1
            try:
                import pickle

                os.close(read_fd)
                with open(write_fd, "wb") as out:
                    for index in _claims(queue):
                        data = pickle.dumps(
                            (index, _encode(analyse(chunks[index]))),
                            protocol=pickle.HIGHEST_PROTOCOL,
                        )
                        out.write(len(data).to_bytes(8, "little"))
                        out.write(data)
                        out.flush()
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        return cls(pid, read_fd, chunks)

    def receive(self, *, block: bool) -> None:
        """Decode every complete result that has arrived; with ``block``, wait for the
        child to finish first (then it is reaped)."""
        if self.fd is None:
            return
        if block:
            os.set_blocking(self.fd, True)
        while True:
            try:
                data = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                break
            if not data:  # the child has finished: reap it
                os.close(self.fd)
                self.fd = None
                if self.pid is not None:
                    os.waitpid(self.pid, 0)
                    self.pid = None
                break
            self.buffer += data
            self._decode_frames()

    def _decode_frames(self) -> None:
        import pickle

        buffer = self.buffer
        start = 0
        while len(buffer) - start >= 8:
            size = int.from_bytes(buffer[start : start + 8], "little")
            if len(buffer) - start - 8 < size:
                break
            frame = bytes(buffer[start + 8 : start + 8 + size])
            start += 8 + size
            try:
                index, wire = pickle.loads(frame)
                part = _decode(wire)
            except Exception:  # noqa: BLE001 - a broken result is redone, never trusted
                continue
            if (
                isinstance(index, int)
                and 0 <= index < len(self.chunks)
                and [rel for rel, _ in part] == [job[0] for job in self.chunks[index]]
            ):
                self.parts[index] = part
        del buffer[:start]

    def close(self) -> None:
        """Stop listening; a child still running (this process failed) is killed, and reaped."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.pid is not None:
            pid, self.pid = self.pid, None
            done, _status = os.waitpid(pid, os.WNOHANG)
            if not done:
                import signal

                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


# What crosses the pipe: per file (rel, split problems, entry fields or None, spec, spec
# problems, check problems). An entry has no key positions (``lines``) by then: what reads
# them (field checks, spec building, checks) has run, and layering only needs the name,
# path and line of a file artifact.
Wire = tuple[
    str,
    tuple[Problem, ...],
    tuple[str, str, Mapping[str, Any], str, str, str | None, int] | None,
    ToolSpec | HookSpec | None,
    tuple[Problem, ...],
    tuple[Problem, ...],
]


def _encode(results: list[tuple[str, Analysed]]) -> list[Wire]:
    out: list[Wire] = []
    for rel, found in results:
        prep, e = found.prepared, found.prepared.entry
        fields = None if e is None else (e.kind, e.name, e.data, e.path, e.layer, e.body, e.line)
        out.append((rel, prep.problems, fields, prep.spec, prep.spec_problems, found.checks))
    return out


def _decode(wire: list[Wire]) -> list[tuple[str, Analysed]]:
    out = []
    for rel, problems, fields, spec, spec_problems, found in wire:
        entry = None
        if fields is not None:
            kind, name, data, path, layer, body, line = fields
            entry = Entry(
                kind=kind,
                name=name,
                data=data,
                lines=KeyLines(),
                base=(),
                path=path,
                layer=layer,
                body=body,
                line=line,
            )
        prep = Prepared(problems=problems, entry=entry, spec=spec, spec_problems=spec_problems)
        out.append((rel, Analysed(prepared=prep, checks=found)))
    return out


@contextmanager
def _no_gc() -> Iterator[None]:
    """Loading allocates many containers and frees few cycles: collect afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
