"""Test files (``.harness/tests/NAME.md``): parsing into frozen specs, and their checks.

Pure: text in, :class:`TestFile` and :class:`~harness.artifacts.model.Problem` out. No
execution, no runtime import, so ``harness validate`` can check test files as it checks
every other artifact. The frontmatter holds the cases; the body says what they cover.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.artifacts.frontmatter import KeyLines, split
from harness.artifacts.model import Problem, Project
from harness.artifacts.problems import EXTENSIONS, a_type, extensions_problem, own_metadata, suggest
from harness.config import KNOWN_KEYS, parse_config
from harness.testing.fakes import Fakes, parse_fakes, parse_real
from harness.testing.paths import static_problems

TESTS_DIR = ".harness/tests"
SETUP_KEYS = ("config", "env", "files", "now")  # what eval cases take too
DOUBLE_KEYS = ("fakes", "real")  # test files only (harness/testing/fakes.py)
FILE_KEYS = tuple(sorted(("cases", "include", *SETUP_KEYS, *DOUBLE_KEYS)))
CALL_KEYS = ("args", "call", "expect")
CASE_KEYS = tuple(
    sorted(
        {
            *("name", "call", "args", "hook", "event", "payload", "steps", "expect"),
            *SETUP_KEYS,
            *DOUBLE_KEYS,
        }
    )
)
STEP_KEYS = ("args", "call", "expect", "name")
CALL_EXPECT = ("blocked_by", "error_contains", "files", "ok", "text_contains", "truncated", "value")
HOOK_EXPECT = ("decision", "payload", "reason_contains")
DECISIONS = ("allow", "block", "modify", "error")


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    """What a case starts from: fixture files, command environment, clock, config."""

    files: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    now: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    config_line: int = 0  # line of the innermost `config:` (for its problems)
    fakes: Fakes = field(default_factory=Fakes)  # the case's first, then the file's
    real: frozenset[str] = frozenset()  # exec/http that may run for real (no fake matched)
    include: tuple[str, ...] = ()  # the file's include: (left-out paths the copy keeps)


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One call of a case: ``call`` with ``args``, checked against ``expect``."""

    call: str
    args: Mapping[str, Any] = field(default_factory=dict)
    expect: Mapping[str, Any] = field(default_factory=dict)
    line: int = 0
    name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """A call case (one step), a sequence (several steps) or a hook case (``hook``)."""

    name: str
    path: str  # the test file, as given to the parser
    line: int
    kind: str  # "call" | "steps" | "hook"
    setup: Setup
    steps: tuple[Step, ...] = ()
    hook: str = ""
    event: str = ""
    payload: Mapping[str, Any] = field(default_factory=dict)
    expect: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.path}::{self.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class TestFile:
    path: str
    description: str = ""
    cases: tuple[Case, ...] = ()
    problems: tuple[Problem, ...] = ()
    # Paths the case copies keep although copies leave them out (.git, .venv, ...).
    include: tuple[str, ...] = ()
    fakes: Fakes = field(default_factory=Fakes)  # the file-level ones (all must be used)
    complete: bool = True  # False when -k left cases out


Names = Callable[[str], "str | None"]  # unknown name -> message, or None when known


def test_files(root: Path) -> list[tuple[str, Path]]:
    """``(relative path, path)`` of every ``.harness/tests/*.md``, sorted."""
    folder = root / TESTS_DIR
    if not folder.is_dir():
        return []
    return [
        (f"{TESTS_DIR}/{p.name}", p)
        for p in sorted(folder.iterdir())
        if p.name.endswith(".md") and p.is_file()
    ]


def parse(text: str | bytes, path: str) -> TestFile:
    """Parse one test file; every problem (with its line) comes back, nothing raises."""
    data, body, lines, problems = split(text, path, "test")
    p = _Parser(path, lines, list(problems))
    if data or not problems:
        cases = p.file(data)
    else:
        cases = []
    include = p.file_include
    return TestFile(
        path=path,
        description=body,
        cases=tuple(cases),
        problems=tuple(p.problems),
        include=include,
        fakes=p.file_fakes,
    )


class _Parser:
    def __init__(self, path: str, lines: KeyLines, problems: list[Problem]) -> None:
        self.path = path
        self.lines = lines
        self.problems = problems
        self.file_fakes = Fakes()
        self.file_include: tuple[str, ...] = ()

    def at(self, keys: tuple[Any, ...]) -> int:
        return self.lines.key(keys, (1, 1))[0] if keys else 1

    def add(self, keys: tuple[Any, ...], code: str, msg: str, severity: str = "error") -> None:
        line, column = self.lines.key(keys, (1, 1)) if keys else (1, 1)
        self.problems.append(
            Problem(
                path=self.path,
                line=line,
                column=column,
                severity=severity,  # type: ignore[arg-type]
                code=code,
                message=msg,
            )
        )

    def unknown(
        self, where: tuple[Any, ...], data: Mapping[str, Any], known: Iterable[str], what: str
    ) -> None:
        known = sorted(known)
        why = extensions_problem(data)
        if why is not None:
            self.add((*where, EXTENSIONS), "test-invalid", f"{what}: {why}")
        for key in data:
            if key in known or own_metadata(key):
                continue
            hint = suggest(key, known)
            # An error (issue 23): a misspelt `expect:` would make a case check nothing.
            self.add(
                (*where, key),
                "test-unknown-key",
                f'unknown key "{key}" in {what}{hint}; known keys: {", ".join(known)} '
                "(your own metadata: x-... or extensions:)",
            )

    def mapping(self, where: tuple[Any, ...], value: Any, what: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.add(where, "test-invalid", f"{what} must be a mapping, got {a_type(value)}")
            return {}
        return dict(value)

    def setup(self, where: tuple[Any, ...], data: Mapping[str, Any], base: Setup) -> Setup:
        files = dict(base.files)
        for rel, text in self.mapping((*where, "files"), data.get("files"), "files").items():
            if not isinstance(text, str):
                self.add(
                    (*where, "files", rel),
                    "test-invalid",
                    f'files: the content of "{rel}" must be a string, got {a_type(text)}',
                )
            elif not isinstance(rel, str) or not _relative(rel):
                self.add(
                    (*where, "files", rel),
                    "test-invalid",
                    f'files: "{rel}" must be a relative path inside the workspace '
                    '(no "..", not absolute, not under .harness/)',
                )
            else:
                files[rel] = text
        env = dict(base.env)
        for name, value in self.mapping((*where, "env"), data.get("env"), "env").items():
            if isinstance(value, (dict, list)) or value is None:
                self.add(
                    (*where, "env", name),
                    "test-invalid",
                    f'env: "{name}" must be a string, got {a_type(value)}',
                )
            else:
                env[str(name)] = value if isinstance(value, str) else _scalar(value)
        now = base.now
        if "now" in data:
            raw = data["now"]
            if not isinstance(raw, str) or not _rfc3339(raw):
                self.add(
                    (*where, "now"),
                    "test-invalid",
                    f'now must be an RFC 3339 time such as "2026-01-05T09:00:00Z", got {raw!r}',
                )
            else:
                now = raw
        config = _merge(base.config, self.mapping((*where, "config"), data.get("config"), "config"))
        config_line = self.at((*where, "config")) if "config" in data else base.config_line

        def report(keys: tuple[Any, ...], message: str) -> None:
            self.add(keys, "test-invalid", message)

        scope = "case" if where else "file"
        fakes = parse_fakes(data.get("fakes"), (*where, "fakes"), scope, report, self.at)
        if not where:
            self.file_fakes = fakes
        real = parse_real(data.get("real"), (*where, "real"), report)
        return Setup(
            files=files,
            env=env,
            now=now,
            config=config,
            config_line=config_line,
            fakes=fakes.over(base.fakes),
            real=base.real if real is None else real,
            include=base.include,
        )

    def include(self, value: Any) -> tuple[str, ...]:
        """``include: [.git, .venv]``: left-out paths the case copies keep."""
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.add(
                ("include",), "test-invalid", "include must be a list of paths, e.g. [.git, .venv]"
            )
            return ()
        out = []
        for i, rel in enumerate(value):
            clean = rel.strip().rstrip("/")
            if not clean or not _relative(clean) and clean != ".harness":
                self.add(
                    ("include", i),
                    "test-invalid",
                    f'include: "{rel}" must be a relative path inside the project (no "..")',
                )
            elif clean == ".harness" or clean.startswith(".harness/"):
                self.add(
                    ("include", i),
                    "test-invalid",
                    'include: ".harness" cannot be included: the case runs the project\'s '
                    "tools and hooks, not a copy of them",
                )
            else:
                out.append(clean)
        return tuple(out)

    def file(self, data: Mapping[str, Any]) -> list[Case]:
        self.unknown((), data, FILE_KEYS, "a test file")
        self.file_include = self.include(data.get("include"))
        base = replace(self.setup((), data, Setup()), include=self.file_include)
        raw = data.get("cases")
        if not isinstance(raw, list) or not raw:
            self.add(
                ("cases",) if "cases" in data else (),
                "test-invalid",
                "a test file needs `cases:`, a list of cases (each with call:, hook: or steps:)",
            )
            return []
        cases: list[Case] = []
        seen: dict[str, int] = {}
        for i, item in enumerate(raw):
            case = self.case(("cases", i), item, base, i)
            if case is None:
                continue
            if case.name in seen:
                self.add(
                    ("cases", i, "name"),
                    "test-duplicate",
                    f'case name "{case.name}" is used twice (first on line '
                    f"{seen[case.name]}); names select cases with -k",
                )
            seen.setdefault(case.name, case.line)
            cases.append(case)
        return cases

    def case(self, where: tuple[Any, ...], item: Any, base: Setup, index: int) -> Case | None:  # noqa: C901
        if not isinstance(item, Mapping):
            self.add(
                where, "test-invalid", f"case {index + 1} must be a mapping, got {a_type(item)}"
            )
            return None
        self.unknown(where, item, CASE_KEYS, f"case {index + 1}")
        line = self.at(where)
        name = item.get("name")
        if name is not None and not isinstance(name, str):
            self.add((*where, "name"), "test-invalid", f"name must be a string, got {a_type(name)}")
            name = None
        kinds = [k for k in ("call", "hook", "steps") if k in item]
        label = name or f"case {index + 1}"
        if len(kinds) != 1:
            got = ", ".join(kinds) if kinds else "none of them"
            self.add(
                where,
                "test-invalid",
                f'case "{label}" needs exactly one of call:, hook: or steps: (has {got})',
            )
            return None
        setup = self.setup(where, item, base)
        kind = kinds[0]
        if kind == "hook":
            hook = item["hook"]
            if not isinstance(hook, str):
                self.add(
                    (*where, "hook"),
                    "test-invalid",
                    f"hook must be a hook name, got {a_type(hook)}",
                )
                return None
            for key in ("args", "call"):
                if key in item:
                    self.add(
                        (*where, key),
                        "test-invalid",
                        f'"{key}" belongs to call cases; '
                        "a hook case has event:, payload: and expect:",
                    )
            expect = self.mapping((*where, "expect"), item.get("expect"), "expect")
            self.unknown((*where, "expect"), expect, HOOK_EXPECT, "a hook case's expect")
            decision = expect.get("decision")
            if decision is not None and decision not in DECISIONS:
                self.add(
                    (*where, "expect", "decision"),
                    "test-invalid",
                    f"expect.decision must be one of {', '.join(DECISIONS)}; got {decision!r}",
                )
            if "reason_contains" in expect and not isinstance(expect["reason_contains"], str):
                self.add(
                    (*where, "expect", "reason_contains"),
                    "test-invalid",
                    "expect.reason_contains must be a string",
                )
            event = item.get("event")
            if event is not None and not isinstance(event, str):
                self.add((*where, "event"), "test-invalid", "event must be a string")
                event = None
            payload = self.mapping((*where, "payload"), item.get("payload"), "payload")
            return Case(
                name=name or f"hook {hook} #{index + 1}",
                path=self.path,
                line=line,
                kind="hook",
                setup=setup,
                hook=hook,
                event=event or "",
                payload=payload,
                expect=expect,
            )
        for key in ("event", "payload"):
            if key in item:
                self.add((*where, key), "test-invalid", f'"{key}" belongs to hook cases')
        if kind == "call":
            step = self.step(where, item, known=())
            if step is None:
                return None
            return Case(
                name=name or f"call {step.call} #{index + 1}",
                path=self.path,
                line=line,
                kind="call",
                setup=setup,
                steps=(replace(step, name=""),),
            )
        raw = item["steps"]
        if not isinstance(raw, list) or not raw:
            self.add(
                (*where, "steps"),
                "test-invalid",
                "steps must be a non-empty list of calls (each with call:, args:, expect:)",
            )
            return None
        for key in ("args", "expect"):
            if key in item:
                self.add((*where, key), "test-invalid", f'"{key}" goes inside each step of steps:')
        steps = []
        for j, raw_step in enumerate(raw):
            if not isinstance(raw_step, Mapping):
                self.add(
                    (*where, "steps", j),
                    "test-invalid",
                    f"step {j + 1} must be a mapping "
                    f"with call:, args: and expect:, got {a_type(raw_step)}",
                )
                continue
            self.unknown((*where, "steps", j), raw_step, STEP_KEYS, f"step {j + 1}")
            step = self.step((*where, "steps", j), raw_step, known=STEP_KEYS)
            if step is not None:
                steps.append(step)
        return Case(
            name=name or f"steps #{index + 1}",
            path=self.path,
            line=line,
            kind="steps",
            setup=setup,
            steps=tuple(steps),
        )

    def step(
        self, where: tuple[Any, ...], item: Mapping[str, Any], known: tuple[str, ...]
    ) -> Step | None:
        tool = item.get("call")
        if not isinstance(tool, str):
            self.add(
                (*where, "call"), "test-invalid", f"call must be a tool name, got {a_type(tool)}"
            )
            return None
        args = self.mapping((*where, "args"), item.get("args"), "args")
        expect = self.mapping((*where, "expect"), item.get("expect"), "expect")
        self.unknown((*where, "expect"), expect, CALL_EXPECT, "a call's expect")
        for key in ("ok", "truncated"):
            if key in expect and not isinstance(expect[key], bool):
                self.add(
                    (*where, "expect", key),
                    "test-invalid",
                    f"expect.{key} must be true or false, got {a_type(expect[key])}",
                )
        for key in ("text_contains", "error_contains", "blocked_by"):
            value = expect.get(key)
            if key in expect and not (
                isinstance(value, str)
                or (
                    key != "blocked_by"
                    and isinstance(value, list)
                    and all(isinstance(v, str) for v in value)
                )
            ):
                self.add(
                    (*where, "expect", key),
                    "test-invalid",
                    f"expect.{key} must be a string"
                    + ("" if key == "blocked_by" else " or a list of strings"),
                )
        files = self.mapping((*where, "expect", "files"), expect.get("files"), "expect.files")
        for rel, want in files.items():
            ok = isinstance(want, str) or (
                isinstance(want, Mapping)
                and (
                    dict(want) == {"absent": True}
                    or set(want) == {"contains"}
                    and isinstance(want["contains"], str)
                )
            )
            if not ok:
                self.add(
                    (*where, "expect", "files", rel),
                    "test-invalid",
                    f'expect.files: "{rel}" must be the exact content (a string), '
                    "{absent: true} or {contains: TEXT}",
                )
        return Step(
            call=tool,
            args=args,
            expect=expect,
            line=self.at(where),
            name=str(item.get("name") or ""),
        )


def _relative(rel: str) -> bool:
    parts = Path(rel).parts
    return (
        bool(rel)
        and not Path(rel).is_absolute()
        and ".." not in parts
        and parts[0] not in (".harness",)
    )


def _rfc3339(text: str) -> bool:
    try:
        datetime.fromisoformat(text.strip())
    except ValueError:
        return False
    return True


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


# -- checks against the project (what validate adds) -----------------------------------


def check_against(
    tf: TestFile, project: Project, lines: Mapping[str, int] | None = None
) -> list[Problem]:
    """Problems of cases that name unknown tools or hooks, or a hook's wrong event."""
    tools = set(project.tools) | {"read_output"}
    hooks = {h.name: h for h in project.hooks}
    out: list[Problem] = []

    def add(line: int, code: str, msg: str) -> None:
        out.append(Problem(path=tf.path, line=line, column=1, code=code, message=msg))

    for case in tf.cases:
        if case.kind == "hook":
            hook = hooks.get(case.hook)
            if hook is None:
                known = ", ".join(sorted(hooks)) or "none"
                add(
                    case.line,
                    "test-unknown-hook",
                    f'case "{case.name}": unknown hook '
                    f'"{case.hook}"{suggest(case.hook, hooks)}; hooks: {known}',
                )
            elif case.event and case.event != hook.event:
                add(
                    case.line,
                    "test-invalid",
                    f'case "{case.name}": hook "{hook.name}" '
                    f'handles "{hook.event}", not "{case.event}"; fix event: or leave it out',
                )
            continue
        for step in case.steps:
            if step.call not in tools:
                add(
                    step.line,
                    "test-unknown-tool",
                    f'case "{case.name}": unknown tool '
                    f'"{step.call}"{suggest(step.call, tools)}; tools: '
                    f"{', '.join(sorted(tools))}",
                )
            blocked = step.expect.get("blocked_by")
            if isinstance(blocked, str) and blocked not in hooks:
                add(
                    step.line,
                    "test-unknown-hook",
                    f'case "{case.name}": expect.blocked_by '
                    f'names unknown hook "{blocked}"{suggest(blocked, hooks)}',
                )
    return out


def check_config(tf: TestFile, root: Path) -> list[Problem]:
    """``config:`` overrides and ``now:`` checked as harness.md keys are."""
    out: list[Problem] = []
    seen: set[str] = set()
    for case in tf.cases:
        overrides = dict(case.setup.config)
        key = json.dumps(overrides, sort_keys=True, default=str)
        if not overrides or key in seen:
            continue  # a file-level config: is reported once, with its first case
        seen.add(key)

        for key in overrides:
            if key in KNOWN_KEYS and key not in ("tools", "hooks"):
                continue
            out.append(
                Problem(
                    path=tf.path,
                    line=case.setup.config_line or case.line,
                    column=1,
                    code="test-unknown-key",
                    message=f'case "{case.name}": config key "{key}" cannot be '
                    f"overridden{suggest(key, KNOWN_KEYS)}; config: takes "
                    "harness.md settings such as limits, exec, network, clock",
                )
            )
        for message in static_problems(overrides):
            out.append(
                Problem(
                    path=tf.path,
                    line=case.setup.config_line or case.line,
                    column=1,
                    severity="error",
                    code="test-config-path",
                    message=f'case "{case.name}": {message}',
                )
            )
        _cfg, problems = parse_config(overrides, root)
        for p in problems:
            out.append(
                Problem(
                    path=tf.path,
                    line=case.setup.config_line or case.line,
                    column=1,
                    severity=p.severity,
                    code=p.code,
                    message=f'case "{case.name}": {p.message}',
                )
            )
    return out
