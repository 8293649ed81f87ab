"""Bounds on the MCP sessions of ``harness serve --transport http`` (issue 22 item 5, F3).

The SDK's session manager keeps every session an ``initialize`` opens until the client
deletes it or it has been idle for 30 minutes; one identity could open thousands.
Here, per identity (its token; everyone alike with ``--no-auth``):

- at most ``serve.max_sessions_per_identity`` sessions: opening one more closes that
  identity's least recently used session;
- at most ``serve.max_sessions`` sessions server-wide: opening one more closes the
  least recently used session of the identity that holds the most.

A closed session is forgotten at once: its id answers the SDK's ``Session not found``
(404), as after the idle timeout, and a client opens a new one. Closing rather than
refusing keeps a client that restarts without deleting its sessions working, and
one identity's sessions are only ever closed by its own new ones (below the
server-wide cap).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, MutableMapping
from typing import Any

from harness.config_serve import ServeConfig

log = logging.getLogger("harness.serve")


class SessionBounds:
    """Installed on one SDK ``StreamableHTTPSessionManager`` (its ``_admit_session``
    and ``asgi_app``, which it looks up on every request)."""

    def __init__(self, manager: Any, settings: Callable[[], ServeConfig]) -> None:
        self.manager = manager
        self.settings = settings
        # owner -> session id -> None, least recently used first
        self.owners: dict[str, OrderedDict[str, None]] = {}
        self.owner_of: dict[str, str] = {}
        self._admit = manager._admit_session
        self._app = manager.asgi_app
        manager._admit_session = self.admit
        manager.asgi_app = self.touching
        self._warned = False

    def live(self) -> int:
        return len(self.owner_of)

    def admit(self, requestor: Any) -> Any:
        """The SDK's admission of a new session, after making room for it."""
        self._prune()
        cfg = self.settings()
        owner = _owner(requestor)
        mine = self.owners.get(owner)
        while mine and len(mine) >= cfg.max_sessions_per_identity:
            self._close(next(iter(mine)), "serve.max_sessions_per_identity", cfg)
        while self.live() >= cfg.max_sessions and self.owners:
            busiest = max(self.owners.values(), key=len)
            self._close(next(iter(busiest)), "serve.max_sessions", cfg)
        transport = self._admit(requestor)
        sid = getattr(transport, "mcp_session_id", None)
        if sid is not None:
            self.owners.setdefault(owner, OrderedDict())[sid] = None
            self.owner_of[sid] = owner
        return transport

    async def touching(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        """Every request naming a session makes it the most recently used."""
        for key, value in scope.get("headers") or ():
            if key == b"mcp-session-id":
                sid = value.decode("latin-1")
                owner = self.owner_of.get(sid)
                if owner is not None:
                    self.owners[owner].move_to_end(sid)
                break
        await self._app(scope, receive, send)

    def _prune(self) -> None:
        """Forget sessions the SDK has ended (deleted, idle, failed to open)."""
        known = self.manager._server_instances
        for sid in [s for s in self.owner_of if s not in known]:
            self._forget(sid)

    def _forget(self, sid: str) -> None:
        owner = self.owner_of.pop(sid, None)
        if owner is None:
            return
        sessions = self.owners[owner]
        sessions.pop(sid, None)
        if not sessions:
            del self.owners[owner]

    def _close(self, sid: str, setting: str, cfg: ServeConfig) -> None:
        self._forget(sid)
        manager = self.manager
        transport = manager._server_instances.pop(sid, None)
        manager._session_owners.pop(sid, None)
        if not self._warned:
            self._warned = True
            log.warning(
                "closing the least recently used MCP session to open a new one (%s: %d, "
                "serve.max_sessions: %d in harness.md); its client must initialize again",
                setting,
                cfg.max_sessions_per_identity,
                cfg.max_sessions,
            )
        if transport is not None and manager._task_group is not None:
            manager._task_group.start_soon(manager._discard_session, sid, transport)


def _owner(requestor: Any) -> str:
    if isinstance(requestor, dict):
        return str(requestor.get("client_id"))
    return "anonymous"
