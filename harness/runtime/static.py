"""Static checks of Starlark scripts for ``harness validate`` (nothing is executed).

``check_script`` parses with starlark-pyo3 in the dialect the engine uses, runs its
linter and its globals check (``AstModule.typecheck``), then checks what the parser
cannot know: ``module.function`` uses against the built-in surface of docs/spec.md §7
(:mod:`harness.surface`), ``load`` statements, and the entry point (``run(args)``
for tools, ``handle(event, payload)`` for hooks).

Every check yields location-free :class:`Finding` s: positions inside the script
(line 1 is its first line, columns as written), messages without the owner. One
driver, :func:`check_script`, maps them to the file (where the script starts, its block
indentation, the ``when`` wrapper) and names the owner, the way jsonschema's keyword
functions yield errors and the validator adds the path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any, NamedTuple

import re2
import starlark as sl

from harness import surface
from harness.artifacts.model import Problem
from harness.artifacts.problems import Severity, suggest
from harness.runtime import nesting
from harness.runtime.builtins.calls import rename_calls

ALWAYS = frozenset(("struct", "print", "fail"))
WHEN_TARGET = "__when__"
_WHEN_PREFIX = f"def {WHEN_TARGET}(event, payload): return ("
# Lints that are noise in short tool scripts (the engine ignores them too).
_SKIP_LINTS = frozenset(("unused-argument", "unused-assign", "underscore-assign", "unused-load"))
_NOT_FOUND = re.compile(r"Variable `([^`]+)` not found")
_LOCATION = re.compile(r"-->\s*[^\n]*?:(\d+):(\d+)")
# Strings and comments (skipped) or ``name.attr`` (checked).
_TOKENS = re.compile(
    r"""(?P<skip>\#[^\n]*|[rRbB]{{0,2}}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))"""
    r"""|(?<![\w.])(?P<mod>{})[ \t]*\.[ \t]*(?P<attr>[A-Za-z_]\w*)""".format(
        "|".join(sorted(surface.TOOL_MODULES, key=len, reverse=True))
    )
)
# The same matches as ``(?<![\w.])(fs|...)``, with each name checked after it matched: a
# pattern that starts with the names lets the regex engine skip to their first letters.
_QUICK = re.compile(
    r"({})[ \t]*\.[ \t]*([A-Za-z_]\w*)".format(
        "|".join(
            rf"{name}(?<![\w.]{name})"
            for name in sorted(surface.TOOL_MODULES, key=len, reverse=True)
        )
    )
)
# Strings and comments only (masked before scanning for structure).
_SKIP = re.compile(
    r"""\#[^\n]*|[rRbB]{0,2}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")"""
)
# A statement at column 0 that binds names: a def, or an assignment (target = value).
_TOP = re.compile(
    r"^(?:def[ \t]+(?P<def>[A-Za-z_]\w*)[ \t]*\("
    r"|(?P<target>[A-Za-z_(\[][\w \t,()\[\]]*?)=(?!=)(?P<value>[^\n]*))",
    re.M,
)
_LAMBDA = re.compile(r"lambda(?![\w])")
_QUOTE = re.compile(r"['\"#]")
_NAME = re.compile(r"[A-Za-z_]\w*")
_OPEN, _CLOSE = "([{", ")]}"
# ``mod = ...``, ``mod, x = ...``, ``for mod in``: the script rebinds a module name.
# RE2 (linear time: the text is a model's script, of any size); ``=(?!=)`` written as
# ``=`` followed by another character or the end.
_REBIND = r"(?m)(?:^|[\s,(])%s[ \t]*(?:=(?:[^=]|\z)|,[^\n]*=(?:[^=]|\z)|\bin\b)"
_PARAM = r"def\s+\w+\s*\([^)]*\b%s\b"  # a function parameter named like the module
_DEF = r"def\s+%s\b"  # a function named like the module


@cache
def _binding_pattern(template: str, mod: str) -> Any:
    return re2.compile(template % re2.escape(mod))


class Bindings:
    """Whether a script rebinds a module name, each fact computed once per name per
    script with one linear-time RE2 search (issue 22 review F1: per call, with Python
    ``re``, a 32 KB script cost seconds)."""

    __slots__ = ("source", "_facts")
    searches = 0  # every search made, for the attack test (tests/security)

    def __init__(self, source: str) -> None:
        self.source = source
        self._facts: dict[tuple[str, str], bool] = {}

    def _fact(self, template: str, mod: str) -> bool:
        key = (template, mod)
        found = self._facts.get(key)
        if found is None:
            Bindings.searches += 1
            found = _binding_pattern(template, mod).search(self.source) is not None
            self._facts[key] = found
        return found

    def rebound(self, mod: str) -> bool:
        """Assigned, unpacked into, looped over, or a parameter of a function."""
        return self._fact(_REBIND, mod) or self._fact(_PARAM, mod)

    def defined(self, mod: str) -> bool:
        """A function of that name is defined."""
        return self._fact(_DEF, mod)


@cache
def dialect() -> sl.Dialect:
    """The dialect the engine runs scripts in (``load`` is parsed here to report it)."""
    return sl.Dialect.standard()


@cache
def _globals() -> sl.Globals:
    return sl.Globals.extended_by([sl.LibraryExtension.StructType])


@cache
def provided(kind: str) -> frozenset[str]:
    """Names our runtime binds for a script of ``kind`` besides Starlark's own."""
    names = set(ALWAYS) | set(surface.module_names(kind))
    names |= {surface.RENAMED_CALLS.get(n, n) for n in surface.TOP_FUNCTIONS[kind]}
    if kind == "hook":
        names |= set(surface.HOOK_FUNCTIONS)
    if kind == "when":
        names |= set(surface.WHEN_NAMES)
    return frozenset(names)


class Finding(NamedTuple):
    """One problem of a script, located in the script: ``line`` 1-based from its first
    line, ``column`` 1-based as written; the message without its owner."""

    line: int
    column: int
    code: str
    message: str
    severity: Severity = "error"


def check_script(
    source: str,
    filename: str,
    first_line: int = 1,
    kind: str = "tool",
    *,
    first_column: int = 1,
    owner: str = "",
) -> list[Problem]:
    """Every static problem of one script (``kind`` is ``tool``, ``hook`` or ``when``).

    The one place findings become problems: ``filename`` is what they name,
    ``first_line``/``first_column`` locate the script's first character in that file
    (every line of a block is indented alike), ``owner`` (``tool "x"``) prefixes messages.
    """
    return located(findings(source, kind), filename, first_line, first_column, owner)


def located(
    found: Iterable[Finding],
    filename: str,
    first_line: int = 1,
    first_column: int = 1,
    owner: str = "",
) -> list[Problem]:
    """Findings of a script that starts at ``first_line``/``first_column`` of
    ``filename``, as problems of that file."""
    who = f"{owner} " if owner else ""
    line0, indent = max(first_line, 1) - 1, max(first_column - 1, 0)
    return [
        Problem(
            path=filename,
            line=line0 + f.line,
            column=f.column + indent,
            code=f.code,
            message=who + f.message,
            severity=f.severity,
        )
        for f in found
    ]


def _at(line: int, column: int, kind: str) -> tuple[int, int]:
    """Script position of a 1-based position in the parsed text (the when wrapper out)."""
    if kind == "when" and line == 1:
        return line, max(column - len(_WHEN_PREFIX), 1)
    return line, column


def findings(source: str, kind: str = "tool") -> Iterator[Finding]:
    """Every static problem of one script, located in the script (see :class:`Finding`)."""
    what = "when expression" if kind == "when" else "script"
    if kind == "when":
        several = _not_one_expression(source)
        if several is not None:
            yield several
            return
        text = f"{_WHEN_PREFIX}{source.strip()}\n)\n"
    else:
        # log("x") and assert(...) run renamed (runtime/builtins/calls.py); check what runs.
        source = rename_calls(source)
        text = source
    # Deep nesting overflows the parser's native stack (SIGSEGV): refuse it first.
    deep = nesting.too_deep(text)
    if deep is not None:
        yield Finding(*_at(*deep, kind), "script-too-deep", nesting.message(what))
        return
    try:
        ast = sl.parse("script", text, dialect())
    except sl.StarlarkError as exc:
        yield _syntax_error(str(exc), source, kind, what)
        return
    except BaseException as exc:  # noqa: BLE001 - a Rust panic must not kill validate
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        yield Finding(1, 1, "script-syntax", f"{what} cannot be parsed: {exc}")
        return
    for load in ast.loads():
        yield Finding(
            1,
            1,
            "script-load",
            f'{what} uses load("{load.module_id}"): load '
            "statements are not supported; use the built-in modules instead",
        )
    for lint in ast.lint():
        if lint.short_name in _SKIP_LINTS:
            continue
        begin = lint.resolved_location.span.begin
        yield Finding(
            *_at(begin.line + 1, begin.column + 1, kind),
            f"script-lint-{lint.short_name}",
            f"{what}: {lint.problem}",
            "warning",
        )
    yield from _globals_check(ast, text, kind, what)
    yield from _attributes(source, kind, what)
    yield from _module_calls(source, kind, what)
    if kind in ("tool", "hook"):
        yield from _entry_point(source, kind)


def _syntax_error(message: str, source: str, kind: str, what: str) -> Finding:
    head = message.strip().splitlines()[0] if message.strip() else "syntax error"
    head = head.removeprefix("error: ")
    loc = _LOCATION.search(message)
    line, column = _at(int(loc.group(1)), int(loc.group(2)), kind) if loc else (1, 1)
    last = 1 + source.strip().count("\n")
    if re.search(r"^\s*\d+\s*\|", message, re.M) is None:  # at end of input: no snippet
        line, column = last, 1 + len(source.rstrip().split("\n")[-1].strip())
    if kind == "when" and line > last:  # the closing parenthesis we added
        line, column = last, 1 + len(source.strip().split("\n")[-1])
    hint = (
        '; a when is one expression, e.g. payload["name"] == "x"'
        if kind == "when"
        else "; fix the Starlark syntax (Python-like, no classes, no while)"
    )
    return Finding(line, column, "script-syntax", f"{what} does not parse: {head}{hint}")


def _globals_check(ast: sl.AstModule, text: str, kind: str, what: str) -> Iterator[Finding]:
    """Undefined and unavailable names, and type errors (``AstModule.typecheck``)."""
    names = provided(kind)
    errors, _iface, _ = ast.typecheck(_globals(), {})
    for error in errors:
        message = str(error)
        span = error.span
        line, column = (
            _at(span.span.begin.line + 1, span.span.begin.column + 1, kind)
            if span is not None
            else (1, 1)
        )
        missing = _NOT_FOUND.search(message)
        name = missing.group(1) if missing else None
        if name is None and "unresolved ident" in message and span is not None:
            name = _span_text(text, span.span)
        if name:
            if name not in names:
                yield _undefined(line, column, name, kind, what)
        elif span is None or not _shadowed(text, span.span, names):
            # (shadowed: e.g. `hash.sha256`, our module shadows Starlark's hash())
            head = message.strip().splitlines()[0].removeprefix("error: ")
            yield Finding(line, column, "script-type", f"{what}: {head}", "warning")


def _span_text(text: str, span: sl.ResolvedSpan) -> str | None:
    lines = text.split("\n")
    begin, end = span.begin, span.end
    if begin.line != end.line or begin.line >= len(lines):
        return None
    word = lines[begin.line][begin.column : end.column]
    return word if word.isidentifier() else None


def _shadowed(text: str, span: sl.ResolvedSpan, names: frozenset[str]) -> bool:
    lines = text.split("\n")
    begin = span.begin
    if begin.line >= len(lines):
        return False
    line = lines[begin.line]
    head = re.match(r"\s*([A-Za-z_]\w*)", line[begin.column :])
    owner = re.search(r"([A-Za-z_]\w*)\s*\.\s*$", line[: begin.column])
    return (head is not None and head.group(1) in names) or (
        owner is not None and owner.group(1) in names
    )


def _undefined(line: int, column: int, name: str, kind: str, what: str) -> Finding:
    shown = {v: k for k, v in surface.RENAMED_CALLS.items()}.get(name, name)
    if shown in surface.TOP_FUNCTIONS["tool"]:
        where = {"tool": "tool scripts", "hook": "hook scripts", "when": "when expressions"}[kind]
        return Finding(
            line,
            column,
            "script-unavailable",
            f"{what} calls {shown}(), which is not available in {where}",
        )
    if name in surface.TOOL_MODULES or name in surface.HOOK_FUNCTIONS:
        where = {"tool": "tool scripts", "hook": "hook scripts", "when": "when expressions"}[kind]
        return Finding(
            line,
            column,
            "script-unavailable",
            f'{what} uses "{name}", which is not available in {where}; '
            f"available: {', '.join(sorted(provided(kind) - ALWAYS))}",
        )
    candidates = sorted(provided(kind) | _builtin_names())
    return Finding(
        line,
        column,
        "script-undefined",
        f'{what} uses undefined name "{name}"{suggest(name, candidates)}; define '
        "it or use a Starlark or harness built-in",
    )


@cache
def _builtin_names() -> frozenset[str]:
    return frozenset(
        (
            "None",
            "True",
            "False",
            "abs",
            "all",
            "any",
            "bool",
            "dict",
            "dir",
            "enumerate",
            "fail",
            "float",
            "getattr",
            "hasattr",
            "hash",
            "int",
            "len",
            "list",
            "max",
            "min",
            "range",
            "repr",
            "reversed",
            "sorted",
            "str",
            "tuple",
            "type",
            "zip",
            "print",
            "struct",
        )
    )


def _source_at(source: str, start: int) -> tuple[int, int]:
    """1-based (line, column) of offset ``start`` in ``source``."""
    return (source.count("\n", 0, start) + 1, start - (source.rfind("\n", 0, start) + 1) + 1)


def _attributes(source: str, kind: str, what: str) -> Iterator[Finding]:
    """``module.function`` uses that the surface does not declare for this kind."""
    modules = surface.module_names(kind)
    if "." not in source:
        return
    # Fast path: every ``module.attr`` in the text (strings included) is declared.
    if all(
        attr in modules.get(mod, ()) or mod not in modules for mod, attr in _QUICK.findall(source)
    ):
        return
    rebound = Bindings(source)
    for match in _TOKENS.finditer(source):
        mod = match.group("mod")
        if mod is None or mod not in surface.TOOL_MODULES:
            continue
        attr = match.group("attr")
        declared = modules.get(mod)
        if declared is None or attr in declared:
            continue  # an unavailable module is reported by the globals check
        if rebound.rebound(mod):
            continue
        line, column = _source_at(source, match.start("attr"))
        if attr in surface.TOOL_MODULES.get(mod, ()):
            where = {"hook": "hook scripts", "when": "when expressions"}.get(kind, "tool scripts")
            msg = (
                f"{what} calls {mod}.{attr}, which is not available in {where}; "
                f"{mod} offers: {', '.join(declared)}"
            )
            code = "script-unavailable"
        else:
            msg = (
                f"{what} calls {mod}.{attr}, which does not exist"
                f"{suggest(attr, [f for f in declared])}; {mod} offers: {', '.join(declared)}"
            )
            code = "script-unknown-function"
        yield Finding(line, column, code, msg)


def _mask(source: str) -> str:
    """``source`` with strings and comments blanked (same length, newlines kept)."""
    if "#" not in source and "'" not in source and '"' not in source:
        return source
    return _SKIP.sub(_blank, source)


def _blank(match: re.Match[str]) -> str:
    text = match.group()
    if "\n" not in text:
        return " " * len(text)
    return re.sub(r"[^\n]", " ", text)


def _not_one_expression(source: str) -> Finding | None:
    """A when is wrapped in ``return (...)``: refuse text that would escape the parentheses
    (``True), (1``) or make a tuple (``a, b``)."""
    text = source.strip()
    lead = source[: len(source) - len(source.lstrip())].count("\n")
    masked = _mask(text)
    depth = 0
    for index, char in enumerate(masked):
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        if depth < 0 or (depth == 0 and char == ","):
            why = (
                f'"{char}" closes a parenthesis that was never opened'
                if depth < 0
                else "a comma at the top level makes a tuple, which is always true"
            )
            line, column = _source_at(masked, index)
            return Finding(
                lead + line,
                column,
                "script-syntax",
                f"when expression is not a single expression: {why}; a when "
                'is one expression, e.g. payload["name"] == "x"',
            )
    return None


def _balanced(text: str, open_at: int) -> str:
    """The text inside the bracket opened at ``open_at``."""
    depth = 0
    for index in range(open_at, len(text)):
        if text[index] in _OPEN:
            depth += 1
        elif text[index] in _CLOSE:
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : index]
    return text[open_at + 1 :]


def _split_params(params: str) -> list[str]:
    out, depth, start = [], 0, 0
    for index, char in enumerate(params):
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif char == "," and depth == 0:
            out.append(params[start:index].strip())
            start = index + 1
    out.append(params[start:].strip())
    return [p for p in out if p]


def top_level_bindings(source: str) -> dict[str, tuple[int, list[str] | None]]:
    """Names a module binds at the top level -> (0-based line, parameters if callable and
    known). ``def f(...)``, ``f = lambda ...:``, ``f = g`` (g a def) and tuple targets;
    strings, comments and nested blocks are ignored. The last binding wins.

    Call on source that parses: a ``def`` at column 0 is then always top level, and an
    assignment at column 0 is one unless it sits inside an open bracket (a keyword
    argument), which the running bracket count tells.
    """
    masked = source
    matches = list(_TOP.finditer(source))
    # Masking strings and comments is the expensive part. It changes nothing when no
    # string can span lines, every match is a def, and no signature holds a quote or "#".
    if (
        '"""' in source
        or "'''" in source
        or "\\\n" in source
        or any(
            m.group("def") is None or _QUOTE.search(_balanced(source, m.end() - 1)) for m in matches
        )
    ):
        masked = _mask(source)
        matches = list(_TOP.finditer(masked))
    found: dict[str, tuple[int, list[str] | None]] = {}
    depth = last = line = 0
    for match in matches:
        at = match.start()
        segment = masked[last:at]
        depth += sum(map(segment.count, _OPEN)) - sum(map(segment.count, _CLOSE))
        line += segment.count("\n")
        last = at
        name = match.group("def")
        if name is not None:
            found[name] = (line, _split_params(_balanced(masked, match.end() - 1)))
            continue
        target = match.group("target")
        if depth or sum(map(target.count, _OPEN)) != sum(map(target.count, _CLOSE)):
            continue
        value = match.group("value").strip()
        params: list[str] | None = None
        if _LAMBDA.match(value):
            colon = value.find(":")
            params = _split_params(value[6 : colon if colon >= 0 else None])
        elif _NAME.fullmatch(value) and value in found:
            params = found[value][1]
        for bound in _NAME.findall(target):
            found[bound] = (line, params)
    return found


def _entry_point(source: str, kind: str) -> Iterator[Finding]:
    name, arity = surface.TOOL_ENTRY if kind == "tool" else surface.HOOK_ENTRY
    signature = "run(args)" if kind == "tool" else "handle(event, payload)"
    bound = top_level_bindings(source).get(name)
    if bound is None:
        yield Finding(
            1,
            1,
            "script-entry-missing",
            f"script does not define `def {signature}:`; add it — harness "
            f"calls {name} for every {'call' if kind == 'tool' else 'event'}",
        )
        return
    line_in, params = bound
    if params is None:
        return  # bound to something we cannot see through (a call result, a struct...)
    required = [p for p in params if "=" not in p and not p.startswith("*")]
    star = any(p.startswith("*") and not p.startswith("**") for p in params)
    if len(required) > arity or (len(params) < arity and not star):
        yield Finding(
            1 + line_in,
            1,
            "script-entry-arity",
            f"script defines {name}() with {len(params)} parameter"
            f"{'s' if len(params) != 1 else ''}; it must be `def {signature}:`",
        )


_MODULE_CALL = re.compile(
    r"(?<![\w.])(?P<mod>{})[ \t]*\(".format(
        "|".join(sorted(surface.TOOL_MODULES, key=len, reverse=True))
    )
)


def _module_calls(source: str, kind: str, what: str) -> Iterator[Finding]:
    """``fs("x")``: a module called as a function fails at run time (``log(...)`` is the
    one module that is also a function)."""
    if "(" not in source:
        return
    masked = _mask(source)
    bindings = Bindings(source)
    for match in _MODULE_CALL.finditer(masked):
        mod = match.group("mod")
        if mod not in surface.module_names(kind):
            continue  # an unavailable module is reported by the globals check
        if bindings.rebound(mod) or bindings.defined(mod):
            continue
        line, column = _source_at(source, match.start("mod"))
        offers = ", ".join(surface.module_names(kind)[mod])
        yield Finding(
            line,
            column,
            "script-module-call",
            f'{what} calls "{mod}" as a function, but {mod} is a '
            f"module; call one of its functions ({offers}), e.g. "
            f"{mod}.{surface.module_names(kind)[mod][0]}(...)",
        )
