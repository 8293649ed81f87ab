"""Every Python ``re`` use in ``harness/`` is listed here with its input and why it
cannot backtrack badly (issue 22 review F1: a second path to ReDoS through the static
checks). Text a model or user supplies, of unbounded size, goes to RE2 (linear time)
unless the entry says why the pattern is linear. A new use fails this test until it is
listed, so a backtracking-prone pattern over untrusted text cannot slip in unreviewed.

Keys: (module, the top-level name or function the use is in). "fixed input" means the
text is harness's own or bounded (a name, a header, one line of a message).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"
RUNS = {"compile", "search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer"}

ANCHORED_NAME = "a name or key; one character class, no nested quantifier: linear"
CLASS_ONLY = "a single character class or literal alternation: linear"
OWN_TEXT = "harness's own text (error messages of the engine, a fixed format), bounded"

ALLOWED: dict[tuple[str, str], str] = {
    ("artifacts/policy.py", "_GLOB"): CLASS_ONLY,
    ("cli/eval_cmd.py", "_keep"): "one character class over a case name: linear",
    ("runtime/tracebacks.py", "_CALLEE"): "one line of a script (a Starlark frame's code)",
    ("runtime/tracebacks.py", "_DEF"): "one line of a script, anchored at its start",
    ("runtime/tracebacks.py", "_ERROR_LINE"): "a Starlark error message; each line start "
    "scans its own line only ([ \\t]* after ^, not \\s*)",
    ("runtime/tracebacks.py", "_FRAME"): "a Starlark error message, [ \\t]* after ^",
    ("runtime/tracebacks.py", "_MAYBE"): "a literal word alternation: linear",
    ("runtime/tracebacks.py", "_PY_PREFIX"): "anchored literal alternation",
    ("runtime/tracebacks.py", "_SPAN"): "a Starlark error message, [ \\t]* after ^",
    ("runtime/tracebacks.py", "_TOO_BIG"): OWN_TEXT,
    ("runtime/tracebacks.py", "_UNPACK"): OWN_TEXT,
    ("runtime/tracebacks.py", "_integer_message"): "a parameter name (a\\d+): linear",
    ("runtime/tracebacks.py", "_span_code"): "one numbered line of a Starlark message",
    ("runtime/tracebacks.py", "_span_text"): "one numbered line of a Starlark message",
    ("agent/transcript.py", "_UNSAFE"): CLASS_ONLY,
    ("artifacts/checks.py", "CUSTOM_EVENT_RE"): ANCHORED_NAME,
    ("artifacts/checks.py", "META_EVENT_RE"): ANCHORED_NAME,
    ("artifacts/checks.py", "NAME_RE"): ANCHORED_NAME + " (at most 64 characters)",
    ("artifacts/frontmatter.py", "_BRACKETS"): CLASS_ONLY,
    ("artifacts/frontmatter.py", "_DELIM"): "one line of a file, matched at its start",
    ("artifacts/patterns.py", "_BRACED"): "bounded repetition {1,6} of hex digits",
    ("artifacts/patterns.py", "_HEX4"): "fixed length: 4 hex digits",
    ("artifacts/servers.py", "ANY_REF_RE"): "`${` then [^}]* then `}`: one pass per `${`",
    ("artifacts/servers.py", "ENV_REF_RE"): ANCHORED_NAME,
    ("artifacts/servers.py", "SERVER_NAME_RE"): ANCHORED_NAME + " (at most 32 characters)",
    ("artifacts/servers.py", "build"): "a url, matched at its start; one class run",
    ("cli/list_cmd.py", "_words"): "split on one character class: linear",
    ("docstrings.py", "_GOOGLE"): "one line of a docstring (the project's own code)",
    ("docstrings.py", "_GOOGLE_ENTRY"): "one line of a docstring (the project's own code)",
    ("docstrings.py", "_NUMPY"): "one line of a docstring (the project's own code)",
    ("docstrings.py", "_NUMPY_ENTRY"): "one line of a docstring (the project's own code)",
    ("docstrings.py", "_SPHINX"): "one line of a docstring (the project's own code)",
    ("docstrings.py", "_SPHINX_TYPE"): "one line of a docstring (the project's own code)",
    ("docstrings.py", "parse"): "a run of newlines: linear",
    ("runtime/builtins/_edit.py", "_EOL"): CLASS_ONLY,
    ("runtime/builtins/_search.py", "Pattern.__init__"): "fnmatch.translate of one glob "
    "component, matched against one file name (at most 255 bytes)",
    ("runtime/builtins/_search.py", "_LINE_ONLY"): "a search pattern (bounded by "
    "fs.grep's pattern limit); literal prefixes, one class run",
    ("runtime/builtins/_search.py", "_SPECIAL"): CLASS_ONLY,
    ("runtime/builtins/calls.py", "_CANDIDATE"): "a script: a literal alternation at each "
    "position, then \\s* and `(`: each whitespace run is scanned from one start",
    ("runtime/builtins/clock.py", "_DIRECTIVE"): "`%` and one character: linear",
    ("runtime/builtins/net.py", "_HEADER_NAME"): CLASS_ONLY,
    ("runtime/builtins/net.py", "_HEADER_VALUE_BAD"): CLASS_ONLY,
    ("runtime/builtins/net.py", "_HOSTNAME"): "a host name; labels bounded {0,62}, each "
    "ending at a dot the label class excludes: no overlap between repetitions",
    ("runtime/builtins/pure.py", "_DOLLAR"): "`$` then a bounded alternative: linear",
    ("runtime/crossing.py", "_KEY"): OWN_TEXT,
    ("runtime/engine.py", "_ARITY"): OWN_TEXT,
    ("runtime/engine.py", "_failure"): "a literal then \\w+: linear",
    ("runtime/jail.py", "_SENSITIVE_NAME"): "fnmatch of the fixed sensitive names, against "
    "one file name (at most 255 bytes)",
    ("runtime/mounts.py", "_PYTHON_NAME"): "an executable name, anchored, bounded",
    ("runtime/nesting.py", "_INDENT"): CLASS_ONLY,
    ("runtime/nesting.py", "_INDENTS"): "`\\n` then one class run: each run scanned once",
    ("runtime/nesting.py", "_ODD"): CLASS_ONLY,
    ("runtime/nesting.py", "_TOKEN"): "a script's tokens: strings (each closes at its "
    "first unescaped quote, or at the line end for one-quote strings), comments, brackets; "
    "one pass",
    ("runtime/prewarm.py", "_NAME"): ANCHORED_NAME,
    ("runtime/static.py", "_LAMBDA"): "a literal with a one-character lookahead",
    ("runtime/static.py", "_LOCATION"): OWN_TEXT + " (one parser message)",
    ("runtime/static.py", "_MODULE_CALL"): "a script: literal alternation then [ \\t]*( "
    "; each whitespace run scanned from one start",
    ("runtime/static.py", "_NAME"): ANCHORED_NAME,
    ("runtime/static.py", "_NOT_FOUND"): OWN_TEXT,
    ("runtime/static.py", "_QUICK"): "a script: literal names (a lookbehind of fixed "
    "width), [ \\t]*, `.`, a name: each run scanned from one start",
    ("runtime/static.py", "_QUOTE"): CLASS_ONLY,
    ("runtime/static.py", "_SKIP"): "a script that parsed: every string closes, so each "
    "lazy string scan ends at its own closing quote; comments end at the line",
    ("runtime/static.py", "_TOKENS"): "as _SKIP, or a literal module name then `.name`",
    ("runtime/static.py", "_TOP"): "a script, anchored at line starts (re.M): each "
    "alternative scans within one line",
    ("runtime/static.py", "_blank"): CLASS_ONLY,
    ("runtime/static.py", "_shadowed"): "one line of a script around a parser span: "
    "\\s*name / name\\s*.\\s*$, no nested quantifier",
    ("runtime/static.py", "_syntax_error"): OWN_TEXT + " (one parser message)",
    ("runtime/when.py", "_PLAIN_LITERAL"): "a literal alternation, anchored, class runs",
    ("search.py", "_CAMEL"): "a zero-width lookaround pair: linear",
    ("search.py", "_WORD"): CLASS_ONLY,
    ("serve/mcp.py", "_SESSION_ID"): "a literal, or a run of hex digits: linear",
    ("serve/stdio.py", "_SURROGATE"): "fixed length escape: linear",
    ("testing/coverage.py", "_BLOCK"): "literal alternatives with \\s* between: linear",
    ("testing/coverage.py", "_MODIFY"): "literal alternatives with \\s* between: linear",
    ("testing/fakes.py", "_match"): "a test fake's own `re:` pattern, written by the "
    "project's test author over a fake model's text (harness test only)",
    ("testing/fakes.py", "_pattern"): "compiles that pattern, to report a bad one",
    ("testing/fakes.py", "literal"): CLASS_ONLY,
    ("upstream/egress.py", "_BAD_LINE_END"): "one-character lookarounds: linear",
    ("upstream/egress.py", "allowed_target"): "a CONNECT target (one header line, "
    "bounded): .+ then :digits{1,5}: backtracks at most 6 per position of one line",
}


def uses() -> Counter[tuple[str, str]]:
    found: Counter[tuple[str, str]] = Counter()
    for path in sorted(HARNESS.rglob("*.py")):
        rel = path.relative_to(HARNESS).as_posix()

        def visit(node: ast.AST, owner: str, rel: str = rel) -> None:
            for child in ast.iter_child_nodes(node):
                here = owner
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    here = f"{owner}.{child.name}" if owner else child.name
                elif isinstance(child, (ast.Assign, ast.AnnAssign)) and not owner:
                    target = child.targets[0] if isinstance(child, ast.Assign) else child.target
                    if isinstance(target, ast.Name):
                        here = target.id
                if (
                    isinstance(child, ast.Call)
                    and isinstance(child.func, ast.Attribute)
                    and isinstance(child.func.value, ast.Name)
                    and child.func.value.id == "re"
                    and child.func.attr in RUNS
                ):
                    found[(rel, here or "<module>")] += 1
                visit(child, here)

        visit(ast.parse(path.read_text("utf-8")), "")
    return found


def test_every_python_re_use_is_listed_with_a_reason() -> None:
    found = uses()
    missing = sorted(set(found) - set(ALLOWED))
    assert not missing, (
        f"Python re used where no reason is listed: {missing}. Use RE2 (import re2) for "
        "text a model or user supplies, or add an entry saying why the pattern is linear"
    )
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"listed but no longer used (remove): {stale}"
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_walk_finds_uses() -> None:
    found = uses()
    assert ("runtime/tracebacks.py", "_ERROR_LINE") in found and len(found) > 50
    # The rebinding checks of the static pass are RE2 now, not Python re.
    assert not any(key[1] in ("_attributes", "_module_calls") for key in found)


def test_redaction_is_linear_on_many_word_boundaries() -> None:
    """Found by this walk: redact_text ran Python re over command output, and
    ``"a-" * 10_000`` cost 9 s (each boundary rescanned the rest for a secret name).
    Its patterns are RE2 now; the output is still redacted."""
    import re2

    from harness import redact

    assert all(isinstance(rx, re2._Regexp) for rx in redact.BUILTIN.compiled)
    text = "a-" * 50_000 + " DB_PASSWORD=hunter2 " + "a." * 50_000
    out = redact.redact_text(text)
    assert "hunter2" not in out and "DB_PASSWORD=[REDACTED]" in out
    assert redact.redact_text("-----BEGIN RSA PRIVATE KEY-----\nabc") == "[REDACTED]"
