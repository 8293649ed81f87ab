"""Per-call cost of harness against the bare engine and against peer frameworks.

Run: python bench/bench_call.py [--quick]

(a) the bare engine: a frozen starlark-pyo3 module's run() called directly;
(b) Harness.call, in-process, on the same tool with one matching allow-hook and one
    hook whose ``when`` is false (validation, two hooks, result rendering included);
(b') the same under process isolation (the default: worker processes);
(c) peers on the same trivial tool: LangChain StructuredTool.invoke, pydantic-ai's tool
    call path, the mcp SDK server's call_tool (from bench/peers.py; skipped if missing);
(d) exec.run("true") sandboxed vs subprocess.run(["true"]).
Every figure is a median measured in this run; ratios are against (a) of this run.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import median_us  # noqa: E402 - one timing helper for every bench

TOOL = """\
---
parameters:
  a: {type: integer, required: true}
  b: {type: integer}
script: |
  def run(args):
      return args["a"] + args.get("b", 0)
---
Add two integers.
"""
ALLOW = """\
---
event: tool.pre
script: |
  def handle(event, payload):
      return allow()
---
Allows everything.
"""
NEVER = """\
---
event: tool.pre
when: 'payload["name"] == "something_else"'
script: |
  def handle(event, payload):
      return block("never")
---
Never matches.
"""


def make_project(root: Path, isolation: str) -> None:
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / ".harness" / "hooks").mkdir(parents=True)
    (root / "harness.md").write_text(f"---\nruntime: {{isolation: {isolation}}}\n---\n")
    (root / ".harness" / "tools" / "add.md").write_text(TOOL)
    (root / ".harness" / "hooks" / "allow_all.md").write_text(ALLOW)
    (root / ".harness" / "hooks" / "never.md").write_text(NEVER)


def main() -> None:
    quick = "--quick" in sys.argv
    n = 2000 if quick else 10000
    import starlark as sl

    import harness

    args = {"a": 2, "b": 3}
    mod = sl.Module()
    script = TOOL.split("script: |\n", 1)[1].split("---", 1)[0]
    sl.eval(mod, sl.parse("add.star", textwrap.dedent(script)), sl.Globals.standard())
    frozen = mod.freeze()
    assert frozen.call("run", args) == 5
    rows: list[tuple[str, float]] = []
    bare = median_us(lambda: frozen.call("run", args), n)
    rows.append(("(a) bare engine: frozen module run()", bare))
    hook_mod = sl.Module()
    sl.eval(hook_mod, sl.parse("allow.star", "def handle(event, payload):\n"
                               "    return {'action': 'allow'}\n"), sl.Globals.standard())
    hook_frozen = hook_mod.freeze()
    payload = {"id": "call-1", "name": "add", "arguments": args, "session": "0123456789ab"}
    floor = median_us(lambda: (hook_frozen.call("handle", "tool.pre", payload),
                               frozen.call("run", args)), n)
    rows.append(("(f) floor: bare handle(payload) + bare run()", floor))

    with tempfile.TemporaryDirectory() as tmp:
        for isolation in ("inprocess", "process"):
            root = Path(tmp) / isolation
            make_project(root, isolation)
            with harness.load(root) as h:
                r = h.call("add", args)
                assert r.value == 5 and not r.is_error, r
                label = "(b) Harness.call, in-process" if isolation == "inprocess" else \
                    "(b') Harness.call, process isolation"
                rows.append((label, median_us(lambda h=h: h.call("add", args),
                                              n // (1 if isolation == "inprocess" else 4))))

    import peers

    for label, factory in (("(c) LangChain StructuredTool.invoke", "langchain_call"),
                           ("(c) pydantic-ai tool call", "pydantic_ai_call"),
                           ("(c) mcp SDK server call_tool", "mcp_server_call")):
        try:
            fn = getattr(peers, factory)()
        except (ImportError, AttributeError) as exc:
            print(f"{label}: skipped ({exc})")
            continue
        rows.append((label, median_us(fn, max(n // 10, 500))))

    print(f"{'case':48} {'median µs':>10} {'× (a)':>8}")
    for label, us in rows:
        print(f"{label:48} {us:10.1f} {us / bare:8.2f}")

    # (d) sandbox overhead
    with tempfile.TemporaryDirectory() as tmp:
        from harness.config import Config
        from harness.runtime.context import CallContext

        try:
            from harness.runtime.builtins.proc import run as exec_run
        except ImportError:
            print("exec.run not available; sandbox figure skipped")
            return
        ws = Path(tmp)
        ctx = CallContext(config=Config(root=ws, workspace=ws))
        m = 30 if quick else 100
        plain = median_us(lambda: subprocess.run(["true"], check=False), m, warmup=5)
        boxed = median_us(lambda: exec_run(ctx, "true"), m, warmup=5)
        print(f"{'(d) subprocess.run([true])':48} {plain:10.1f}")
        print(f"{'(d) exec.run(true), sandboxed':48} {boxed:10.1f}")
        print(f"sandbox overhead: {(boxed - plain) / 1000:.2f} ms median")


if __name__ == "__main__":
    main()
