"""The Starlark engine on its own: values, errors with file lines, deadlines, limits."""

from __future__ import annotations

import pytest

from harness import surface
from harness.config import Config
from harness.runtime.builtins.cache import MemoryCache
from harness.runtime.context import CallContext
from harness.runtime.engine import Engine, InProcessRuntime


@pytest.fixture(scope="module")
def rt() -> InProcessRuntime:
    return InProcessRuntime()


def ctx(**kw: object) -> CallContext:
    logs: list[tuple[str, str, dict[str, object]]] = []
    c = CallContext(
        config=Config(), cache=MemoryCache(), log=lambda *a: logs.append(a), tool="t", **kw
    )  # type: ignore[arg-type]
    c.extras["logs"] = logs
    return c


def test_values_round_trip(rt: InProcessRuntime) -> None:
    src = (
        'def run(args):\n    return {"a": args["a"], "t": (1, 2), "f": 1.5, "n": None, "b": True}\n'
    )
    out = rt.run_tool(src, "tools/x.md", 5, {"a": [1, {"b": "c"}]}, ctx(), 1000)
    assert out.status == "ok"
    assert out.value == {"a": [1, {"b": "c"}], "t": [1, 2], "f": 1.5, "n": None, "b": True}


def test_fail_names_the_file_line(rt: InProcessRuntime) -> None:
    out = rt.run_tool('def run(args):\n    fail("nope")\n', ".harness/tools/x.md", 7, {}, ctx(), 0)
    assert out.status == "error"
    assert out.error == "nope (at .harness/tools/x.md:8)"


def test_builtin_error_message_reaches_the_script_author(rt: InProcessRuntime) -> None:
    out = rt.run_tool(
        'def run(args):\n    return re.search("(a)\\\\1", "aa")\n', "t.md", 1, {}, ctx(), 0
    )
    assert out.status == "error"
    assert "invalid regular expression" in (out.error or "")
    assert "RE2" in (out.error or "")
    assert out.error.endswith("(at t.md:2)")  # type: ignore[union-attr]


def test_wrong_arity_names_the_builtin(rt: InProcessRuntime) -> None:
    out = rt.run_tool('def run(args):\n    return re.search("a")\n', "t.md", 1, {}, ctx(), 0)
    assert out.status == "error"
    assert out.error.startswith("re.search(): ")  # type: ignore[union-attr]
    assert "missing 1 required positional argument" in out.error  # type: ignore[operator]


def test_deadline_stops_a_spinning_script(rt: InProcessRuntime) -> None:
    src = "def run(args):\n    for i in range(1000000000):\n        pass\n"
    out = rt.run_tool(src, "t.md", 1, {}, ctx(), 200)
    assert out.status == "timeout"
    assert out.error == "timed out after 200 ms"


def test_recursion_is_capped(rt: InProcessRuntime) -> None:
    out = rt.run_tool("def run(args):\n    return run(args)\n", "t.md", 1, {}, ctx(), 0)
    assert out.status == "error"
    assert "recursion too deep" in (out.error or "")


def test_non_json_return_is_an_error(rt: InProcessRuntime) -> None:
    out = rt.run_tool("def run(args):\n    return lambda x: x\n", "t.md", 1, {}, ctx(), 0)
    assert out.status == "error"
    assert out.error == "run() returned a value that is not JSON-compatible (function)"


def test_missing_entry_point(rt: InProcessRuntime) -> None:
    out = rt.run_tool("def go(args):\n    return 1\n", "t.md", 1, {}, ctx(), 0)
    assert out.error == "script does not define run(args)"


def test_load_is_disabled(rt: InProcessRuntime) -> None:
    out = rt.run_tool(
        'load("x.star", "y")\ndef run(args):\n    return 1\n', "t.md", 1, {}, ctx(), 0
    )
    assert out.status == "error"
    assert "load" in (out.error or "")


def test_globals_are_frozen_between_calls(rt: InProcessRuntime) -> None:
    src = "seen = []\ndef run(args):\n    seen.append(1)\n    return len(seen)\n"
    out = rt.run_tool(src, "t.md", 1, {}, ctx(), 0)
    assert out.status == "error"
    assert "frozen" in (out.error or "").lower() or "immutable" in (out.error or "").lower()


def test_print_goes_to_the_log_not_stdout(
    rt: InProcessRuntime, capfd: pytest.CaptureFixture[str]
) -> None:
    c = ctx()
    out = rt.run_tool('def run(args):\n    print("hello", 1)\n    return 0\n', "t.md", 1, {}, c, 0)
    assert out.status == "ok"
    assert capfd.readouterr().out == ""
    # "at": the file line of the print call (harness call -v shows it)
    assert ("info", "hello 1", {"source": "print", "tool": "t", "at": "t.md:2"}) in c.extras["logs"]


def test_cache_is_shared_within_a_session(rt: InProcessRuntime) -> None:
    c = ctx()
    rt.run_tool('def run(args):\n    cache.set("k", {"v": [1]})\n', "t.md", 1, {}, c, 0)
    out = rt.run_tool('def run(args):\n    return cache.get("k")\n', "u.md", 1, {}, c, 0)
    assert out.value == {"v": [1]}


def test_hook_decisions(rt: InProcessRuntime) -> None:
    c = ctx()
    run = rt.run_hook
    out = run("def handle(e, p):\n    return allow()\n", "h.md", 1, "tool.pre", {}, c, 0)
    assert out.status == "ok" and out.value is None  # allow() is the None decision
    assert run(
        'def handle(e, p):\n    return block("no")\n', "h.md", 1, "tool.pre", {}, c, 0
    ).value == {"action": "block", "reason": "no"}
    out = run("def handle(e, p):\n    return modify(3)\n", "h.md", 1, "tool.pre", {}, c, 0)
    assert out.status == "error"
    assert out.error == "modify() takes a dict payload, got int (at h.md:2)"


def test_when_expression(rt: InProcessRuntime) -> None:
    out = rt.eval_when(
        'payload["name"] == "x" and event == "tool.pre"',
        "h.md",
        3,
        "tool.pre",
        {"name": "x"},
        ctx(),
        0,
    )
    assert out.value is True


def test_when_sees_only_pure_builtins(rt: InProcessRuntime) -> None:
    out = rt.eval_when('fs.read("x") == ""', "h.md", 3, "tool.pre", {}, ctx(), 0)
    assert out.status == "error"
    assert "fs" in (out.error or "")


def test_hooks_cannot_exec(rt: InProcessRuntime) -> None:
    out = rt.run_hook(
        'def handle(e, p):\n    return exec.run("true")\n', "h.md", 1, "tool.pre", {}, ctx(), 0
    )
    assert out.status == "error"


def test_every_declared_builtin_is_implemented() -> None:
    functions = Engine().functions
    missing = [
        f"{m}.{n}"
        for m, names in surface.TOOL_MODULES.items()
        for n in names
        if f"{m}.{n}" not in functions
    ]
    assert missing == []
