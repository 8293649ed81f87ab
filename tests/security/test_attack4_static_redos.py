"""Attack review of issue 22, F1: ReDoS through the static checks of a script.

``runtime/static.py`` ran Python ``re`` searches over the whole script once per
``fs(`` occurrence, uncached, and one of them (``,[^\\n]*=(?!=)``) backtracks along a
long line: cost ~ (#calls) x (line length)^2. A 32 KB script sent to
``meta.tool_register`` took 6 s of CPU in the serving process, holding the GIL. The
rebinding facts are now computed once per module name per script, each with one
linear-time RE2 search. Measured in work (searches over the script), not time.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from harness import surface
from harness.runtime import static


def _script(k: int, m: int) -> str:
    """/tmp/att/redos: k calls ``fs(0)`` on one line, then a line of m ``fs``."""
    return (
        "def run(args):\n    c = ["
        + ",".join(["fs(0)"] * k)
        + "]\n    return ["
        + ", ".join(["fs"] * m)
        + "]\n"
    )


@pytest.mark.parametrize(("k", "size"), [(3200, 32037), (4900, 49037)])
def test_a_long_script_costs_a_bounded_number_of_searches(
    monkeypatch: pytest.MonkeyPatch, k: int, size: int
) -> None:
    source = _script(k, k)
    assert len(source) == size
    whole: list[str] = []
    for name in ("search", "match", "findall", "finditer"):
        real = getattr(re, name)

        def counting(pattern: Any, string: str, *a: Any, _real: Any = real, **kw: Any) -> Any:
            if len(string) >= len(source) // 2:
                whole.append(str(pattern))
            return _real(pattern, string, *a, **kw)

        monkeypatch.setattr(re, name, counting)
    before = getattr(getattr(static, "Bindings", None), "searches", 0)
    problems = static.check_script(source, "x.md")
    rebinding = getattr(getattr(static, "Bindings", None), "searches", 0) - before
    # One fact per module name per script (and per check that asks), never per call.
    assert len(whole) + rebinding <= 3 * 2 * len(surface.TOOL_MODULES), (
        f"{len(whole)} Python re searches and {rebinding} RE2 searches over the script"
    )
    calls = [p for p in problems if p.code == "script-module-call"]
    assert len(calls) == k, [p.code for p in problems][:5]


def test_rebinding_is_still_seen() -> None:
    for rebind in (
        "fs = struct(read = len)\n",
        "fs, x = 1, 2\n",
        "for fs in [1]:\n    pass\n",
        "def fs(x):\n    return x\n",
        "def g(fs):\n    return fs(1)\n",
    ):
        source = rebind + "def run(args):\n    return fs(1)\n"
        codes = [p.code for p in static.check_script(source, "x.md")]
        assert "script-module-call" not in codes, (rebind, codes)
    codes = [
        p.code for p in static.check_script("def run(args):\n    return fs == 1 or fs(1)\n", "x.md")
    ]
    assert "script-module-call" in codes
