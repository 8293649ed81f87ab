"""Issue 22 items 8 and 11, and the reopened class "deep nesting": values nested deeply
at run time never crash the process and never raise out of a call.

Item 8: with ``runtime.isolation: inprocess`` and meta enabled, a model-registered
script building a value 1,000,000 levels deep and calling ``str()`` on it killed the
process (SIGSEGV in starlark-rust's native ``repr``). A tool returning a list 300
levels deep did the same through the result crossing's native ``json.encode``.
Item 11: model tool-call arguments 1,100 levels deep made ``harness run`` die with a
RecursionError. Every case that could crash runs in a subprocess, so a crash is a
signal here, not a dead pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from crashproof_helpers import python

import harness
from harness.runtime.nesting import MAX_VALUE_DEPTH
from harness.testing import FakeModelServer, Reply, ToolUse

TOO_DEEP = "nests too deeply"

REGISTRAR = """---
parameters:
  name: {type: string, required: true}
  script: {type: string, required: true}
script: |
  def run(args):
      return meta.tool_register(args["name"], "Made at run time.", {}, args["script"])
---
Registers a tool the model wrote.
"""

DEEP_STR = """
def run(args):
    x = []
    for i in range(1000000):
        x = [x]
    return str(x)[:10]
"""

DEEP_RESULT = """---
script: |
  def run(args):
      x = []
      for i in range(300):
          x = [x]
      return x
---
Returns a list 300 levels deep.
"""


def _project(root: Path, isolation: str) -> Path:
    tools = root / ".harness" / "tools"
    tools.mkdir(parents=True)
    (tools / "register.md").write_text(REGISTRAR)
    (tools / "deep_result.md").write_text(DEEP_RESULT)
    (root / "harness.md").write_text(
        f"---\nruntime: {{isolation: {isolation}}}\nmeta: {{enabled: true}}\n"
        "---\nYou are a test agent.\n"
    )
    return root


def _calls(root: Path, calls: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent("""\
        import json, sys
        import harness
        h = harness.load(sys.argv[1] if len(sys.argv) > 1 else ".")
        out = []
        with h.session() as s:
            for name, args in CALLS:
                r = s.call(name, args)
                out.append({"name": name, "error": r.error, "value": r.value})
        print(json.dumps(out))
        h.close()
        """).replace("CALLS", calls)
    return python(code, root, timeout=300)


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
def test_a_model_registered_script_printing_a_million_levels_does_not_kill_the_process(
    tmp_path: Path, isolation: str
) -> None:
    root = _project(tmp_path, isolation)
    calls = repr(
        [
            ("register", {"name": "deep", "script": DEEP_STR}),
            ("deep", {}),
            ("register", {"name": "fine", "script": "def run(args):\n    return 7\n"}),
            ("fine", {}),
        ]
    )
    done = _calls(root, calls)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    registered, deep, _again, fine = json.loads(done.stdout.splitlines()[-1])
    assert registered["error"] is None, registered
    assert deep["error"] and deep["error"].startswith('tool "deep" '), deep
    assert fine == {"name": "fine", "error": None, "value": 7}  # the process goes on


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
def test_a_result_nested_three_hundred_levels_is_an_error_not_a_crash(
    tmp_path: Path, isolation: str
) -> None:
    root = _project(tmp_path, isolation)
    done = _calls(root, repr([("deep_result", {})]))
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    (deep,) = json.loads(done.stdout.splitlines()[-1])
    assert deep["error"] and TOO_DEEP in deep["error"] and 'tool "deep_result"' in deep["error"]
    assert f"deeper than {MAX_VALUE_DEPTH} levels" in deep["error"], deep


def _deep(depth: int) -> object:
    value: object = []
    for _ in range(depth):
        value = [value]
    return value


def test_deep_arguments_are_refused_naming_the_tool_and_the_path(tmp_path: Path) -> None:
    tools = tmp_path / ".harness" / "tools"
    tools.mkdir(parents=True)
    (tools / "echo.md").write_text(
        "---\nparameters:\n  v: {type: array}\nscript: |\n  def run(args):\n"
        '      return len(args["v"])\n---\nEcho.\n'
    )
    (tmp_path / "harness.md").write_text("---\nruntime: {isolation: inprocess}\n---\nx\n")
    h = harness.load(tmp_path)
    try:
        r = h.call("echo", {"v": _deep(MAX_VALUE_DEPTH + 5)})
        assert r.is_error and r.error is not None
        assert r.error.startswith('the arguments of tool "echo" nests too deeply: $.v[0][0]')
        assert h.call("echo", {"v": _deep(MAX_VALUE_DEPTH - 2)}).value == 1
        r = h.call("echo", {"v": _deep(5000)})
        assert r.is_error and TOO_DEEP in (r.error or "")
    finally:
        h.close()


# -- item 11: model arguments ---------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("depth", [MAX_VALUE_DEPTH + 1, 1100, 20000])
def test_model_arguments_nested_deeply_become_an_error_result_the_model_sees(
    tmp_path: Path, provider: str, depth: int
) -> None:
    tools = tmp_path / ".harness" / "tools"
    tools.mkdir(parents=True)
    (tools / "add.md").write_text(
        "---\nparameters:\n  a: {type: array}\nscript: |\n  def run(args):\n"
        '      return len(args["a"])\n---\nAdd.\n'
    )
    (tmp_path / "harness.md").write_text(
        f"---\nmodel:\n  provider: {provider}\n  name: fake-model\n  api_key_env: E2E_KEY\n"
        "runtime: {isolation: inprocess}\n---\nYou help.\n"
    )
    raw = '{"a": ' + "[" * depth + "]" * depth + "}"
    replies = [Reply(tools=[ToolUse("add", raw, id="k1")]), Reply(text="understood")]
    with FakeModelServer(provider, replies) as server:
        done = subprocess.run(
            [sys.executable, "-m", "harness.cli.main", "run", "hi", "--root", str(tmp_path)]
            + ["--base-url", server.base_url],
            env={**os.environ, "E2E_KEY": "k"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Traceback" not in done.stderr and "understood" in done.stdout
        body = server.requests[1].body
    text = json.dumps(body["messages"][-2:])
    assert 'arguments for tool \\"add\\" nests too deeply' in text or (
        'arguments of tool \\"add\\" nests too deeply' in text
    ), text[:2000]


def test_harness_serve_over_stdio_survives_the_million_levels(tmp_path: Path) -> None:
    """The review's reproduction: ``harness serve`` with ``inprocess`` and meta on."""
    import anyio

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))
    from serve_helpers import stdio_session, tool_text

    root = _project(tmp_path / "proj", "inprocess")

    async def go() -> None:
        async with stdio_session(root) as s:
            done = await s.call_tool("register", {"name": "deep", "script": DEEP_STR})
            assert not done.is_error, tool_text(done)
            got = await s.call_tool("deep", {})
            assert got.is_error and tool_text(got).startswith('tool "deep" crashed (signal 11')
            again = await s.call_tool(
                "register", {"name": "fine", "script": "def run(a):\n  return 7\n"}
            )
            assert not again.is_error, tool_text(again)
            fine = await s.call_tool("fine", {})
            assert not fine.is_error and tool_text(fine) == "7"

    anyio.run(go)
