"""Reopened class "deep nesting": one rule, every path.

``harness.runtime.nesting.value_problem`` is the one rule for how deeply a value may
nest (``MAX_VALUE_DEPTH`` levels of objects and arrays) when it crosses into or out
of a script, a tool or a model. The structural tests pin the chokepoints every path
goes through (a new path has to go through one of them, or fail here): scripts run
only through ``Engine.call``, which checks arguments and results; every Python
callable a script can reach is a ``_Bound`` built-in (arguments and results checked)
or ``print`` (arguments checked); every tool call goes through the pipeline, which
checks arguments and handler/upstream results; every JSON decode of a model answer
is bounded. The walk then sends a value one level too deep (and one far too deep)
through each entry point, in both isolation modes, and expects the rule's message.
"""

from __future__ import annotations

import ast
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import harness
from harness.agent.base import ProviderError, decode_event, parse_arguments
from harness.config import Config
from harness.output import json_problem
from harness.runtime import engine as engine_module
from harness.runtime.builtins.cache import MemoryCache
from harness.runtime.context import CallContext, ScriptRuntime
from harness.runtime.engine import InProcessRuntime
from harness.runtime.nesting import MAX_VALUE_DEPTH, value_problem
from harness.runtime.workers import ProcessRuntime

PKG = Path(harness.__file__).parent
RULE = "nests too deeply"
JUST_TOO_DEEP = MAX_VALUE_DEPTH + 1


def deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_the_helper_and_the_rule_agree_on_what_a_level_is() -> None:
    assert value_problem(deep(MAX_VALUE_DEPTH), "x") is None
    assert RULE in (value_problem(deep(JUST_TOO_DEEP), "x") or "")
    assert value_problem({"a": deep(MAX_VALUE_DEPTH - 1)}, "x") is None


# -- structure: the chokepoints --------------------------------------------------------


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _owner_map(tree: ast.AST) -> dict[ast.AST, str]:
    owner: dict[ast.AST, str] = {}

    def visit(node: ast.AST, name: str | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = node.name
        if name is not None:
            owner[node] = name
        for child in ast.iter_child_nodes(node):
            visit(child, name)

    visit(tree, None)
    return owner


def _calls(tree: ast.AST, attr: str) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if name == attr:
                yield node


def test_scripts_are_called_only_through_engine_call() -> None:
    for path in sorted(PKG.rglob("*.py")):
        tree = _tree(path)
        owner = _owner_map(tree)
        for call in _calls(tree, "call_with"):
            where = f"{path.relative_to(PKG)}:{call.lineno}"
            assert (path.name, owner.get(call)) in {
                ("engine.py", "call"),
                ("crossing.py", "call"),
            }, where
        for call in _calls(tree, "call"):
            fn = call.func
            if isinstance(fn, ast.Attribute) and getattr(fn.value, "id", None) == "crossing":
                assert (path.name, owner.get(call)) == ("engine.py", "call"), path
    engine_tree = _tree(PKG / "runtime" / "engine.py")
    (call_fn,) = [
        n for n in ast.walk(engine_tree) if isinstance(n, ast.FunctionDef) and n.name == "call"
    ]
    names = {getattr(c.func, "id", None) for c in ast.walk(call_fn) if isinstance(c, ast.Call)}
    assert {"_deep_args", "_result"} <= names  # arguments in, values out


def test_every_python_callable_a_script_reaches_checks_what_crosses() -> None:
    allowed_names = {"_print", "_put"}  # print checks its arguments; _put takes a str
    for path in (PKG / "runtime" / "engine.py", PKG / "runtime" / "crossing.py"):
        tree = _tree(path)
        owner = _owner_map(tree)
        for call in _calls(tree, "add_callable"):
            target = call.args[1]
            where = f"{path.name}:{call.lineno}"
            if isinstance(target, ast.Call):
                assert getattr(target.func, "id", None) in {"_Bound", "RowsResult"}, where
                if getattr(target.func, "id", None) == "RowsResult":
                    assert owner.get(call) == "bind_builtin", where
            else:
                assert isinstance(target, ast.Name) and target.id in allowed_names, where
        for call in _calls(tree, "bind_builtin"):
            if path.name == "engine.py":
                assert getattr(call.args[4].func, "id", None) == "_Bound", call.lineno
    bound = _tree(PKG / "runtime" / "engine.py")
    for fn in ast.walk(bound):
        if isinstance(fn, ast.FunctionDef) and fn.name in {"__call__", "_print"}:
            called = {getattr(c.func, "id", None) for c in ast.walk(fn) if isinstance(c, ast.Call)}
            assert "_bounded" in called, fn.name


def test_every_tool_call_and_result_goes_through_the_rule_in_the_pipeline() -> None:
    tree = _tree(PKG / "pipeline.py")
    fns = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    for name in ("validate", "execute"):
        called = {
            getattr(c.func, "id", None) for c in ast.walk(fns[name]) if isinstance(c, ast.Call)
        }
        assert "value_problem" in called, name


def test_every_json_decode_of_a_model_answer_is_bounded() -> None:
    for path in sorted((PKG / "agent").glob("*.py")):
        tree = _tree(path)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for call in _calls(tree, "loads"):
            if getattr(call.func.value, "id", None) == "nesting":  # type: ignore[attr-defined]
                continue
            node: ast.AST | None = call
            caught = False
            while node is not None and not caught:
                node = parents.get(node)
                if isinstance(node, ast.Try):
                    text = " ".join(ast.unparse(h.type) for h in node.handlers if h.type)
                    caught = "RecursionError" in text
            assert caught, f"{path.name}:{call.lineno} decodes JSON without the bound"


def test_no_module_keeps_a_value_depth_limit_of_its_own() -> None:
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text()
        assert "nested more than 100" not in text, path  # output.json_problem's old rule


# -- the walk: every entry point -------------------------------------------------------


def _ctx(cfg: Config) -> CallContext:
    return CallContext(
        config=cfg, session_id="s1", call_id="c1", tool="t", cache=MemoryCache(), log=None
    )


@pytest.fixture(scope="module", params=["inprocess", "process"])
def rt(request: pytest.FixtureRequest) -> Iterator[ScriptRuntime]:
    runtime: ScriptRuntime = (
        InProcessRuntime() if request.param == "inprocess" else (ProcessRuntime(Config()))
    )
    yield runtime
    runtime.close()


RETURNS_DEEP = (
    "def run(args):\n    x = []\n    for i in range(args['n']):\n        x = [x]\n    return x\n"
)


@pytest.mark.parametrize("levels", [JUST_TOO_DEEP, 900])
def test_a_script_result(rt: ScriptRuntime, levels: int) -> None:
    cfg = Config()
    for _ in range(2):  # the first list result takes the plain path, later ones the JSON one
        out = rt.run_tool(RETURNS_DEEP, "deep.md", 1, {"n": levels - 1}, _ctx(cfg), 10000)
        assert out.status == "error" and RULE in (out.error or ""), out
        assert out.error is not None and out.error.startswith('the value tool "t" returned')
    fine = rt.run_tool(RETURNS_DEEP, "deep.md", 1, {"n": MAX_VALUE_DEPTH - 1}, _ctx(cfg), 10000)
    assert fine.status == "ok", fine


def test_script_arguments_straight_into_the_runtime(rt: ScriptRuntime) -> None:
    out = rt.run_tool(
        "def run(args):\n    return 1\n",
        "a.md",
        1,
        {"v": deep(JUST_TOO_DEEP)},
        _ctx(Config()),
        5000,
    )
    assert out.status == "error" and (out.error or "").startswith('the arguments of tool "t"')


def test_a_hook_payload_and_a_hook_decision(rt: ScriptRuntime) -> None:
    cfg = Config()
    hook = "def handle(event, payload):\n    return allow()\n"
    out = rt.run_hook(
        hook, "h.md", 1, "tool.pre", {"arguments": deep(JUST_TOO_DEEP)}, _ctx(cfg), 5000
    )
    assert out.status == "error" and "the arguments of the hook in h.md" in (out.error or "")
    modify = (
        "def handle(event, payload):\n    x = []\n    for i in range(100):\n        x = [x]\n"
        "    return modify({'arguments': {'x': x}})\n"
    )
    out = rt.run_hook(modify, "m.md", 1, "tool.pre", {"arguments": {}}, _ctx(cfg), 5000)
    assert out.status == "error" and "the value the hook in m.md returned" in (out.error or "")


def test_a_when_payload(rt: ScriptRuntime) -> None:
    out = rt.eval_when(
        "True", "w.md", 1, "tool.pre", {"arguments": deep(JUST_TOO_DEEP)}, _ctx(Config()), 5000
    )
    assert out.status == "error" and RULE in (out.error or ""), out


@pytest.mark.parametrize("levels", [JUST_TOO_DEEP, 5000])
def test_a_builtin_result_coming_in(rt: ScriptRuntime, levels: int) -> None:
    script = "def run(args):\n    return len(json.decode(args['t']))\n"
    text = "[" * levels + "]" * levels
    out = rt.run_tool(script, "j.md", 1, {"t": text}, _ctx(Config()), 5000)
    assert out.status == "error" and "the value json.decode() returned nests too deeply" in (
        out.error or ""
    ), out


@pytest.mark.parametrize("call", ["json.encode(x)", "print(x)", "cache.set('k', x)"])
def test_a_builtin_argument_going_out(rt: ScriptRuntime, call: str) -> None:
    script = (
        "def run(args):\n    x = []\n    for i in range(100):\n        x = [x]\n"
        f"    {call}\n    return 1\n"
    )
    out = rt.run_tool(script, "o.md", 1, {}, _ctx(Config()), 5000)
    assert out.status == "error" and RULE in (out.error or ""), out
    assert f"an argument of {call.split('(')[0]}()" in (out.error or ""), out


def _project(
    root: Path, isolation: str, extra: str = "", tools: dict[str, str] | None = None
) -> Path:
    (root / ".harness" / "tools").mkdir(parents=True, exist_ok=True)
    for name, text in (tools or {}).items():
        (root / ".harness" / "tools" / f"{name}.md").write_text(text)
    (root / "harness.md").write_text(f"---\nruntime: {{isolation: {isolation}}}\n{extra}---\nx\n")
    return root


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
def test_tool_arguments_from_any_client(tmp_path: Path, isolation: str) -> None:
    echo = (
        "---\nparameters:\n  v: {type: array}\nscript: |\n  def run(args):\n"
        "      return 1\n---\nE.\n"
    )
    h = harness.load(_project(tmp_path, isolation, tools={"echo": echo}))
    try:
        for levels in (JUST_TOO_DEEP, 5000):
            r = h.call("echo", {"v": deep(levels)})
            assert r.is_error and (r.error or "").startswith('the arguments of tool "echo" nests')
    finally:
        h.close()


def test_a_handler_or_upstream_result(tmp_path: Path) -> None:
    h = harness.load(_project(tmp_path, "inprocess"))
    try:

        @h.tool(name="deep_handler", description="Returns a deep value.")
        def deep_handler() -> Any:
            return {"v": deep(JUST_TOO_DEEP)}

        r = h.call("deep_handler", {})
        assert r.is_error and (r.error or "").startswith('the result of tool "deep_handler" nests')
    finally:
        h.close()
    assert RULE not in (json_problem({"v": deep(10)}) or "")
    assert f"more than {MAX_VALUE_DEPTH} levels" in (json_problem(deep(JUST_TOO_DEEP)) or "")


def test_json_from_http(tmp_path: Path) -> None:
    body = ("[" * 200 + "]" * 200).encode()

    class Deep(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Deep)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    fetch = (
        "---\nparameters:\n  url: {type: string}\nscript: |\n  def run(args):\n"
        "      return json.decode(http.get(args['url'])['body'])\n---\nF.\n"
    )
    root = _project(
        tmp_path, "inprocess", 'network: {allowed_domains: ["127.0.0.1"]}\n', {"fetch": fetch}
    )
    h = harness.load(root)
    try:
        r = h.call("fetch", {"url": f"http://127.0.0.1:{httpd.server_address[1]}/"})
        assert r.is_error and "the value json.decode() returned nests too deeply" in (r.error or "")
    finally:
        h.close()
        httpd.shutdown()


@pytest.mark.parametrize("levels", [JUST_TOO_DEEP, 1100, 50000])
def test_model_arguments(levels: int) -> None:
    raw = json.dumps({"a": 1})[:-1] + ', "b": ' + "[" * levels + "]" * levels + "}"
    value, error = parse_arguments(raw, "add")
    assert value is None and error is not None
    assert error.startswith('invalid arguments for tool "add": the arguments of tool "add" nests')


def test_a_model_event_too_deep_to_decode() -> None:
    with pytest.raises(ProviderError, match="nested too deeply to decode"):
        decode_event('{"x": ' + "[" * 50000 + "]" * 50000 + "}", "openai")


def test_the_engine_module_is_the_one_walked() -> None:
    # The structural tests above read engine.py; make sure it is the module that runs.
    assert Path(engine_module.__file__).resolve() == (PKG / "runtime" / "engine.py").resolve()
