"""Issue 22 item 3: a backtracking ``pattern`` must never freeze the process.

Invalid arguments used to be explained with Python's ``re`` (backtracking, holding the
GIL, unbounded): ``^(\\w+\\s?)*$`` against 28 characters took 14 s, and over stdio
nothing else was answered meanwhile. The MCP client checked an upstream server's
structured results the same way. Every schema ``pattern`` and ``patternProperties``
key is now run by a linear-time engine (RE2 in Python, Rust's ``regex`` in
jsonschema-rs); a pattern those cannot run is refused up front with the file, line and
parameter (a tool file), or the tool's name (meta.tool_register, upstream servers).

The inputs here are 60 characters long: a backtracking engine would need years, so a
regression hangs (each subprocess has a generous hang guard, not a timing threshold).
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
LISTING_SERVER = str(HERE / "listing_server.py")
sys.path.insert(0, str(REPO / "tests" / "serve"))
from test_mcp_stdio_lane import Raw  # noqa: E402

EVIL = r"^(\w+\s?)*$"
ATTACK = "a" * 60 + "!"
HANG_GUARD_S = 300  # far beyond any real run: only a regression (a hang) reaches it

EVIL_TOOL = f"""\
---
parameters:
  text: {{type: string, required: true, pattern: {json.dumps(EVIL)}}}
script: |
  def run(args):
      return "matched"
---
Takes a text of words.
"""
ECHO_TOOL = """\
---
parameters:
  text: {type: string, required: true}
script: |
  def run(args):
      return args["text"]
---
Echoes.
"""


def project(root: Path, tools: dict[str, str], config: str = "") -> Path:
    (root / ".harness" / "tools").mkdir(parents=True, exist_ok=True)
    (root / "harness.md").write_text(
        "---\nruntime: {isolation: inprocess}\n" + config + "---\nA test project.\n"
    )
    for name, text in tools.items():
        (root / ".harness" / "tools" / f"{name}.md").write_text(text)
    return root


def in_subprocess(code: str, root: Path) -> Any:
    """Run ``code`` (which prints one JSON value last) in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(root)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


CALL = """\
    import json
    import harness
    with harness.load(".") as h:
        out = []
        for name, args in CALLS:
            r = h.call(name, args)
            out.append([r.is_error, r.error or r.text])
        print(json.dumps(out))
"""


def calls(root: Path, todo: list[tuple[str, dict[str, Any]]]) -> list[list[Any]]:
    return in_subprocess(f"CALLS = {todo!r}\n" + textwrap.dedent(CALL), root)


def test_a_backtracking_pattern_gives_a_precise_error_at_once(tmp_path: Path) -> None:
    root = project(tmp_path, {"words": EVIL_TOOL})
    [(is_error, message)] = calls(root, [("words", {"text": ATTACK})])
    assert is_error
    expected = f"$.text: {json.dumps(ATTACK)} does not match {json.dumps(EVIL)}"
    assert message == f'invalid arguments for tool "words": {expected}', message
    [(is_error, text)] = calls(root, [("words", {"text": "two words"})])
    assert (is_error, text) == (False, "matched")


def test_pattern_properties_and_additional_properties_never_backtrack(tmp_path: Path) -> None:
    """``additionalProperties`` and ``unevaluatedProperties`` match property names
    against ``patternProperties`` keys too (in jsonschema's own helpers)."""
    tool = f"""\
---
parameters:
  tags:
    type: object
    required: true
    patternProperties: {{{json.dumps(EVIL)}: {{type: integer}}}}
    additionalProperties: false
  more:
    type: object
    patternProperties: {{{json.dumps(EVIL)}: {{type: integer}}}}
    unevaluatedProperties: false
script: |
  def run(args):
      return "ok"
---
Takes tags.
"""
    root = project(tmp_path, {"tags": tool})
    out = calls(
        root,
        [
            ("tags", {"tags": {ATTACK: 1}}),
            ("tags", {"tags": {}, "more": {ATTACK: 1}}),
            ("tags", {"tags": {"good words": 1}}),
        ],
    )
    assert (
        out[0][0]
        and f"$.tags: Additional properties are not allowed ({json.dumps(ATTACK)}" in (out[0][1])
    ), out[0]
    assert out[1][0] and "$.more: Unevaluated properties are not allowed" in out[1][1], out[1]
    assert out[2] == [False, "ok"]


def test_stdio_serve_answers_another_request_meanwhile(tmp_path: Path) -> None:
    root = project(tmp_path, {"words": EVIL_TOOL, "echo": ECHO_TOOL})
    server = Raw(root)
    try:
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "words", "arguments": {"text": ATTACK}},
            }
        )
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "still here"}},
            }
        )
        answers = {a["id"]: a["result"] for a in (server.read(), server.read())}
    finally:
        server.close()
    assert answers[2]["content"][0]["text"] == "still here"
    assert answers[1]["isError"] is True
    assert "does not match" in answers[1]["content"][0]["text"]


def upstream(root: Path, tools: list[dict[str, Any]], config: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    servers = {"srv": {"command": [sys.executable, LISTING_SERVER, json.dumps(tools)]}}
    (root / "harness.md").write_text(
        f"---\nmcp_servers: {json.dumps(servers)}\nruntime: {{isolation: inprocess}}\n"
        f"{config}---\nA test project.\n"
    )
    return root


def test_an_upstream_schema_with_a_backtracking_pattern_never_hangs(tmp_path: Path) -> None:
    """The input check (harness) and the structured-result check (the MCP client's own,
    pure-Python jsonschema) of an upstream tool both run the pattern linearly."""
    string = {"type": "string", "pattern": EVIL}
    root = upstream(
        tmp_path,
        [
            {"name": "take", "inputSchema": {"type": "object", "properties": {"s": string}}},
            {
                "name": "give",
                "outputSchema": {"type": "object", "properties": {"s": string}},
                "result": {"s": ATTACK},
            },
            {"name": "plain"},
        ],
    )
    out = calls(root, [("srv.take", {"s": ATTACK}), ("srv.give", {}), ("srv.plain", {})])
    assert out[0][0] and "$.s: " in out[0][1] and "does not match" in out[0][1], out[0]
    assert out[1][0] and "does not match" in out[1][1], out[1]
    assert out[2] == [False, "plain"]


LOOKAROUND = "^(?!admin).*$"
BACKREF = r"^(a)\1$"


def test_an_upstream_tool_whose_pattern_no_linear_engine_runs_is_refused_by_name(
    tmp_path: Path,
) -> None:
    root = upstream(
        tmp_path,
        [
            {
                "name": "peek",
                "inputSchema": {
                    "type": "object",
                    "properties": {"user": {"type": "string", "pattern": LOOKAROUND}},
                },
            },
            {
                "name": "pairs",
                "inputSchema": {"type": "object", "patternProperties": {BACKREF: {}}},
            },
            {"name": "plain"},
        ],
    )
    out = in_subprocess(
        """\
        import json
        import harness
        with harness.load(".") as h:
            names = sorted(h.connect_tools())
            results = [h.call(n, {"user": "bob"}) for n in ("srv.peek", "srv.pairs", "srv.plain")]
            print(json.dumps([names, [[r.is_error, r.error or r.text] for r in results]]))
        """,
        root,
    )
    names, results = out
    assert "srv.plain" in names and "srv.peek" not in names and "srv.pairs" not in names
    for (is_error, message), tool, pattern in (
        (results[0], "srv.peek", LOOKAROUND),
        (results[1], "srv.pairs", BACKREF),
    ):
        assert is_error
        assert f'tool "{tool}"' in message and 'server "srv"' in message, message
        assert json.dumps(pattern) in message, message
    assert results[2] == [False, "plain"]


REGISTRAR = """\
---
parameters:
  name: {type: string, required: true}
  pattern: {type: string, required: true}
script: |
  def run(args):
      return meta.tool_register(args["name"], "Made at run time.",
          {"s": {"type": "string", "required": True, "pattern": args["pattern"]}},
          "def run(args):\\n    return 'made'\\n")
---
Registers a tool.
"""


def test_a_registered_tool_never_backtracks_and_cannot_use_lookarounds(tmp_path: Path) -> None:
    root = project(tmp_path, {"register": REGISTRAR}, config="meta: {enabled: true}\n")
    out = in_subprocess(
        f"""\
        import json
        import harness
        with harness.load(".") as h, h.session() as s:
            out = []
            for name, args in [
                ("register", {{"name": "peek", "pattern": {json.dumps(LOOKAROUND)}}}),
                ("register", {{"name": "words", "pattern": {json.dumps(EVIL)}}}),
                ("words", {{"s": {json.dumps(ATTACK)}}}),
            ]:
                r = s.call(name, args)
                out.append([r.is_error, r.error or r.text])
            print(json.dumps(out))
        """,
        root,
    )
    assert out[0][0] and 'tool "peek"' in out[0][1] and json.dumps(LOOKAROUND) in out[0][1]
    assert "linear" in out[0][1], out[0]
    assert out[1][0] is False, out[1]
    assert out[2][0] and "does not match" in out[2][1], out[2]


@pytest.mark.parametrize(
    ("keyword", "pattern"),
    [("pattern", LOOKAROUND), ("pattern", BACKREF), ("patternProperties", "(?<=x)y")],
)
def test_validate_names_the_file_line_and_parameter(
    tmp_path: Path, keyword: str, pattern: str
) -> None:
    if keyword == "pattern":
        param = f"  user: {{type: string, pattern: {json.dumps(pattern)}}}\n"
    else:
        param = f"  user: {{type: object, patternProperties: {{{json.dumps(pattern)}: {{}}}}}}\n"
    tool = (
        "---\nparameters:\n  n: {type: integer}\n"
        + param
        + "script: |\n  def run(args):\n      return 1\n---\nA tool.\n"
    )
    root = project(tmp_path, {"who": tool})
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli.main", "validate", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(root)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if "who.md" in x)
    assert ".harness/tools/who.md:4:" in line, done.stdout
    assert 'parameter "user"' in line or "$.user" in line or ".user" in line, line
    assert json.dumps(pattern) in line and "linear" in line, line


# -- every path that evaluates a schema pattern goes through one engine -----------------

PKG = REPO / "harness"


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def _name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def test_every_jsonschema_rs_validator_is_given_its_regex_engine() -> None:
    """jsonschema-rs's default engine (fancy-regex) backtracks: every validator harness
    builds names its engine, and only harness/artifacts/patterns.py uses the linear one."""
    for path in sorted(PKG.rglob("*.py")):
        for call in _calls(ast.parse(path.read_text(), str(path))):
            if _name(call) in ("validator_for", "validator_cls_for", "is_valid", "validate"):
                func = call.func
                owner = func.value if isinstance(func, ast.Attribute) else None
                if not (isinstance(owner, ast.Name) and owner.id == "jsonschema_rs"):
                    continue
                keywords = {k.arg for k in call.keywords}
                assert "pattern_options" in keywords, f"{path}:{call.lineno}"


def test_only_the_patterns_module_builds_pure_python_validators() -> None:
    for path in sorted(PKG.rglob("*.py")):
        if path == PKG / "artifacts" / "patterns.py":
            continue
        text = path.read_text()
        for call in _calls(ast.parse(text, str(path))):
            assert _name(call) not in (
                "Draft202012Validator",
                "Draft7Validator",
                "FormatChecker",
            ), f"{path}:{call.lineno}: use harness.artifacts.patterns.python_validator"
        assert "import jsonschema\n" not in text and "from jsonschema " not in text, path


def test_jsonschema_reaches_re_only_through_the_search_harness_replaces() -> None:
    """The shim (``patterns.install``) replaces ``re`` in the modules that run schema
    patterns; a jsonschema release that matches patterns elsewhere fails here."""
    import jsonschema

    from harness.artifacts import patterns

    root = Path(jsonschema.__file__).parent
    for path in sorted(root.glob("*.py")):
        module = f"jsonschema.{path.stem}"
        for call in _calls(ast.parse(path.read_text(), str(path))):
            func = call.func
            if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
                continue
            if func.value.id != "re" or func.attr not in ("search", "match", "fullmatch"):
                continue
            assert module in patterns.JSONSCHEMA_PATTERN_MODULES, f"{path}:{call.lineno}"
            assert func.attr == "search", f"{path}:{call.lineno}"
    patterns.install()
    for module in patterns.JSONSCHEMA_PATTERN_MODULES:
        assert importlib.import_module(module).re.search is patterns.search


@pytest.mark.parametrize(
    ("ecma", "text", "matches"),
    [
        (r"^\u0041$", "A", True),
        (r"^\u{1F600}$", "\U0001f600", True),
        (r"^\cJ$", "\n", True),
        (r"^[\u0000-\u007F]*$", "abc", True),
        (r"^[\u0000-\u007F]*$", "é", False),
        (r"\\u0041", "\\u0041", True),
        (EVIL, ATTACK, False),
    ],
)
def test_ecma_escapes_are_read_as_ecma_262_reads_them(ecma: str, text: str, matches: bool) -> None:
    from harness.artifacts import patterns

    assert (patterns.search(ecma, text) is not None) is matches
    assert patterns.pattern_problem(ecma) is None


def test_a_regex_format_value_is_checked_by_re2() -> None:
    from harness.validators import ArgValidator

    v = ArgValidator(
        {
            "type": "object",
            "properties": {"p": {"type": "string", "format": "regex"}, "n": {"type": "integer"}},
        }
    )
    found = v.problems({"p": "(?=x)", "n": "x"})
    assert '$.p: "(?=x)" is not a "regex"' in found, found
