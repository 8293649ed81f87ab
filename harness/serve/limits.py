"""Per-identity limits on the tool calls of ``harness serve --transport http``
(``serve:`` in harness.md, :mod:`harness.config_serve`; issue 22 item 5).

- Concurrency: an identity runs at most ``max_calls_per_identity`` calls at once;
  its further calls wait in its own queue (first come, first served), so one
  identity's slow calls never hold every worker while another's wait. Past
  ``max_queued_calls`` waiting calls, a call is refused.
- Rate: at most ``rate_limit.calls`` calls admitted per identity in any
  ``rate_limit.per_seconds`` window (a sliding window); past it, a call is refused.

A refusal is a :class:`Refused` whose text names the setting; the server turns it
into an error result. The identity is the client's scope: its token's identity, or
its connection (``--no-auth``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from harness.config_serve import ServeConfig

log = logging.getLogger("harness.serve")

MAX_IDLE_WINDOWS = 4096  # rate windows kept before the idle ones are dropped


class Refused(Exception):
    """A call the limits do not admit; the message says which setting and why."""


@dataclass(slots=True)
class _Lane:
    limiter: anyio.CapacityLimiter
    users: int = 0  # calls running or waiting in this lane


class CallGate:
    def __init__(self) -> None:
        self._lanes: dict[str, _Lane] = {}
        self._windows: dict[str, deque[float]] = {}

    def _rate(self, scope: str, settings: ServeConfig) -> None:
        limit = settings.rate_limit
        if limit is None:
            return
        now = time.monotonic()
        window = self._windows.get(scope)
        if window is None:
            if len(self._windows) >= MAX_IDLE_WINDOWS:
                self._drop_idle(now, limit.per_seconds)
            window = self._windows[scope] = deque()
        while window and window[0] <= now - limit.per_seconds:
            window.popleft()
        if len(window) >= limit.calls:
            wait = window[0] + limit.per_seconds - now
            raise Refused(
                f"rate limit: this client made {limit.calls} tool calls in the last "
                f"{limit.per_seconds:g} s, the most harness.md allows (serve.rate_limit: "
                f"{{calls: {limit.calls}, per_seconds: {limit.per_seconds:g}}}); "
                f"retry in {max(wait, 0.1):.1f} s"
            )
        window.append(now)

    def _drop_idle(self, now: float, per_seconds: float) -> None:
        for key in [k for k, w in self._windows.items() if not w or w[-1] <= now - per_seconds]:
            del self._windows[key]

    @asynccontextmanager
    async def slot(
        self, scope: str, settings: ServeConfig, max_concurrency: int
    ) -> AsyncIterator[None]:
        """Hold one of ``scope``'s call slots for the body; raise :class:`Refused`
        when the rate limit or the queue bound says no."""
        running = settings.calls_per_identity(max_concurrency)
        lane = self._lanes.get(scope)
        if lane is None:
            lane = self._lanes[scope] = _Lane(anyio.CapacityLimiter(running))
        lane.limiter.total_tokens = running  # harness.md may have been reloaded
        waiting = lane.limiter.statistics().tasks_waiting
        if lane.users >= running and waiting >= settings.max_queued_calls:
            raise Refused(
                f"too many tool calls of this client at once: {running} running and "
                f"{waiting} waiting, the most harness.md allows (serve.max_calls_per_identity: "
                f"{running}, serve.max_queued_calls: {settings.max_queued_calls}); wait for "
                "some to finish"
            )
        self._rate(scope, settings)
        if lane.users >= running:
            log.debug("a tool call waits for a slot of its client (%d running)", running)
        borrower = object()
        lane.users += 1
        try:
            await lane.limiter.acquire_on_behalf_of(borrower)
            try:
                yield
            finally:
                lane.limiter.release_on_behalf_of(borrower)
        finally:
            lane.users -= 1
            if lane.users == 0 and self._lanes.get(scope) is lane:
                del self._lanes[scope]

    def forget(self, scope: str) -> None:
        """A client is gone for good (a connection of ``--no-auth``): drop its window."""
        self._windows.pop(scope, None)
