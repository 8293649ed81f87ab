"""What the model sees of a call: rendering, the output cap, and paging through a
spilled output with ``read_output`` (docs/spec.md §9 step 6, §8.6).

A text over ``limits.max_output_bytes`` is cut at a character boundary; the full text
is handed to ``spill`` (the session keeps it for ``read_output``) and the notice at
the end names the reference and the offset to read on from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from harness.runtime.nesting import MAX_VALUE_DEPTH, value_depth_path

Spill = Callable[[str], "str | None"]  # full text -> reference, or None when not kept


def render(value: Any) -> str:
    """What the model sees of a value: the string itself, or compact JSON."""
    kind = type(value)
    if kind is str:
        return value
    if kind is int:
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def cap_text(text: str, max_bytes: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``max_bytes`` UTF-8 bytes without splitting a character."""
    if len(text) <= max_bytes // 4:  # fast path: cannot exceed the cap
        return text, False
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    return data[:max_bytes].decode("utf-8", "ignore"), True


def truncation_notice(max_bytes: int, ref: str | None, offset: int) -> str:
    """The last lines of a cut output; ``offset`` is where the shown text stops."""
    notice = f"[output truncated at {max_bytes} bytes]"
    if ref is None:
        return "\n" + notice
    return (
        f'\n[full output kept as "{ref}": call read_output(ref="{ref}", '
        f"offset={offset}) for the rest]\n{notice}"
    )


def is_error_value(value: Any) -> bool:
    """The artifact convention: a dict with "error" and nothing but "error"/"details"."""
    return isinstance(value, dict) and "error" in value and set(value) <= {"error", "details"}


def json_problem(value: Any, path: str = "$", depth: int = 0) -> str | None:
    """Where a handler's return value stops being JSON (None when it is JSON)."""
    if value is None or type(value) in (str, int, float, bool):
        if type(value) is float and (value != value or value in (float("inf"), float("-inf"))):
            return f"{path} is {value!r}"
        return None
    if depth == 0 and (deep := value_depth_path(value)) is not None:
        return f"{deep} is nested more than {MAX_VALUE_DEPTH} levels deep"  # the one rule
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            bad = json_problem(v, f"{path}[{i}]", depth + 1)
            if bad:
                return bad
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{path} has a non-string key {k!r}"
            bad = json_problem(v, f"{path}.{k}", depth + 1)
            if bad:
                return bad
        return None
    return f"{path} is a {type(value).__name__}"


def capped(text: str, max_bytes: int, spill: Spill) -> tuple[str, str | None]:
    """(what the model sees, reference of the full text) for a text over the cap: the
    whole of it, notice included, stays within ``max_bytes``."""
    ref = spill(text)
    notice = truncation_notice(max_bytes, ref, 0)
    room = max(0, max_bytes - len(notice.encode("utf-8")) - 16)
    head, _ = cap_text(text, room)
    return head + truncation_notice(max_bytes, ref, len(head.encode("utf-8"))), ref


FOOTER_ROOM = 200  # bytes kept free in a read_output page for its last line


def read_page(data: bytes, ref: str, args: Mapping[str, Any], max_output_bytes: int) -> str:
    """One ``read_output`` page of the spilled output ``data`` (shared with
    ``harness serve``'s server-wide store)."""
    total = len(data)
    max_page = max(64, max_output_bytes - FOOTER_ROOM)
    limit = min(int(args.get("limit") or max_page), max_page)
    start = min(int(args.get("offset", 0)), total)
    while start < total and data[start] & 0xC0 == 0x80:
        start += 1  # do not begin inside a character
    end = min(total, start + limit)
    while start < end < total and data[end] & 0xC0 == 0x80:
        end -= 1  # nor end inside one
    page = data[start:end].decode("utf-8", "replace")
    if end < total:
        more = f'next page: read_output(ref="{ref}", offset={end})'
    else:
        more = "end of output"
    return f"{page}\n[read_output {ref}: bytes {start}-{end} of {total}; {more}]"
