"""Peer baselines for bench_call.py: one sync tool call through other frameworks, in-process.

    /work/venv/bin/python bench/peers.py

Each factory returns a zero-argument callable doing ONE call of ``add`` with ``{"a": 2,
"b": 3}`` end to end (arguments validated as the framework does), returning 5. Async peers
run on a persistent loop (``run_until_complete``) and run a sync tool in an anyio worker
thread, kept only while anyio's root task lives: a task per call would start a thread per
call (~+300 µs, paid by no real server), so one long-lived task serves the calls.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

ARGS: dict[str, Any] = {"a": 2, "b": 3}


def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


def _missing(package: str, exc: ImportError) -> ImportError:
    return ImportError(f'peer baseline needs "{package}" ({exc}); pip install "{package}"')


class _Served:
    """Zero-argument callable awaiting ``make()`` in one long-lived task on a persistent loop."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._loop = asyncio.new_event_loop()
        self._queue: asyncio.Queue[asyncio.Future[Any]] = asyncio.Queue()
        self._task = self._loop.create_task(self._serve())
        # anyio's non-daemon worker ends with this task; atexit would run after threads join.
        threading._register_atexit(self.close)  # type: ignore[attr-defined]

    async def _serve(self) -> None:
        while True:
            fut = await self._queue.get()
            try:
                fut.set_result(await self._make())
            except Exception as exc:
                fut.set_exception(exc)

    def __call__(self) -> Any:
        fut = self._loop.create_future()
        self._queue.put_nowait(fut)
        return self._loop.run_until_complete(fut)

    def close(self) -> None:
        if self._task.cancel():  # False once the task is done: close() is idempotent
            self._loop.run_until_complete(asyncio.gather(self._task, return_exceptions=True))
            self._loop.close()


def langchain_call() -> Callable[[], Any]:
    """LangChain: ``StructuredTool.from_function(add).invoke(args)`` (pydantic args model)."""
    try:
        from langchain_core.tools import StructuredTool
    except ImportError as exc:
        raise _missing("langchain-core", exc) from exc
    tool = StructuredTool.from_function(add)
    return lambda: tool.invoke(ARGS)


def pydantic_ai_call() -> Callable[[], Any]:
    """pydantic-ai: ``ToolManager.handle_call`` (validate + execute) as an agent run does per
    tool call: manager prepared once for the step with a real RunContext (TestModel)."""
    try:
        from pydantic_ai import RunContext
        from pydantic_ai.messages import ToolCallPart
        from pydantic_ai.models.test import TestModel
        from pydantic_ai.tool_manager import ToolManager
        from pydantic_ai.toolsets import FunctionToolset
        from pydantic_ai.usage import RunUsage
    except ImportError as exc:
        raise _missing("pydantic-ai-slim", exc) from exc
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    managers: list[ToolManager[None]] = []

    async def call() -> Any:
        if not managers:  # first (warm-up) call prepares the step, in the serving loop
            manager = ToolManager[None](toolset=FunctionToolset[None]([add]))
            managers.append(await manager.for_run_step(ctx))
        return await managers[0].handle_call(ToolCallPart(tool_name="add", args=ARGS))

    return _Served(call)


def mcp_server_call() -> Callable[[], Any]:
    """mcp SDK 2.x: ``MCPServer.call_tool`` (arguments model, result to CallToolResult)."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError as exc:
        raise _missing("mcp>=2", exc) from exc
    server: Any = MCPServer("bench")
    server.add_tool(add)

    async def call() -> Any:
        result = await server.call_tool("add", ARGS)  # raises ToolError on failure
        return result.structured_content["result"]

    return _Served(call)


PEERS = {
    "LangChain StructuredTool.invoke": langchain_call,
    "pydantic-ai ToolManager.handle_call": pydantic_ai_call,
    "mcp SDK MCPServer.call_tool": mcp_server_call,
}


def median_us(
    fn: Callable[[], object], n: int = 2000, warmup: int = 200, repeats: int = 5
) -> float:
    """Median over ``repeats`` runs of the mean per-call time of ``n`` calls, in µs."""
    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(runs)


def interleaved_us(
    fns: dict[str, Callable[[], object]], rounds: int = 150, batch_ms: float = 2.0
) -> dict[str, tuple[float, float]]:
    """Median µs per call and median ratio to the first entry, measured interleaved.

    Each round times one batch of every function in turn (about ``batch_ms`` each),
    so the baseline and every case share the same machine state: on a noisy VM the
    bare call's cost can double for seconds at a time, and a baseline measured
    before the case would skew the ratio. The ratio is taken per round, then the
    median over rounds.
    """
    sizes = {}
    for label, fn in fns.items():
        for _ in range(20):
            fn()
        t0 = time.perf_counter()
        for _ in range(50):
            fn()
        per = (time.perf_counter() - t0) / 50
        sizes[label] = max(1, int(batch_ms / 1000 / per))
    runs: dict[str, list[float]] = {label: [] for label in fns}
    for _ in range(rounds):
        for label, fn in fns.items():
            n = sizes[label]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            runs[label].append((time.perf_counter() - t0) / n * 1e6)
    base = runs[next(iter(fns))]
    return {
        label: (
            statistics.median(v),
            statistics.median(x / b for x, b in zip(v, base, strict=True)),
        )
        for label, v in runs.items()
    }


def main() -> None:
    print(f"{'peer':40} {'median µs':>10}")
    for label, factory in PEERS.items():
        try:
            fn = factory()
        except ImportError as exc:
            print(f"{label:40} skipped: {exc}")
            continue
        if (value := fn()) != 5:
            raise SystemExit(f"{label}: expected 5, got {value!r}")
        print(f"{label:40} {median_us(fn):10.1f}")


if __name__ == "__main__":
    main()
