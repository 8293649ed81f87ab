"""Backends of both kinds (memory, and redis against the suite's real server)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from harness.state import StateBackend, open_backend
from harness.state.limits import StateLimits


@pytest.fixture(params=["memory", "redis"])
def make(request: pytest.FixtureRequest) -> Iterator[Callable[..., StateBackend]]:
    """Opens backends of the parameter's kind, with the limits given; closes them."""
    opened: list[StateBackend] = []

    def open_one(limits: StateLimits | None = None) -> StateBackend:
        if request.param == "memory":
            b = open_backend("memory", limits=limits)
        else:
            url = request.getfixturevalue("redis_url")
            b = open_backend("redis", url, namespace=f"t-{uuid.uuid4().hex[:8]}", limits=limits)
        opened.append(b)
        return b

    try:
        yield open_one
    finally:
        for b in opened:
            b.close()


@pytest.fixture
def backend(make: Callable[..., StateBackend]) -> StateBackend:
    return make()
