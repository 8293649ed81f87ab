"""Issue 10 item 2: no input crashes the process.

Deeply nested Starlark used to overflow the native stack of starlark-rust's parser,
linter and compiler (SIGSEGV, nothing to catch) in ``harness validate``,
``harness.load``, ``harness serve`` and at run time. Every case runs in a subprocess,
so a crash is seen as a signal instead of killing pytest.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from crashproof_helpers import (
    FORMS,
    block_script,
    elif_script,
    python,
    script_tool_file,
    tool_file,
    validate,
    write_root,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness
from harness.runtime.nesting import MAX_NESTING, too_deep

TOO_DEEP = "nests too deeply"


def _expect_problem(out: str, path: str, line: int) -> None:
    found = [row for row in out.splitlines() if row.startswith(f"{path}:{line}:")]
    assert found, f"no problem at {path}:{line} in:\n{out}"
    assert "[script-too-deep]" in found[0] and TOO_DEEP in found[0], found[0]


def test_validate_reports_deep_nesting_in_every_kind_of_script(tmp_path: Path) -> None:
    root = write_root(
        tmp_path,
        config=textwrap.dedent("""\
        tools:
          - name: inline_deep
            description: Deep inline tool.
            script: |
              def run(args):
                  return {expr}
        """).replace("{expr}", FORMS["list"](20000)),
    )
    tools, hooks = root / ".harness" / "tools", root / ".harness" / "hooks"
    (tools / "plus.md").write_text(tool_file(FORMS["plus"](100000)))
    (tools / "calls.md").write_text(tool_file(FORMS["call"](20000)))
    (tools / "elifs.md").write_text(script_tool_file(elif_script(6000)))
    (hooks / "unary.md").write_text(
        "---\nevent: tool.pre\nscript: |\n  def handle(event, payload):\n      x = "
        + FORMS["unary"](20000)
        + "\n      return allow()\n---\nDeep hook.\n"
    )
    (hooks / "when.md").write_text(
        "---\nevent: tool.pre\nwhen: |\n  "
        + FORMS["plus"](100000)
        + "\nscript: |\n  def handle(event, payload):\n      return allow()\n---\nDeep when.\n"
    )
    done = validate(root)
    assert done.returncode == 1, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    out = done.stdout
    _expect_problem(out, "harness.md", 8)
    _expect_problem(out, ".harness/tools/plus.md", 4)
    _expect_problem(out, ".harness/tools/calls.md", 4)
    # elif number i is on line 7 + 2i; the chain passes the limit at the 196th.
    _expect_problem(out, ".harness/tools/elifs.md", 7 + 2 * 195)
    _expect_problem(out, ".harness/hooks/unary.md", 5)
    _expect_problem(out, ".harness/hooks/when.md", 4)


def test_load_refuses_deep_script_with_the_file_and_line(tmp_path: Path) -> None:
    root = write_root(tmp_path)
    (root / ".harness" / "tools" / "deep.md").write_text(tool_file(FORMS["dict"](20000)))
    done = python(
        "import harness\ntry:\n    harness.load('.')\nexcept harness.LoadError as e:"
        "\n    print(e)\n",
        root,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert ".harness/tools/deep.md:4:" in done.stdout and TOO_DEEP in done.stdout


@pytest.mark.parametrize(
    "script",
    [
        "def run(args):\n    return " + FORMS["lambda"](3000) + "\n",
        block_script(2500),
        "def run(args):\n    return " + FORMS["plus"](100000) + "\n",
    ],
    ids=["lambda", "blocks", "plus"],
)
def test_runtime_refuses_deep_script_that_skipped_validation(tmp_path: Path, script: str) -> None:
    """The engine checks too: a script never reaches the parser unchecked."""
    code = textwrap.dedent(f"""\
        import json
        from harness.config import Config
        from harness.runtime.context import CallContext
        from harness.runtime.engine import InProcessRuntime
        ctx = CallContext(config=Config(root={str(tmp_path)!r}, workspace={str(tmp_path)!r}))
        out = InProcessRuntime().run_tool(open("script.star").read(), "deep.star", 1, {{}},
                                          ctx, 5000)
        print(json.dumps([out.status, out.error]))
        """)
    (tmp_path / "script.star").write_text(script)
    done = python(code, tmp_path)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    status, error = json.loads(done.stdout)
    assert status == "error" and TOO_DEEP in error and "deep.star:" in error


REGISTRAR = """\
---
parameters:
  name: {type: string, required: true}
  script: {type: string, required: true}
script: |
  def run(args):
      return meta.tool_register(args["name"], "Made at run time.", {}, args["script"])
---
Registers a tool.
"""
ECHO = """\
---
parameters:
  text: {type: string, required: true}
script: |
  def run(args):
      return args["text"]
---
Echo.
"""


def test_a_24kb_argument_over_mcp_is_an_error_result_and_the_server_lives(tmp_path: Path) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    root = write_root(tmp_path / "proj", config="meta: {enabled: true}\n")
    (root / ".harness" / "tools" / "register.md").write_text(REGISTRAR)
    (root / ".harness" / "tools" / "echo.md").write_text(ECHO)
    script = "def run(args):\n    return " + FORMS["plus"](12000) + "\n"
    assert 23_000 < len(script) < 25_000

    async def go() -> None:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "harness.cli.main", "serve", "--root", str(root)],
            cwd=str(root),
            env={"PYTHONPATH": os.pathsep.join(sys.path)},
        )
        with open(tmp_path / "serve-stderr.log", "a") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    with anyio.fail_after(60):
                        bad = await session.call_tool(
                            "register", {"name": "deep", "script": script}
                        )
                        assert bad.is_error
                        text = "".join(c.text for c in bad.content if c.type == "text")
                        assert TOO_DEEP in text and 'tool "deep"' in text, text
                        good = await session.call_tool("echo", {"text": "still here"})
                        assert not good.is_error
                        assert "still here" in "".join(c.text for c in good.content)

    anyio.run(go)


def test_meta_register_caps_the_script_size(tmp_path: Path) -> None:
    root = write_root(tmp_path, config="meta: {enabled: true}\n")
    (root / ".harness" / "tools" / "register.md").write_text(REGISTRAR)
    big = "def run(args):\n" + "".join(f"    x{i} = {i}\n" for i in range(6000)) + "    return 1\n"
    assert len(big) > 64 * 1024
    with harness.load(root) as h:
        result = h.call("register", {"name": "big", "script": big})
        assert result.is_error
        assert "limit is 65536 bytes" in (result.error or ""), result.error
        small = h.call("register", {"name": "small", "script": "def run(args):\n    return 2\n"})
        assert not small.is_error, small.error


def test_deeply_nested_arguments_are_an_error_result(tmp_path: Path) -> None:
    root = write_root(tmp_path)
    (root / ".harness" / "tools" / "echo.md").write_text(ECHO)
    value: list = []
    for _ in range(12000):
        value = [value]
    with harness.load(root) as h:
        result = h.call("echo", {"text": value})
        assert result.is_error and "nests too deeply" in (result.error or ""), result.error
        assert not h.call("echo", {"text": "ok"}).is_error


def test_ordinary_scripts_are_not_flagged() -> None:
    starter = Path(harness.__file__).parent / "starter"
    import yaml

    for md in sorted(starter.glob("*/*.md")):
        head = yaml.safe_load(md.read_text().split("---")[1])
        assert too_deep(head.get("script", "")) is None, md
    near = "x = " + FORMS["plus"](MAX_NESTING - 2)
    assert too_deep(near) is None
    assert too_deep("x = " + FORMS["plus"](MAX_NESTING + 2)) is not None
    flat = "x = [" + ", ".join(f"{i} + 1" for i in range(5000)) + "]\n"
    assert too_deep(flat) is None


PLACES = ("tool", "hook", "when", "inline")


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    form=st.sampled_from(sorted(FORMS)),
    place=st.sampled_from(PLACES),
    depth=st.one_of(st.integers(1, 260), st.sampled_from([3000, 20000, 60000])),
)
def test_nesting_never_kills_validate(
    tmp_path_factory: pytest.TempPathFactory, form: str, place: str, depth: int
) -> None:
    """Property: validate exits 0 or 1 (with a located problem), never with a signal."""
    expr = FORMS[form](depth)
    root = write_root(
        tmp_path_factory.mktemp("nest"),
        config=(
            "tools:\n  - name: inline\n    description: D.\n    script: |\n      def run(args):\n"
            "          return " + expr + "\n"
        )
        if place == "inline"
        else "",
    )
    if place == "tool":
        (root / ".harness" / "tools" / "t.md").write_text(tool_file(expr))
    elif place == "hook":
        (root / ".harness" / "hooks" / "h.md").write_text(
            "---\nevent: tool.pre\nscript: |\n  def handle(event, payload):\n      x = "
            + expr
            + "\n      return allow()\n---\nH.\n"
        )
    elif place == "when":
        (root / ".harness" / "hooks" / "h.md").write_text(
            "---\nevent: tool.pre\nwhen: |\n  "
            + expr
            + "\nscript: |\n  def handle(event, payload):\n      return allow()\n---\nH.\n"
        )
    done = validate(root)
    assert done.returncode in (0, 1), (form, place, depth, done.returncode, done.stderr[-1500:])
    if done.returncode == 1:
        assert " error: " in done.stdout and (".md:" in done.stdout), done.stdout[-1500:]
    if depth >= 3000:
        # Refused as too deep, or (over 256 KiB of frontmatter) as too large.
        assert done.returncode == 1 and (
            TOO_DEEP in done.stdout or "[frontmatter-too-large]" in done.stdout
        ), (form, place, done.stdout[-800:])


_PIECES = [
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ";",
    ":",
    "-",
    "+",
    "**",
    ".",
    "x",
    "1.5",
    "not ",
    " and ",
    " if ",
    " else ",
    "lambda: ",
    "\n",
    "\n  ",
    "\n    ",
    "\nelif x:\n",
    "'s'",
    '"""a\nb"""',
    "#c\n",
    "\\\n",
    "$",
    " in ",
    " for ",
]


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.sampled_from(_PIECES), max_size=120), limit=st.integers(5, 60))
def test_the_quick_bound_never_hides_a_deep_script(pieces: list[str], limit: int) -> None:
    """The C-speed upper bound that skips the scan for most scripts is a real bound."""
    from harness.runtime import nesting

    source = "".join(pieces)
    bound = nesting._quick_bound(source)
    if bound is not None and bound <= limit:
        assert nesting._deepest_scan(source, limit) is None
