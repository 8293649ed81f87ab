"""Test doubles of test files: ``fakes:`` for ``exec.run`` and ``http.*``, and ``real:``.

Owns the declarations (parsed and checked here, with the file:line of each problem),
the matching (program + argument globs, method + URL glob) and what one case saw
(:class:`CaseDoubles`: fakes used, commands or requests nothing matched, what a
``--record`` run captured). The built-ins reach a case's doubles through the session
(``ctx.host("test.exec" | "test.http" | "test.record", ...)``, see
:mod:`harness.runtime.doubles`), so the same fakes answer in-process and in process
workers; a test file's own script never patches anything.

A pattern is a glob (``*``, ``?``, ``[..]``; ``fnmatch``), or a regular expression
written ``re:EXPR`` (searched, anchor it yourself). In ``args:``, ``"**"`` stands for
any number of arguments.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.errors import BuiltinError
from harness.redact import redact, redact_text

KINDS = ("exec", "http")
EXEC_KEYS = ("args", "duration_ms", "exit_code", "program", "stderr", "stdout")
HTTP_KEYS = ("body", "headers", "json", "method", "status", "url")
METHODS = ("GET", "POST")  # what http.* sends

Report = Callable[[tuple[Any, ...], str], None]  # (YAML key path, message) -> None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecFake:
    program: str
    args: tuple[str, ...] | None = None  # None: any arguments
    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    duration_ms: int = 0
    line: int = 0
    scope: str = "case"  # "case" | "file"

    def matches(self, cmd: str, argv: list[str]) -> bool:
        if not _match(self.program, cmd) and not (
            "/" not in self.program and _match(self.program, cmd.rsplit("/", 1)[-1])
        ):
            return False
        return self.args is None or _args(self.args, argv)

    def label(self) -> str:
        args = "" if self.args is None else " " + " ".join(self.args)
        return f"{self.program}{args} (line {self.line})"


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpFake:
    url: str
    method: str | None = None  # None: any method
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str = ""
    line: int = 0
    scope: str = "case"

    def matches(self, method: str, url: str) -> bool:
        return (self.method is None or self.method == method) and _match(self.url, url)

    def label(self) -> str:
        return f"{self.method or '*'} {self.url} (line {self.line})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Fakes:
    exec: tuple[ExecFake, ...] = ()
    http: tuple[HttpFake, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.exec or self.http)

    def over(self, base: Fakes) -> Fakes:
        """These (a case's) first, then ``base`` (the file's): the first match answers."""
        return Fakes(exec=(*self.exec, *base.exec), http=(*self.http, *base.http))


def _match(pattern: str, text: str) -> bool:
    if pattern.startswith("re:"):
        return re.search(pattern[3:], text) is not None
    return fnmatch.fnmatchcase(text, pattern)


def _args(patterns: tuple[str, ...], argv: list[str]) -> bool:
    if not patterns:
        return not argv
    head, rest = patterns[0], patterns[1:]
    if head == "**":
        return any(_args(rest, argv[i:]) for i in range(len(argv) + 1))
    return bool(argv) and _match(head, argv[0]) and _args(rest, argv[1:])


# -- parsing (spec.py calls these with its own problem reporter) ------------------------


def _pattern(value: Any, where: tuple[Any, ...], what: str, report: Report) -> str | None:
    if not isinstance(value, str) or not value:
        report(where, f"{what} must be a non-empty pattern string, got {value!r}")
        return None
    if value.startswith("re:"):
        try:
            re.compile(value[3:])
        except re.error as exc:
            report(where, f'{what}: "{value}" is not a valid regular expression: {exc}')
            return None
    return value


def parse_fakes(
    value: Any, where: tuple[Any, ...], scope: str, report: Report, line_of: Callable[..., int]
) -> Fakes:
    """``fakes: {exec: [...], http: [...]}``; every problem goes to ``report``."""
    if value is None:
        return Fakes()
    if not isinstance(value, Mapping):
        report(where, "fakes must be a mapping with exec: and/or http: lists")
        return Fakes()
    for key in value:
        if key not in KINDS:
            report((*where, key), f'unknown key "{key}" in fakes; known keys: exec, http')
    out: dict[str, list[Any]] = {"exec": [], "http": []}
    for kind in KINDS:
        items = value.get(kind)
        if items is None:
            continue
        if not isinstance(items, list):
            report((*where, kind), f"fakes.{kind} must be a list of fakes")
            continue
        for i, item in enumerate(items):
            at = (*where, kind, i)
            if not isinstance(item, Mapping):
                report(at, f"fakes.{kind}[{i}] must be a mapping")
                continue
            make = _exec_fake if kind == "exec" else _http_fake
            fake = make(item, at, report, line_of(at), scope)
            if fake is not None:
                out[kind].append(fake)
    return Fakes(exec=tuple(out["exec"]), http=tuple(out["http"]))


def _unknown(
    item: Mapping[str, Any], known: tuple[str, ...], at: tuple[Any, ...], r: Report
) -> None:
    for key in item:
        if key not in known and not str(key).startswith("x-"):
            r((*at, key), f'unknown key "{key}" in a fake; known keys: {", ".join(known)}')


def _int(item: Mapping[str, Any], key: str, default: int, at: tuple[Any, ...], r: Report) -> int:
    value = item.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        r((*at, key), f"{key} must be an integer, got {value!r}")
        return default
    return value


def _str(item: Mapping[str, Any], key: str, at: tuple[Any, ...], r: Report) -> str:
    value = item.get(key, "")
    if not isinstance(value, str):
        r((*at, key), f"{key} must be a string, got {type(value).__name__}")
        return ""
    return value


def _exec_fake(
    item: Mapping[str, Any], at: tuple[Any, ...], r: Report, line: int, scope: str
) -> ExecFake | None:
    _unknown(item, EXEC_KEYS, at, r)
    program = _pattern(item.get("program"), (*at, "program"), "program", r)
    args: tuple[str, ...] | None = None
    if "args" in item:
        raw = item["args"]
        if not isinstance(raw, list):
            r((*at, "args"), 'args must be a list of patterns (use "**" for any arguments)')
        else:
            got = [_pattern(a, (*at, "args", j), f"args[{j}]", r) for j, a in enumerate(raw)]
            if all(a is not None for a in got):
                args = tuple(a for a in got if a is not None)
    duration = _int(item, "duration_ms", 0, at, r)
    if duration < 0:
        r((*at, "duration_ms"), "duration_ms must not be negative")
    if program is None:
        return None
    return ExecFake(
        program=program,
        args=args,
        exit_code=_int(item, "exit_code", 0, at, r),
        stdout=_str(item, "stdout", at, r),
        stderr=_str(item, "stderr", at, r),
        duration_ms=max(0, duration),
        line=line,
        scope=scope,
    )


def _http_fake(
    item: Mapping[str, Any], at: tuple[Any, ...], r: Report, line: int, scope: str
) -> HttpFake | None:
    import json

    _unknown(item, HTTP_KEYS, at, r)
    url = _pattern(item.get("url"), (*at, "url"), "url", r)
    method = item.get("method")
    if method is not None and (not isinstance(method, str) or method.upper() not in METHODS):
        r((*at, "method"), f"method must be one of {', '.join(METHODS)}, got {method!r}")
        method = None
    status = _int(item, "status", 200, at, r)
    if not 100 <= status <= 599:
        r((*at, "status"), f"status must be an HTTP status (100-599), got {status}")
    headers = item.get("headers") or {}
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, (str, int)) for k, v in headers.items()
    ):
        r((*at, "headers"), "headers must be a mapping of header names to strings")
        headers = {}
    if "body" in item and "json" in item:
        r((*at, "json"), "give body: or json:, not both")
    body = _str(item, "body", at, r)
    hdrs = {str(k).lower(): str(v) for k, v in headers.items()}
    if "json" in item:
        body = json.dumps(item["json"], ensure_ascii=False)
        hdrs.setdefault("content-type", "application/json")
    if url is None:
        return None
    return HttpFake(
        url=url,
        method=method.upper() if isinstance(method, str) else None,
        status=status,
        headers=hdrs,
        body=body,
        line=line,
        scope=scope,
    )


def parse_real(value: Any, where: tuple[Any, ...], report: Report) -> frozenset[str] | None:
    """``real: [exec, http]``: what a case may run for real when no fake matches."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        report(where, "real must be a list of: exec, http")
        return None
    bad = [v for v in value if v not in KINDS]
    if bad:
        report(where, f"real: unknown {', '.join(map(repr, bad))}; real takes exec and/or http")
    return frozenset(v for v in value if v in KINDS)


# -- one case's doubles (the runner's side of ctx.host) ---------------------------------


class CaseDoubles:
    """What a case's ``exec.run`` and ``http.*`` calls get, and what they did."""

    def __init__(
        self, fakes: Fakes, real: frozenset[str], case: str, path: str, record: bool = False
    ) -> None:
        self.fakes, self.real, self.case, self.path, self.record = fakes, real, case, path, record
        self.used: dict[tuple[str, int], int] = {}  # (kind, index) -> times
        self.unexpected: list[str] = []
        self.recorded: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def host(self, method: str, payload: Mapping[str, Any]) -> Any:
        """``test.exec`` / ``test.http``: ``{"result": ...}`` (a fake answered) or
        ``{"real": True, "record": bool}``; raises for an unexpected one.
        ``test.record``: keep what a real run returned."""
        if method == "test.record":
            with self._lock:
                self.recorded.append((str(payload["kind"]), _recorded(payload)))
            return None
        kind = "exec" if method == "test.exec" else "http"
        if self.record:
            return {"real": True, "record": True}
        if kind == "exec":
            cmd, argv = str(payload["program"]), [str(a) for a in payload["args"]]
            shown = shlex.join([cmd, *argv])
            for i, fake in enumerate(self.fakes.exec):
                if fake.matches(cmd, argv):
                    self._use(kind, i)
                    return {"result": _exec_result(fake)}
            known = [f.label() for f in self.fakes.exec]
        else:
            verb, url = str(payload["method"]), str(payload["url"])
            shown = f"{verb} {url}"
            for i, hfake in enumerate(self.fakes.http):
                if hfake.matches(verb, url):
                    self._use(kind, i)
                    return {"result": _http_result(hfake, url)}
            known = [f.label() for f in self.fakes.http]
        if kind in self.real:
            return {"real": True, "record": False}
        what = "command" if kind == "exec" else "request"
        message = (
            f"unexpected {what} `{shown}`: no fake in {self.path} matches it"
            + (f" (fakes.{kind}: {'; '.join(known)})" if known else "")
            + f"; declare one under fakes.{kind}, or add real: [{kind}] to the case "
            "to let it run for real"
        )
        with self._lock:
            self.unexpected.append(message)
        fn = "exec.run" if kind == "exec" else f"http.{verb.lower()}"
        raise BuiltinError(f"{fn}: {message}")

    def _use(self, kind: str, index: int) -> None:
        with self._lock:
            self.used[(kind, index)] = self.used.get((kind, index), 0) + 1

    def unused(self, scope: str = "case") -> list[str]:
        """Labels of declared fakes of ``scope`` this case never used."""
        out = []
        for kind in KINDS:
            items: tuple[Any, ...] = getattr(self.fakes, kind)
            for i, fake in enumerate(items):
                if fake.scope == scope and (kind, i) not in self.used:
                    out.append(f"fakes.{kind}: {fake.label()}")
        return out

    def used_file_fakes(self) -> frozenset[tuple[str, int]]:
        """(kind, line) of the file-level fakes this case used."""
        out = set()
        for kind, i in self.used:
            fake = getattr(self.fakes, kind)[i]
            if fake.scope == "file":
                out.add((kind, fake.line))
        return frozenset(out)


def _exec_result(fake: ExecFake) -> dict[str, Any]:
    return {
        "ok": fake.exit_code == 0,
        "exit_code": fake.exit_code,
        "stdout": fake.stdout,
        "stderr": fake.stderr,
        "duration_ms": fake.duration_ms,
        "timed_out": False,
        "truncated": False,
    }


def _http_result(fake: HttpFake, url: str) -> dict[str, Any]:
    return {
        "status": fake.status,
        "ok": 200 <= fake.status < 300,
        "headers": dict(fake.headers),
        "body": fake.body,
        "url": url,
    }


def literal(text: str) -> str:
    """A glob that matches ``text`` only (recorded commands and URLs)."""
    out = re.sub(r"([*?\[])", r"[\1]", text)
    return "[r]" + out[1:] if out.startswith("re:") else out


def _secretless(text: str) -> str:
    """A literal pattern of ``text`` where each redacted secret matches anything."""
    return literal(redact_text(text)).replace(literal("[REDACTED]"), "*")


def _recorded(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A fake (as YAML data) from a real call, redacted like audit records: a secret
    in the output becomes ``[REDACTED]``, one in an argument or URL a ``*``."""
    result = payload.get("result") or {}
    if payload["kind"] == "exec":
        return {
            "program": literal(str(payload["program"])),
            "args": [_secretless(str(a)) for a in payload["args"]],
            "exit_code": result.get("exit_code", 0),
            "stdout": redact(result.get("stdout", "")),
            "stderr": redact(result.get("stderr", "")),
            "duration_ms": result.get("duration_ms", 0),
        }
    headers = result.get("headers") or {}
    return {
        "method": payload["method"],
        "url": _secretless(str(payload["url"])),
        "status": result.get("status", 200),
        "headers": {k: redact(v) for k, v in headers.items() if k in ("content-type", "location")},
        "body": redact(result.get("body", "")),
    }
