"""The six-step pipeline on real artifacts, real Starlark, in-process runtime."""

from __future__ import annotations

import json
from collections.abc import Callable

from core_samples import ECHO

import harness
from harness import ToolCall

MakeHarness = Callable[..., harness.Harness]


def test_good_call(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"echo": ECHO})
    r = h.call("echo", {"path": "a", "n": 2}, id="c1")
    assert (r.is_error, r.value, r.call_id, r.name) == (False, {"path": "a", "n": 2}, "c1", "echo")
    assert r.text == '{"path":"a","n":2}'


def test_validation_lists_every_problem_with_json_paths(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"echo": ECHO})
    r = h.call("echo", {"n": "3"})
    assert r.is_error
    # JSON wording (issue 14): "3" and null, not Python's '3' and None.
    assert r.error == (
        'invalid arguments for tool "echo": $.n: "3" is not of type "integer"; '
        '$.path: "path" is a required property'
    )


def test_strings_are_never_coerced_and_extra_keys_pass(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"echo": ECHO})
    assert h.call("echo", {"path": "a", "n": "1"}).is_error
    r = h.call("echo", {"path": "a", "extra": True})
    assert not r.is_error


def test_arguments_must_be_an_object(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"echo": ECHO})
    r = h.call("echo", ["x"])  # type: ignore[arg-type]
    assert r.is_error and "arguments must be a JSON object" in (r.error or "")


def test_unknown_tool_suggests_a_close_name(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"echo": ECHO})
    r = h.call("ecoh", {})
    assert r.is_error
    assert r.error.startswith('unknown tool "ecoh"; available: ')  # type: ignore[union-attr]
    assert 'did you mean "echo"?' in r.error  # type: ignore[operator]


def test_policy_deny_wins(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"echo": ECHO}, config="tools_policy: {allow: ['*'], deny: ['ec*']}\n")
    r = h.call("echo", {"path": "a"})
    assert r.error == 'tool "echo" is denied by tools_policy'
    assert "echo" not in h.tools


def test_error_convention_and_fail(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={
            "conv": """
            ---
            script: |
              def run(args):
                  return {"error": "disk full", "details": {"free": 0}}
            ---
            x
        """,
            "failing": """
            ---
            script: |
              def run(args):
                  fail("bad input")
            ---
            x
        """,
            "notconv": """
            ---
            script: |
              def run(args):
                  return {"error": "x", "other": 1}
            ---
            x
        """,
        }
    )
    r = h.call("conv", {})
    assert r.is_error and r.error == "disk full"
    r = h.call("failing", {})
    assert r.is_error and r.error == "bad input (at .harness/tools/failing.md:4)"
    assert not h.call("notconv", {}).is_error


def test_timeout_result(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={
            "spin": """
        ---
        timeout_ms: 300
        script: |
          def run(args):
              for i in range(1000000000):
                  pass
        ---
        spins
    """,
            "echo": ECHO,
        }
    )
    r = h.call("spin", {})
    assert r.is_error and r.error == 'tool "spin" timed out after 300 ms'
    assert not h.call("echo", {"path": "a"}).is_error


def test_output_truncation_at_the_exact_byte_count(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={
            "big": """
        ---
        script: |
          def run(args):
              return "é" * 500
        ---
        big
    """
        },
        config="limits: {max_output_bytes: 200}\n",
    )
    r = h.call("big", {})
    assert r.truncated and not r.is_error
    assert r.text.endswith("[output truncated at 200 bytes]")
    assert len(r.text.encode()) <= 200  # notice included
    head = r.text.split("\n")[0]
    assert head and set(head) == {"é"}  # never half a character
    shown = len(head.encode())
    assert r.output_ref and f'read_output(ref="{r.output_ref}", offset={shown})' in r.text
    page = h.call("read_output", {"ref": r.output_ref, "offset": shown, "limit": 21})
    assert page.value == (
        "é" * 10 + f"\n[read_output {r.output_ref}: bytes {shown}-{shown + 20}"
        f' of 1000; next page: read_output(ref="{r.output_ref}", '
        f"offset={shown + 20})]"
    )
    odd = h.call("read_output", {"ref": r.output_ref, "offset": shown + 1, "limit": 4})
    assert odd.value.startswith("éé\n")  # a page never starts or ends inside a character


def test_returns_schema_is_enforced(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={
            "typed": """
        ---
        returns: {type: object, properties: {n: {type: integer}}, required: [n]}
        script: |
          def run(args):
              return {"n": "one"}
        ---
        typed
    """
        }
    )
    r = h.call("typed", {})
    assert r.is_error
    assert 'does not match its returns schema: $.n: "one" is not of type "integer"' in r.error  # type: ignore[operator]


def test_scriptless_tool_needs_a_handler(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={
            "ext": """
        ---
        parameters:
          q: {type: string, required: true}
        ---
        Bound in Python.
    """
        }
    )
    assert h.call("ext", {"q": "x"}).error == 'tool "ext" has no script and no bound handler'
    h.bind("ext", lambda args: {"echo": args["q"]})
    assert h.call("ext", {"q": "x"}).value == {"echo": "x"}
    assert h.call("ext", {}).is_error  # still validated


def test_python_function_tool(make_harness: MakeHarness) -> None:
    h = make_harness()

    @h.tool
    def add(a: int, b: int = 0) -> int:
        """Add two integers."""
        return a + b

    spec = h.tools["add"]
    assert spec.input_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 0}},
        "required": ["a"],
    }
    assert spec.description == "Add two integers."
    assert h.call("add", {"a": 2, "b": 3}).value == 5
    assert h.call("add", {"a": "2"}).is_error


def test_call_many_keeps_call_order(make_harness: MakeHarness) -> None:
    h = make_harness(tools={"echo": ECHO})
    calls = [ToolCall(id=str(i), name="echo", arguments={"path": str(i)}) for i in range(30)]
    results = h.call_many(calls)
    assert [r.call_id for r in results] == [str(i) for i in range(30)]
    assert [r.value["path"] for r in results] == [str(i) for i in range(30)]


def test_sessions_have_separate_caches(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={
            "put": "---\nscript: |\n  def run(args):\n      cache.set('k', 1)\n---\nput\n",
            "get": (
                "---\nscript: |\n  def run(args):\n"
                "      return cache.get('k', 'missing')\n---\nget\n"
            ),
        }
    )
    with h.session() as s1, h.session() as s2:
        s1.call("put", {})
        assert s1.call("get", {}).value == 1
        assert s2.call("get", {}).value == "missing"


def test_acall(make_harness: MakeHarness) -> None:
    import asyncio

    h = make_harness(tools={"echo": ECHO})

    async def go() -> list[harness.ToolResult]:
        one = await h.acall("echo", {"path": "a"})
        many = await h.acall_many([ToolCall(id="x", name="echo", arguments={"path": "b"})])
        return [one, *many]

    one, two = asyncio.run(go())
    assert one.value["path"] == "a" and two.value["path"] == "b"


def test_cli_call(make_harness: MakeHarness, tmp_path: object) -> None:
    from click.testing import CliRunner

    from harness.cli.main import cli

    h = make_harness(tools={"echo": ECHO})
    root = str(h.root)
    runner = CliRunner()
    ok = runner.invoke(cli, ["call", "echo", '{"path": "a"}', "--arg", "n=3", "--root", root])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output) == {"path": "a", "n": 3}
    # --arg follows the schema: a string parameter gets the literal text
    literal = runner.invoke(cli, ["call", "echo", "--arg", "path=42", "--root", root])
    assert literal.exit_code == 0, literal.output
    assert json.loads(literal.output) == {"path": "42", "n": 0}
    bad = runner.invoke(cli, ["call", "echo", "--root", root, "--format", "json"])
    assert bad.exit_code == 1
    assert json.loads(bad.output)["error"].startswith('invalid arguments for tool "echo"')
    usage = runner.invoke(cli, ["call", "echo", "{not json", "--root", root])
    assert usage.exit_code == 2


def test_async_python_tools_are_awaited(make_harness: MakeHarness) -> None:
    h = make_harness()

    @h.tool
    async def twice(x: int) -> int:
        """Double x, asynchronously."""
        return x * 2

    assert h.call("twice", {"x": 4}).value == 8

    import asyncio

    assert asyncio.run(h.acall("twice", {"x": 5})).value == 10


def test_kwargs_tools_receive_undeclared_keys(make_harness: MakeHarness) -> None:
    h = make_harness()

    @h.tool
    def gather(a: int, **extra: object) -> dict[str, object]:
        """Return everything."""
        return {"a": a, **extra}

    assert h.call("gather", {"a": 1, "z": 2}).value == {"a": 1, "z": 2}


def test_non_json_handler_values_are_errors(make_harness: MakeHarness) -> None:
    h = make_harness()

    @h.tool
    def odd() -> object:
        """Returns a set."""
        return {"s": {1, 2}}

    r = h.call("odd", {})
    assert r.is_error and r.error == 'tool "odd" returned a value that is not JSON: $.s is a set'


def test_schema_that_cannot_compile_is_a_result_not_a_crash(make_harness: MakeHarness) -> None:
    h = make_harness()

    @h.tool
    def f(x: str) -> str:
        """x"""
        return x

    from dataclasses import replace

    spec = h._tools["f"]
    h._tools["f"] = replace(
        spec,
        input_schema={"type": "object", "properties": {"x": {"type": "string", "pattern": "("}}},
    )
    h._registry = None
    r = h.call("f", {"x": "a"})
    assert r.is_error and "cannot be compiled" in (r.error or "")


def test_ecma_only_pattern_failures_are_explained(make_harness: MakeHarness) -> None:
    h = make_harness(
        tools={
            "letters": r"""
        ---
        parameters:
          word: {type: string, required: true, pattern: "^\\p{L}+$"}
        script: |
          def run(args):
              return args["word"]
        ---
        Letters only.
    """
        }
    )
    assert h.call("letters", {"word": "héllo"}).value == "héllo"
    r = h.call("letters", {"word": "123"})
    assert r.is_error and r.error.startswith('invalid arguments for tool "letters": $.word: ')  # type: ignore[union-attr]


def test_bare_off_means_sandbox_off(make_harness: MakeHarness) -> None:
    h = make_harness(config="exec: {sandbox: off}\n")
    assert h.config.exec.sandbox == "off"
