"""Cancelling a call in flight by its call id (MCP ``notifications/cancelled``, a
client that disconnects).

The caller (``harness serve``) marks a call id cancelled; everything running for that
call stops at its next check:

- a Starlark run (tool, hook, ``when``) in this process: the engine's cancellation
  callback sees the id (:func:`is_cancelled`) and ends the evaluation;
- a command started by ``exec.run``: its process group is killed by the callback the
  command registered with :func:`on_cancel`;
- a script in a worker process: the worker (and the process groups of the commands
  it started) is killed by the callback the process runtime registered.

The set is empty unless something was cancelled, so the checks cost one truth test.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_lock = threading.Lock()
CANCELLED: set[str] = set()
_callbacks: dict[str, list[Callable[[], None]]] = {}


def cancel(call_id: str) -> None:
    """Mark ``call_id`` cancelled and run the callbacks registered for it."""
    if not call_id:
        return
    with _lock:
        CANCELLED.add(call_id)
        todo = _callbacks.pop(call_id, [])
    for fn in todo:
        try:
            fn()
        except Exception:  # noqa: BLE001 - a failing stop must not stop the others
            pass


def is_cancelled(call_id: str) -> bool:
    return bool(CANCELLED) and call_id in CANCELLED


def on_cancel(call_id: str, fn: Callable[[], None]) -> Callable[[], None]:
    """Run ``fn`` when ``call_id`` is cancelled (now, if it already is).

    Returns a function that unregisters ``fn``; call it once the work is done."""
    if not call_id:
        return _nothing
    with _lock:
        already = call_id in CANCELLED
        if not already:
            _callbacks.setdefault(call_id, []).append(fn)
    if already:
        fn()
        return _nothing

    def remove() -> None:
        with _lock:
            fns = _callbacks.get(call_id)
            if fns is not None:
                try:
                    fns.remove(fn)
                except ValueError:
                    pass
                if not fns:
                    del _callbacks[call_id]

    return remove


def forget(call_id: str) -> None:
    """The call ended: drop its mark and callbacks."""
    with _lock:
        CANCELLED.discard(call_id)
        _callbacks.pop(call_id, None)


def _nothing() -> None:
    return None
