"""The hot-path constructors build exactly what the ordinary constructors build."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pytest

from harness.config import Config
from harness.hooks import ChainOutcome, _chain_outcome
from harness.hotpath import slot_maker, tuple_maker
from harness.results import ToolCall, ToolResult, make_call, make_result
from harness.runtime.context import CallContext, Outcome, make_context
from harness.runtime.engine import CompiledScripts, Engine, _outcome


def _slots(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def test_make_context_sets_every_field_like_the_constructor() -> None:
    config, log = Config(), (lambda *a: None)
    fast = make_context(config, "s", "c", "t", None, log, None)
    slow = CallContext(config=config, session_id="s", call_id="c", tool="t", log=log)
    assert type(fast) is CallContext and _slots(fast) == _slots(slow)
    # default_factory fields are fresh per object
    assert (
        fast.extras == {}
        and fast.extras is not make_context(config, "s", "c", "t", None, None, None).extras
    )


def test_results_and_calls() -> None:
    values = ("c1", "t", True, {"v": 1}, "text", "err", 1.5, True, "h", "ref", ("n",))
    names = [f.name for f in dataclasses.fields(ToolResult)]
    assert make_result(*values) == ToolResult(**dict(zip(names, values, strict=True)))
    assert make_call("t", {"a": 1}, "c1") == ToolCall(name="t", arguments={"a": 1}, id="c1")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sample:
    a: int
    b: str = "b"
    c: list[int] = field(default_factory=list)
    d: float = 0.5  # a field added later is never forgotten


def test_slot_maker_derives_fields_from_the_class() -> None:
    make = slot_maker(_Sample, "a", "d")
    assert make(1, 2.0) == _Sample(a=1, d=2.0)
    assert make(1, 2.0).c is not make(1, 2.0).c
    assert slot_maker(_Sample)(1, "x", [2], 3.0) == _Sample(a=1, b="x", c=[2], d=3.0)
    assert slot_maker(_Sample)(1, "x", [2]) == _Sample(a=1, b="x", c=[2])  # trailing default
    with pytest.raises(TypeError, match="has no default"):
        slot_maker(_Sample, "b")
    with pytest.raises(TypeError, match="unknown"):
        slot_maker(_Sample, "a", "zz")


def test_slot_maker_refuses_what_it_would_build_wrongly() -> None:
    @dataclass
    class NoSlots:
        a: int = 0

    @dataclass(slots=True)
    class PostInit:
        a: int = 0

        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="slots dataclass"):
        slot_maker(NoSlots)
    with pytest.raises(TypeError, match="__post_init__"):
        slot_maker(PostInit)


def test_tuple_makers() -> None:
    assert _outcome(("ok", 1, None, 2.0)) == Outcome("ok", 1, None, 2.0)
    assert type(_outcome(("ok", 1, None, 2.0))) is Outcome
    got = _chain_outcome(({"a": 1}, None, "", False))
    assert got == ChainOutcome(payload={"a": 1}) and type(got) is ChainOutcome

    class Pair(NamedTuple):
        x: int
        y: int = 0

    assert tuple_maker(Pair)((1, 2)) == Pair(1, 2)
    with pytest.raises(TypeError):
        tuple_maker(tuple)  # type: ignore[arg-type]


def test_compiled_scripts_cache() -> None:
    engine = Engine()
    cache = CompiledScripts()
    src = "def run(args):\n    return 1\n"
    frozen = engine.compile("tool", src, "a.md", 1)
    assert cache.get("tool", src, "a.md", 1) is None
    cache.put("tool", src, "a.md", 1, frozen)
    assert cache.get("tool", src, "a.md", 1) is frozen
    # same source, another place: its own entry, and the first is still found
    assert cache.get("tool", src, "b.md", 1) is None
    other = engine.compile("tool", src, "b.md", 3)
    cache.put("tool", src, "b.md", 3, other)
    assert cache.get("tool", src, "b.md", 3) is other
    assert cache.get("tool", src, "a.md", 1) is frozen
    # equal but not identical strings hit too
    assert cache.get("".join(["to", "ol"]), src, "".join(["a.", "md"]), 1) is frozen
    assert len(cache) == 2
