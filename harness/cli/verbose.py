"""``-v`` of ``harness call`` and ``harness test``: what scripts print and log, with
the file and line of each ``print``/``log`` call (runtime/tracebacks.py marks them).

Records reach the ``harness`` logger through ``Session.log`` (both isolation modes:
a worker forwards them to the calling process). :func:`script_output` shows them on
stderr while a command runs, one line each::

    .harness/tools/t.md:6: print: looking at {"a": 1}
    .harness/tools/t.md:7: info: about to look up key="x"
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import click

Sink = Callable[[str, str], None]  # (session id, line)


def record_line(level: str, message: str, fields: Mapping[str, Any]) -> str:
    """One script record as a line: ``FILE:LINE: LEVEL: MESSAGE key=value...``."""
    at = fields.get("at") or fields.get("tool") or "harness"
    kind = "print" if fields.get("source") == "print" else level
    extra = fields.get("fields")
    shown = ""
    if isinstance(extra, Mapping) and extra:
        shown = " " + " ".join(
            f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in extra.items()
        )
    return f"{at}: {kind}: {message}{shown}"


class _Handler(logging.Handler):
    def __init__(self, sink: Sink) -> None:
        super().__init__(logging.INFO)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        got = getattr(record, "harness_record", None)
        if got is not None:
            level, message, fields, session = got
            self.sink(session, record_line(level, message, fields))
        elif record.levelno >= logging.WARNING:
            self.sink("", f"harness: {record.levelname.lower()}: {record.getMessage()}")


def _echo(_session: str, line: str) -> None:
    click.echo(line, err=True)


@contextmanager
def script_output(sink: Sink = _echo) -> Iterator[None]:
    """Send every script record (print, log.*) to ``sink`` while the block runs."""
    logger = logging.getLogger("harness")
    handler = _Handler(sink)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # shown once, here
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
