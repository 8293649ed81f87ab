"""Server-sent events (the streaming framing both providers use), decoded from lines.

Follows the WHATWG event-stream rules that matter here: ``field: value`` lines (one
optional space after the colon is dropped), ``data`` lines of one event joined with
``\\n``, comment lines starting with ``:``, an event dispatched at a blank line (and at
the end of the stream if the last one was not terminated). Line splitting (``\\n``,
``\\r\\n``, ``\\r``) is done by the caller (``httpx.Response.iter_lines``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    event: str = "message"
    data: str = ""


def iter_events(lines: Iterable[str]) -> Iterator[Event]:
    """Yield one :class:`Event` per dispatched event; events without data are skipped."""
    name = ""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield Event(event=name or "message", data="\n".join(data))
            name, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
        # "id" and "retry" are irrelevant for one-shot model responses.
    if data:
        yield Event(event=name or "message", data="\n".join(data))
