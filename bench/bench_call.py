"""Per-call cost of harness against the bare engine and against peer frameworks.

Run: python bench/bench_call.py [--quick]

(a) the bare engine: a frozen starlark-pyo3 module's run() called directly;
(b) Harness.call, in-process, on the same tool with one matching allow-hook and one
    hook whose ``when`` is false (validation, two hooks, result rendering included);
(b') the same under process isolation (the default: worker processes);
(c) peers on the same trivial tool: LangChain StructuredTool.invoke, pydantic-ai's tool
    call path, the mcp SDK server's call_tool (from bench/peers.py; skipped if missing);
(d) exec.run("true") sandboxed vs subprocess.run(["true"]): started cold, back to back
    through prepared sandboxes (runtime/prewarm.py), and 20 ms apart (an agent's pace).
Every figure of (a)-(c) is measured interleaved (see peers.interleaved_us), so
the ratios compare calls made under the same machine state.
Every figure is a median measured in this run; ratios are against (a) of this run.
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import interleaved_us  # noqa: E402 - shared timing helpers

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
    import starlark as sl

    import harness

    args = {"a": 2, "b": 3}
    mod = sl.Module()
    script = TOOL.split("script: |\n", 1)[1].split("---", 1)[0]
    sl.eval(mod, sl.parse("add.star", textwrap.dedent(script)), sl.Globals.standard())
    frozen = mod.freeze()
    assert frozen.call("run", args) == 5
    cases: dict[str, Callable[[], object]] = {
        "(a) bare engine: frozen module run()": lambda: frozen.call("run", args)
    }
    hook_mod = sl.Module()
    sl.eval(
        hook_mod,
        sl.parse("allow.star", "def handle(event, payload):\n    return {'action': 'allow'}\n"),
        sl.Globals.standard(),
    )
    hook_frozen = hook_mod.freeze()
    payload = {"id": "call-1", "name": "add", "arguments": args, "session": "0123456789ab"}
    cases["(f) naive: bare handle(payload) + bare run()"] = lambda: (
        hook_frozen.call("handle", "tool.pre", payload),
        frozen.call("run", args),
    )

    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        for isolation in ("inprocess", "process"):
            root = Path(tmp) / isolation
            make_project(root, isolation)
            h = stack.enter_context(harness.load(root))
            r = h.call("add", args)
            assert r.value == 5 and not r.is_error, r
            label = (
                "(b) Harness.call, in-process"
                if isolation == "inprocess"
                else "(b') Harness.call, process isolation"
            )
            cases[label] = lambda h=h: h.call("add", args)

        import peers

        for label, factory in (
            ("(c) LangChain StructuredTool.invoke", "langchain_call"),
            ("(c) pydantic-ai tool call", "pydantic_ai_call"),
            ("(c) mcp SDK server call_tool", "mcp_server_call"),
        ):
            try:
                cases[label] = getattr(peers, factory)()
            except (ImportError, AttributeError) as exc:
                print(f"{label}: skipped ({exc})")

        figures = interleaved_us(cases, rounds=40 if quick else 150)
    print(f"{'case':48} {'median µs':>10} {'× (a)':>8}")
    for label, (us, ratio) in figures.items():
        print(f"{label:48} {us:10.1f} {ratio:8.2f}")
    print("× (a): median over rounds of the ratio to (a) timed in the same round")

    # (d) sandbox overhead
    with tempfile.TemporaryDirectory() as tmp:
        from harness.config import Config
        from harness.runtime.context import CallContext

        try:
            from harness.runtime.builtins.proc import run as exec_run
        except ImportError:
            print("exec.run not available; sandbox figure skipped")
            return
        from harness.runtime import prewarm

        ws = Path(tmp)
        ctx = CallContext(config=Config(root=ws, workspace=ws))
        rounds = 20 if quick else 60
        times: dict[str, list[float]] = {k: [] for k in ("plain", "cold", "back-to-back", "spaced")}

        def timed(fn: Callable[[], object]) -> float:
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e6

        for _ in range(5):
            exec_run(ctx, "true")
        for _ in range(rounds):  # interleaved, so every case sees the same machine
            times["plain"].append(timed(lambda: subprocess.run(["true"], check=False)))
            prewarm.ENABLED = False
            times["cold"].append(timed(lambda: exec_run(ctx, "true")))
            prewarm.ENABLED = True
            burst = [timed(lambda: exec_run(ctx, "true")) for _ in range(5)]
            times["back-to-back"] += burst[1:]
            time.sleep(0.02)  # an agent's pace: a model turn between two commands
            times["spaced"].append(timed(lambda: exec_run(ctx, "true")))
        prewarm.discard_all()
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{'(d) subprocess.run([true])':48} {med['plain']:10.1f}")
        for label, k in (
            ("(d) exec.run(true), sandbox started cold", "cold"),
            ("(d) exec.run(true), back to back (prepared)", "back-to-back"),
            ("(d) exec.run(true), 20 ms apart (prepared)", "spaced"),
        ):
            print(f"{label:48} {med[k]:10.1f}   overhead {(med[k] - med['plain']) / 1000:.2f} ms")
        print(
            "sandbox overhead (median, vs subprocess.run): cold "
            f"{(med['cold'] - med['plain']) / 1000:.2f} ms, back to back "
            f"{(med['back-to-back'] - med['plain']) / 1000:.2f} ms, 20 ms apart "
            f"{(med['spaced'] - med['plain']) / 1000:.2f} ms"
        )


if __name__ == "__main__":
    main()
