"""ai-harness built-ins in real scripts (COMPAT §3): log(), metrics, ctx, emit, cache,
the pure helpers and the line-level fs functions."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from compat_samples import write

import harness

Make = Callable[..., harness.Harness]


def tool(body: str, params: str = "") -> str:
    lines = "\n".join("      " + ln for ln in body.strip().splitlines())
    return f"---\n{params}script: |\n  def run(args):\n{lines}\n---\nA tool.\n"


def hook(event: str, body: str) -> str:
    lines = "\n".join("      " + ln for ln in body.strip().splitlines())
    return f"---\nevent: {event}\nscript: |\n  def handle(event, payload):\n{lines}\n---\nh\n"


ISOLATIONS = ["inprocess", "process"]


def config(isolation: str, extra: str = "") -> str:
    return f"---\nruntime: {{isolation: {isolation}}}\n{extra}---\nAgent.\n"


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_log_is_callable_in_tools_and_hooks(
    origin: Make, isolation: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = origin(
        {
            "harness.md": config(isolation),
            ".harness/tools/t.md": tool('log("from the tool")\nlog.info("info too")\nreturn "ok"'),
            ".harness/hooks/h.md": hook("tool.pre", 'log("from the hook")\nreturn None'),
        }
    )
    with caplog.at_level(logging.INFO, logger="harness"):
        r = h.call("t")
    assert (r.is_error, r.value) == (False, "ok")
    text = caplog.text
    assert "from the tool" in text and "from the hook" in text and "info too" in text


def test_log_passes_validate_and_a_module_call_does_not(tmp_path: Path) -> None:
    root = write(tmp_path, {".harness/tools/t.md": tool('log("x")\nreturn fs("a.txt")')})
    found = [(p.code, p.line) for p in harness.check(root) if p.severity == "error"]
    assert found == [("script-module-call", 5)]


def test_a_script_defining_its_own_log_keeps_it(origin: Make) -> None:
    h = origin(
        {
            ".harness/tools/t.md": tool('return log("x")').replace(
                "script: |\n", "script: |\n  def log(m):\n      return 'own ' + m\n"
            )
        }
    )
    assert h.call("t").value == "own x"


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_metrics_are_per_session_and_shared_by_tools_and_hooks(
    origin: Make, isolation: str
) -> None:
    h = origin(
        {
            "harness.md": config(isolation),
            ".harness/tools/count.md": tool(
                'n = metrics.incr("calls")\nmetrics.incr("bytes", 10)\n'
                'return {"n": n, "all": metrics.snapshot(), "hooks": metrics.get("pre")}'
            ),
            ".harness/hooks/pre.md": hook("tool.pre", 'metrics.incr("pre")\nreturn None'),
        }
    )
    assert h.call("count").value == {"n": 1, "all": {"bytes": 10, "calls": 1, "pre": 1}, "hooks": 1}
    assert h.call("count").value["n"] == 2
    with h.session() as other:
        assert other.call("count").value["n"] == 1  # another session, other counters


def test_metrics_set_get_reset(origin: Make) -> None:
    h = origin(
        {
            ".harness/tools/m.md": tool(
                'metrics.set("a", 5)\nmetrics.set("b", 1)\nbefore = metrics.get("a")\n'
                'metrics.reset("a")\nafter_one = metrics.snapshot()\nmetrics.reset()\n'
                'return [before, after_one, metrics.snapshot(), metrics.get("missing")]'
            )
        }
    )
    assert h.call("m").value == [5, {"b": 1}, {}, 0]


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_ctx_is_per_call_outside_the_agent_loop(origin: Make, isolation: str) -> None:
    h = origin(
        {
            "harness.md": config(isolation),
            ".harness/hooks/mark.md": hook("tool.pre", 'ctx.set("seen_by", "hook")\nreturn None'),
            ".harness/tools/t.md": tool(
                'before = ctx.get("mine", "none")\nctx.set("mine", 1)\n'
                'return [ctx.get("seen_by"), before, ctx.has("mine"), ctx.delete("mine"), '
                'ctx.delete("mine"), ctx.snapshot()]'
            ),
        }
    )
    want = ["hook", "none", True, True, False, {"seen_by": "hook"}]
    assert h.call("t").value == want
    assert h.call("t").value == want  # a fresh pad for the next call


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_emit_fires_custom_hooks(origin: Make, isolation: str) -> None:
    h = origin(
        {
            "harness.md": config(isolation),
            ".harness/hooks/stamp.md": hook(
                "custom.deploy",
                'if payload.get("env") == "prod":\n'
                '    return block("no prod deploys")\n'
                'return modify({"stamped": True})',
            ),
            ".harness/tools/deploy.md": tool(
                'return emit("custom.deploy", {"env": args["env"]})',
                "parameters:\n  env: {type: string, required: true}\n",
            ),
            ".harness/tools/nothing.md": tool(
                'return [emit("custom.none"), emit("custom.none", 5)]'
            ),
        }
    )
    assert h.call("deploy", {"env": "dev"}).value == {"env": "dev", "stamped": True}
    r = h.call("deploy", {"env": "prod"})
    assert r.is_error and 'emit: custom.deploy blocked by hook "stamp": no prod deploys' in r.text
    assert h.call("nothing").value == [None, 5]


def test_emit_refuses_other_events_and_is_not_in_hooks(tmp_path: Path, origin: Make) -> None:
    h = origin({".harness/tools/t.md": tool('return emit("tool.pre", {})')})
    assert "emit: event must be a custom.<name> event" in h.call("t").text
    root = write(
        tmp_path / "v", {".harness/hooks/h.md": hook("tool.pre", 'emit("custom.x")\nreturn None')}
    )
    assert [p.code for p in harness.check(root) if p.severity == "error"] == ["script-unavailable"]


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_cache_has_clear_and_return_values(origin: Make, isolation: str) -> None:
    h = origin(
        {
            "harness.md": config(isolation),
            ".harness/tools/c.md": tool(
                'a = cache.set("k", {"v": 1})\nhad = cache.has("k")\n'
                'd1 = cache.delete("k")\nd2 = cache.delete("k")\ncache.set("x", 1)\ncache.clear()\n'
                'return [a, had, d1, d2, cache.has("x")]'
            ),
        }
    )
    assert h.call("c").value == [{"v": 1}, True, True, False, False]


def test_pure_helpers(origin: Make) -> None:
    h = origin(
        {
            ".harness/tools/p.md": tool("""
return {
    "find_all": re.find_all("[0-9]+", "a1 b22 c333"),
    "replace": re.replace("(\\\\w+)@(\\\\w+)", "$2 at $1 $$", "me@host"),
    "s": [string.upper("ab"), string.lower("AB"), string.trim("  x "), string.split("a,b", ","),
          string.join(["a", "b"], "-"), string.pad_left("7", 3, "0"), string.pad_right("a", 3)],
    "md5": hash.md5("abc"),
    "b64": [base64.encode("hi!"), base64.decode("aGkh")],
    "uuid": len(uuid.v4()),
    "math": [math.abs(-2), math.min(3, 1, 2), math.max([1, 9]), math.floor(1.7), math.ceil(1.2)],
    "url": url.parse("https://u:p@example.com:8443/a/b?q=1&q=2#frag"),
    "enc": url.encode({"b": "x y", "a": [1, True]}),
}
""")
        }
    )
    v = h.call("p").value
    assert v["find_all"] == ["1", "22", "333"]
    assert v["replace"] == "host at me $"
    assert v["s"] == ["AB", "ab", "x", ["a", "b"], "a-b", "007", "a  "]
    assert v["md5"] == "900150983cd24fb0d6963f7d28e17f72"
    assert v["b64"] == ["aGkh", "hi!"] and v["uuid"] == 36
    assert v["math"] == [2, 1, 9, 1, 2]
    assert v["url"] == {
        "scheme": "https",
        "host": "example.com:8443",
        "hostname": "example.com",
        "port": "8443",
        "path": "/a/b",
        "raw_query": "q=1&q=2",
        "fragment": "frag",
        "query": {"q": ["1", "2"]},
        "string": "https://u:p@example.com:8443/a/b?q=1&q=2#frag",
        "username": "u",
        "password": "p",
    }
    assert v["enc"] == "a=1&a=true&b=x+y"


def test_pure_helpers_are_available_to_hooks(origin: Make) -> None:
    h = origin(
        {
            ".harness/tools/t.md": tool('return "ran"'),
            ".harness/hooks/h.md": hook(
                "tool.pre",
                "return block(string.upper(base64.encode"
                '(hash.md5("a"))[:4]) + str(math.max(1, 2)))',
            ),
        }
    )
    assert h.call("t").error == 'blocked by hook "h": MGNJ2'


def test_assert_and_sleep(origin: Make) -> None:
    h = origin(
        {
            ".harness/tools/a.md": tool(
                'assert(args.get("ok", False), "ok must be set")\nsleep(5)\nreturn "fine"',
                "parameters:\n  ok: {type: boolean}\n",
            ),
            ".harness/tools/slow.md": tool("sleep(5000)\nreturn 1", "timeout_ms: 300\n"),
        }
    )
    assert h.call("a", {"ok": True}).value == "fine"
    assert "assert: ok must be set" in h.call("a").text
    r = h.call("slow")
    assert r.is_error and "sleep: 5000 ms is longer than the" in r.text


def test_line_level_fs_functions(origin: Make, tmp_path: Path) -> None:
    h = origin(
        {
            ".harness/tools/e.md": tool("""
fs.write("a.txt", "one\\ntwo\\nthree\\ntwo\\n")
out = [fs.line_count("a.txt"), fs.read_lines("a.txt", 2, 3)]
out.append(fs.replace("a.txt", "one", "ONE"))
out.append(fs.replace_all("a.txt", "two", "2"))
out.append(fs.insert_at("a.txt", 1, "zero"))
out.append(fs.replace_lines("a.txt", 2, 2, "uno"))
out.append(fs.delete_lines("a.txt", 4, 4))
out.append(fs.read("a.txt"))
out.append(fs.find("a.txt", "2"))
out.append(fs.copy("a.txt", "b.txt"))
out.append(fs.move("b.txt", "c.txt"))
out.append([fs.exists("b.txt"), fs.read("c.txt") == fs.read("a.txt")])
out.append(fs.diff("a\\nb\\n", "a\\nc\\n", "x", "y"))
return out
""")
        },
        sub="fsl",
    )
    v = h.call("e").value
    assert v[:2] == [4, "2. two\n3. three\n"]
    assert v[2:7] == [
        "replaced in: a.txt",
        "replaced 2 occurrences in: a.txt",
        "inserted at line 1 in: a.txt",
        "replaced lines 2-2 in: a.txt",
        "deleted lines 4-4 in: a.txt",
    ]
    assert v[7] == "zero\nuno\n2\n2\n"
    assert v[8] == [{"line_num": 3, "text": "2"}, {"line_num": 4, "text": "2"}]
    assert v[9:11] == ["copied: b.txt", "moved: c.txt"] and v[11] == [False, True]
    assert v[12] == "--- x\n+++ y\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"


def test_fs_replace_needs_exactly_one_match_and_stays_in_the_jail(origin: Make) -> None:
    h = origin(
        {
            ".harness/tools/r.md": tool(
                'fs.write("a.txt", "x x")\nreturn fs.replace("a.txt", args["old"], "y")',
                "parameters:\n  old: {type: string, required: true}\n",
            ),
            ".harness/tools/out.md": tool('return fs.copy("a.txt", "../escaped.txt")'),
            ".harness/tools/mv.md": tool('return fs.move("a.txt", "/etc/passwd")'),
        }
    )
    assert "found 2 times" in h.call("r", {"old": "x"}).text
    assert "not found" in h.call("r", {"old": "z"}).text
    for name in ("out", "mv"):
        r = h.call(name)
        assert r.is_error and "outside" in r.text, r.text


def test_every_new_name_passes_validate_and_typos_are_caught(tmp_path: Path) -> None:
    body = """
log("a")
assert(True, "b")
sleep(0)
emit("custom.x")
metrics.incr("n")
metrics.set("n", 1)
ctx.set("k", ctx.get("turn", 0))
cache.has("k")
cache.clear()
x = [re.find_all("a", "a"), re.replace("a", "b", "a"), string.trim(" a"), string.pad_left("a", 2),
     hash.md5("a"), base64.decode(base64.encode("a")), uuid.v4(), math.ceil(1.5),
     url.encode({"a": 1}), url.parse("http://a")]
fs.replace("a", "b", "c")
fs.read_lines("a")
fs.diff("a", "b")
return x
"""
    root = write(
        tmp_path,
        {
            ".harness/tools/all.md": tool(body),
            ".harness/tools/typo.md": tool(
                'return [string.trm(" a"), metrics.inc("n"), fs.read_line("a")]'
            ),
        },
    )
    found = [(p.path, p.code, p.message) for p in harness.check(root) if p.severity == "error"]
    want = (".harness/tools/typo.md", "script-unknown-function")
    assert [(p, c) for p, c, _ in found] == [want] * 3
    hints = " ".join(m for _, _, m in found)
    assert '(did you mean "trim"?)' in hints and '(did you mean "incr"?)' in hints
    assert '(did you mean "read_lines"?)' in hints
