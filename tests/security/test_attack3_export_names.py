"""Issue 22 item 7 (and the reopened export-clash class): nothing an upstream server
lists may raise out of a run.

A server listing ``x.y`` and ``x_y`` made every ``Harness.run`` raise: both export as
``srv_x_y`` for OpenAI and Anthropic, and ``definitions()`` refused the pair. One
function now owns the export-name rule (``harness.artifacts.export.export_name``) and
the clash rule (``without_clashes``); every path that brings a tool name to an export
goes through it. The walk at the end exercises each path (local files, upstream
servers, tools registered by a model or through the Python API, every export format),
and an AST check keeps the rule spelled in one place only.
"""

from __future__ import annotations

import ast
import json
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness
from harness.artifacts.export import FORMATS
from harness.errors import UsageError
from harness.testing import FakeModelServer, Reply, ToolUse

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LISTING_SERVER = str(HERE / "listing_server.py")

LOCAL = """\
---
script: |
  def run(args):
      return "local"
---
A local tool.
"""
REGISTRAR = """\
---
parameters:
  name: {type: string, required: true}
script: |
  def run(args):
      return meta.tool_register(args["name"], "Made at run time.", {},
                                "def run(args):\\n    return 'made'\\n")
---
Registers a tool.
"""


def project(
    root: Path,
    servers: dict[str, list[dict[str, Any]]],
    local: tuple[str, ...] = (),
    provider: str = "openai",
) -> Path:
    (root / ".harness" / "tools").mkdir(parents=True, exist_ok=True)
    for name in local:
        (root / ".harness" / "tools" / f"{name}.md").write_text(LOCAL)
    (root / ".harness" / "tools" / "register.md").write_text(REGISTRAR)
    declared = {
        name: {"command": [sys.executable, LISTING_SERVER, json.dumps(tools)]}
        for name, tools in servers.items()
    }
    (root / "harness.md").write_text(
        f"---\nmcp_servers: {json.dumps(declared)}\n"
        f"model: {{provider: {provider}, name: fake-model, api_key_env: CLASH_KEY}}\n"
        "runtime: {isolation: inprocess}\nmeta: {enabled: true}\n---\nYou test.\n"
    )
    return root


def exported_names(h: Any, fmt: str) -> list[str]:
    defs = h.definitions(fmt)
    if fmt in ("openai", "openai-strict"):
        return [d["function"]["name"] for d in defs]
    return [d["name"] for d in defs]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_server_listing_x_dot_y_and_x_y_cannot_break_a_run(
    provider: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("CLASH_KEY", "sk-not-real")
    root = project(
        tmp_path, {"srv": [{"name": "x.y"}, {"name": "x_y"}, {"name": "ok"}]}, (), provider
    )
    replies = [
        Reply(tools=[ToolUse("srv_ok", {}, id="c1"), ToolUse("srv_x_y", {}, id="c2")]),
        Reply(text="done"),
    ]
    caplog.set_level(logging.WARNING)
    with FakeModelServer(provider, replies) as server, harness.load(root) as h:
        result = h.run("use the tools", base_url=server.base_url)
        for fmt in FORMATS:
            names = exported_names(h, fmt)
            assert len(names) == len(set(names)), (fmt, names)
        assert "srv.x.y" in h.tools and "srv.x_y" not in h.tools
        refused = h.call("srv.x_y", {})
    assert result.text == "done"
    assert [r.text for r in result.results] == ["ok", "x.y"]
    assert refused.is_error
    for text in (refused.error or "", caplog.text):
        assert 'server "srv"' in text and '"srv.x_y"' in text and '"srv.x.y"' in text, text
        assert '"srv_x_y"' in text, text


def test_upstream_tools_never_clash_with_local_tools_or_other_servers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``srv.z`` against a local ``srv_z``; server ``a`` listing ``b.c`` against server
    ``a_b`` listing ``c`` (both ``a_b_c``): the local tool and the first name win."""
    root = project(
        tmp_path,
        {"srv": [{"name": "z"}, {"name": "fine"}], "a": [{"name": "b.c"}], "a_b": [{"name": "c"}]},
        local=("srv_z",),
    )
    caplog.set_level(logging.WARNING)
    with harness.load(root) as h:
        tools = h.connect_tools()
        for fmt in FORMATS:
            names = exported_names(h, fmt)
            assert len(names) == len(set(names)), (fmt, names)
        assert {"srv_z", "srv.fine", "a.b.c"} <= set(tools)
        assert "srv.z" not in tools and "a_b.c" not in tools
        assert h.call("srv.fine", {}).text == "fine"
        assert h.call("srv_z", {}).text == "local"
        left_out = h.call("srv.z", {})
        assert left_out.is_error and '"srv_z"' in (left_out.error or ""), left_out.error
        other = h.call("a_b.c", {})
        assert other.is_error and '"a.b.c"' in (other.error or ""), other.error
    assert 'server "a_b"' in caplog.text and '"a.b.c"' in caplog.text
    # validate --connect says the same, at the server's declaration.
    from harness.upstream.check import connect

    _listed, problems = connect(_project(root))
    found = {(p.code, p.path) for p in problems if "left out" in p.message}
    assert found == {("server-tool-refused", "harness.md")}, problems
    assert any('"srv.z"' in p.message and '"srv_z"' in p.message for p in problems), problems
    assert any('"a_b.c"' in p.message and '"a.b.c"' in p.message for p in problems), problems


def _project(root: Path) -> Any:
    from harness.validation import check_project

    return check_project(root)


def test_harness_schema_and_list_show_upstream_tools_without_clashes(tmp_path: Path) -> None:
    """The CLI joins the upstream tools to the project's by the same rule."""
    from click.testing import CliRunner

    from harness.cli.main import cli

    root = project(
        tmp_path,
        {"srv": [{"name": "z"}, {"name": "x.y"}, {"name": "x_y"}], "a": [{"name": "srv.z"}]},
        local=("srv_z",),
    )
    for fmt in FORMATS:
        done = CliRunner().invoke(cli, ["schema", "--root", str(root), "--format", fmt])
        assert done.exit_code == 0, done.output
        text = done.output[: done.output.rindex("]") + 1]
        names = [d["function"]["name"] if "function" in d else d["name"] for d in json.loads(text)]
        assert len(names) == len(set(names)), names
        assert ("srv.x.y" if fmt == "mcp" else "srv_x_y") in names
    done = CliRunner().invoke(cli, ["list", "--root", str(root)])
    assert done.exit_code == 0 and "srv.x.y" in done.output and "srv.x_y" not in done.output


# -- every path that reaches export names ----------------------------------------------


def test_every_path_to_an_export_name_goes_through_the_one_rule(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    # 1. Local tool files: a validate error (no load).
    clash = tmp_path / "local"
    (clash / ".harness" / "tools").mkdir(parents=True)
    for name in ("a.b", "a_b"):
        (clash / ".harness" / "tools" / f"{name}.md").write_text(LOCAL)
    (clash / "harness.md").write_text("---\nruntime: {isolation: inprocess}\n---\n")
    found = harness.check(clash)
    assert any(p.code == "tool-name-collision" and '"a_b"' in p.message for p in found), found

    root = project(tmp_path / "p", {"srv": [{"name": "x.y"}, {"name": "x_y"}]}, ("run_command",))
    with harness.load(root) as h, h.session() as s:
        # 2. Upstream listings (same server) were covered above; here they meet the rest.
        assert "srv.x.y" in h.connect_tools() and "srv.x_y" not in h.tools
        # 3. Tools a model registers.
        refused = s.call("register", {"name": "run.command"})
        assert refused.is_error and 'existing tool "run_command"' in (refused.error or "")
        refused = s.call("register", {"name": "srv_x.y"})
        assert refused.is_error and '"srv.x.y"' in (refused.error or ""), refused.error
        assert not s.call("register", {"name": "made.here"}).is_error
        # 4. Session tools added through the Python API: left out of the session's tools.
        s.register_tool(replace(h.all_tools["run_command"], name="made_here"))
        assert "made.here" in s.tools and "made_here" not in s.tools
        # 5. Python functions made tools.
        with pytest.raises(UsageError, match='"run_command"'):

            @h.tool(name="run.command")
            def clashing() -> str:
                return "x"

        # 6. Every export format, of the harness and of the session.
        for fmt in FORMATS:
            for owner in (h, s):
                names = exported_names(owner, fmt)
                assert len(names) == len(set(names)), (fmt, names)
        # 7. definitions() given clashing tools directly still refuses them, by name.
        from harness.artifacts.export import definitions

        pair = [h.all_tools["run_command"], replace(h.all_tools["run_command"], name="run.command")]
        with pytest.raises(UsageError, match='"run_command" and "run.command"|"run.command"'):
            definitions(pair, "openai")


def test_the_rule_itself() -> None:
    from harness.artifacts.export import export_name, without_clashes

    assert export_name("a.b.c") == "a_b_c"
    kept, clashes = without_clashes(["a.b", "a_b", "c.d", "a-b"], taken=["c_d"])
    assert kept == ["a.b", "a-b"]
    assert clashes == [("a_b", "a.b"), ("c.d", "c_d")]


def test_the_export_name_rule_is_spelled_in_one_place() -> None:
    """No module but harness/artifacts/export.py turns "." into "_" (it would be a second
    rule a new path could follow instead of the one that detects clashes)."""
    owner = REPO / "harness" / "artifacts" / "export.py"
    for path in sorted((REPO / "harness").rglob("*.py")):
        if path == owner:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "replace"
                and [getattr(a, "value", None) for a in node.args[:2]] == [".", "_"]
            ):
                raise AssertionError(f"{path}:{node.lineno}: use export.export_name")


# -- any schema a server lists ---------------------------------------------------------

_KEYS = st.sampled_from(
    ["type", "properties", "items", "required", "anyOf", "oneOf", "allOf", "$ref", "$defs"]
    + ["additionalProperties", "patternProperties", "enum", "const", "default", "format"]
    + ["nullable", "prefixItems", "pattern", "not", "description", "minLength"]
)
_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=4),
    st.sampled_from(["object", "string", "array", "null", "#", "#/$defs/a", "(?=a)"]),
)
_JSON = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(_KEYS, st.text(max_size=3)), inner, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=st.dictionaries(st.one_of(_KEYS, st.text(max_size=3)), _JSON, max_size=5))
def test_no_schema_a_server_lists_makes_an_export_raise(schema: dict[str, Any]) -> None:
    """A tool whose schema no export format can express is refused at listing (the
    fuzzing found ``{"format": {...}}`` raising in openai-strict), never offered."""
    import mcp_types as types

    from harness.artifacts.export import definitions
    from harness.artifacts.model import Source
    from harness.artifacts.servers import ServerSpec
    from harness.upstream.mapping import build_listing

    server = ServerSpec(
        name="srv", transport="stdio", command=("x",), source=Source(path="harness.md", line=1)
    )
    listing = build_listing(server, [types.Tool(name="t", input_schema=schema)])
    assert set(listing.specs) | set(listing.refused) == {"srv.t"}
    for fmt in FORMATS:
        definitions(list(listing.specs.values()), fmt)
