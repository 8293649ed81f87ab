"""The connection guard of ``harness serve --transport http``: uvicorn's h11 protocol
with a header deadline, a connection cap, and a separate budget for connections that
have not authenticated yet (issue 10 item 10, issue 22 item 5).

- A connection must complete its request headers within ``header_timeout`` seconds
  of connecting (or of starting its next request), or it is closed: uvicorn closes
  idle keep-alive connections, but not one that never finishes its headers.
- A connection is *pending* until one of its requests arrives complete with a valid
  bearer token (any complete request with ``--no-auth``); then it is *trusted*.
  Pending connections have a budget of their own (:func:`pending_budget`): when it is
  full, or when every slot of ``max_connections`` is taken, a new connection closes
  the oldest pending one *that has not delivered a complete request head*. A head
  that has arrived but is not parsed yet (still in the kernel's buffer or h11's) is
  looked at (``MSG_PEEK``) before a connection is chosen: such a connection is never
  the victim, it is parsed and authenticated on the next turn of the loop. So a
  continuous flood of half-open or token-less connections from the same address is
  dropped in turn and never keeps a client with a token out (issue 22 item 5, F2).
- A new connection is refused when trusted connections fill ``max_connections``, or
  when every pending connection has a complete head waiting to be parsed.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Sequence
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("harness.serve")

Headers = Sequence[tuple[bytes, bytes]]


def pending_budget(max_connections: int) -> int:
    """Pending connections held at once: an eighth of the cap, at least 8 (at most the cap)."""
    return min(max_connections, max(8, max_connections // 8))


class _Admission:
    """The pending and trusted connections of one server, and what a new one may do."""

    def __init__(self, max_connections: int, admit: Callable[[Headers], bool] | None) -> None:
        self.max_connections = max_connections
        self.budget = pending_budget(max_connections)
        self.admit = admit
        self.pending: dict[Any, None] = {}  # insertion order: the oldest first
        self.trusted: set[Any] = set()
        self._warned: set[str] = set()

    def arrive(self, conn: Any) -> bool:
        """Room for a new connection (closing the oldest pending one if need be)?"""
        full = len(self.pending) + len(self.trusted) >= self.max_connections
        if len(self.pending) >= self.budget or full:
            if not self.pending:
                self._warn(
                    "full",
                    f"{self.max_connections} authenticated connections are open; closing "
                    "new ones (--max-connections)",
                )
                return False
            self._warn(
                "pending",
                "too many connections without a complete authenticated request; closing "
                "the oldest of them as new ones arrive (--max-connections)",
            )
            victim = self._victim()
            if victim is None:
                self._warn(
                    "heads",
                    "every pending connection has a request waiting to be read; closing "
                    "new ones until they are (--max-connections)",
                )
                return False
            del self.pending[victim]
            victim.drop()
        self.pending[conn] = None
        return True

    def _victim(self) -> Any:
        """The oldest pending connection without a complete request head, or None."""
        for conn in self.pending:  # oldest first; bounded by the pending budget
            if not conn.head_waiting():
                return conn
        return None

    def request(self, conn: Any, headers: Headers) -> None:
        """A complete request arrived on ``conn``: trusted from now on if it authenticates."""
        if conn in self.pending and (self.admit is None or self.admit(headers)):
            del self.pending[conn]
            self.trusted.add(conn)

    def leave(self, conn: Any) -> None:
        self.pending.pop(conn, None)
        self.trusted.discard(conn)

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning(message)


def no_delay(transport: asyncio.BaseTransport) -> None:
    """Turn Nagle's algorithm off on an accepted TCP socket. With it on, a response
    written in two sends (head, then body) waits for the client's delayed ACK of the
    first: about 40 ms per request (issue 26 item 3)."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:  # pragma: no cover - a socket closed already
        pass


class _GuardedH11Protocol(H11Protocol):
    admission: _Admission
    header_timeout: float
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        no_delay(transport)
        super().connection_made(transport)
        if not self.admission.arrive(self):
            transport.close()
            return
        self._arm_header_timer()

    def drop(self) -> None:
        """Closed to make room for a newer connection."""
        self._disarm_header_timer()
        if not self.transport.is_closing():
            self.transport.close()

    def head_waiting(self) -> bool:
        """Whether a complete request head has arrived on this connection but is not
        parsed yet: in h11's buffer, or still in the socket (looked at, not read)."""
        if self.conn.their_state is not h11.IDLE or self.transport.is_closing():
            return False
        buffered = self.conn.trailing_data[0]
        return b"\r\n\r\n" in buffered or b"\r\n\r\n" in buffered[-3:] + _peek(self.transport)

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            self._disarm_header_timer()
        elif self.conn.their_state is h11.IDLE:
            self._arm_header_timer()  # part of a request's headers: the clock runs
        else:
            self._disarm_header_timer()
            self.admission.request(self, self.headers or ())

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        self.admission.leave(self)
        super().connection_lost(exc)


PEEK_BYTES = 16384  # h11's bound on a request head


def _peek(transport: asyncio.Transport) -> bytes:
    """The bytes waiting in a transport's socket, left there (``MSG_PEEK``)."""
    raw = transport.get_extra_info("socket")
    if raw is None:
        return b""
    # A socket object over the same descriptor (detached, never closed): asyncio's
    # wrapper offers no recv.
    sock = socket.socket(raw.family, raw.type, fileno=raw.fileno())
    try:
        return sock.recv(PEEK_BYTES, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return b""
    finally:
        sock.detach()


def guarded_protocol(
    header_timeout: float,
    max_connections: int,
    admit: Callable[[Headers], bool] | None = None,
) -> type:
    """The protocol class for ``uvicorn.Config(http=...)`` of one server;
    ``admit(headers)`` says whether a complete request authenticates its connection
    (None: any complete request does)."""
    return type(
        "GuardedH11Protocol",
        (_GuardedH11Protocol,),
        {"admission": _Admission(max_connections, admit), "header_timeout": header_timeout},
    )
