"""Every caller's MCP sessions, bounded per caller, so one caller can never use up the
sessions of the others.

```
request without Mcp-Session-Id that would open a session (a handshake-era client)
   -> SessionTable.reserve(caller)
        room under max_sessions_per_caller -> the SDK opens the session
        else the caller's least recently used idle session is closed first (the SDK's
             session ends: its transport, its tasks and its GatewayTools are released)
        every session of the caller busy -> 429 (JSON-RPC error: reuse one, or DELETE one)
request with this caller's Mcp-Session-Id -> that session is used (busy while in flight)
DELETE -> the session is forgotten
```
Closing the least recently used session instead of refusing the new one: a client that
crashed or never sends DELETE would otherwise lock itself out until its sessions expire,
while the cost of closing lands only on the caller that is at its bound (its old session
id answers 404, which tells an MCP client to initialize again).

Idle sessions are ended by the SDK itself (`session_idle_timeout`); the table drops a
session the SDK no longer has the next time its caller opens one. A 2026-07-28 client has no
session: its requests pass through untouched. The callers are configured, so the SDK never
holds more than `max_sessions_per_caller` x callers sessions; its own cap is set to exactly
that, which this table never lets it reach (a session is reserved before the SDK admits it).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import RateLimitedError
from .tools import GatewayTools

RETRY_AFTER = 1
"""Seconds a refused session opening is told to wait: a busy session frees when its call
returns, usually well within a second."""


@dataclass(slots=True)
class Session:
    """One live MCP session of a caller."""

    in_flight: int = 0
    """Requests on it being served now; a busy session is never the one closed."""
    tools: GatewayTools | None = None
    """Its tool state (which documents it already returned in full), made on first use."""


class SessionTable:
    """Per caller: its live sessions, least recently used first, and how many it is opening.

    A pure table: which sessions still exist in the SDK is asked through `alive`.
    """

    def __init__(self, per_caller: int) -> None:
        self.per_caller = per_caller
        self._live: dict[str, OrderedDict[str, Session]] = {}
        self._opening: dict[str, int] = {}

    def reserve(self, caller: str, alive: Callable[[str], bool]) -> str | None:
        """Room for one more session of `caller`: None, or the id of the session it replaces
        (already dropped here; the caller of this closes it in the SDK). Pair with `opened`
        or `abandoned`.

        Raises:
            RateLimitedError: every session of the caller is busy or being opened.
        """
        live = self._live.setdefault(caller, OrderedDict())
        for gone in [sid for sid in live if not alive(sid)]:
            del live[gone]
        opening = self._opening.get(caller, 0)
        victim = None
        if len(live) + opening >= self.per_caller:
            victim = next((sid for sid, session in live.items() if session.in_flight == 0), None)
            if victim is None:
                raise RateLimitedError(
                    f"all {self.per_caller} MCP sessions this caller may hold are busy, so no new "
                    "one can open; reuse one of yours (send its Mcp-Session-Id header), end one "
                    "you no longer need (HTTP DELETE with its Mcp-Session-Id), or retry when a "
                    "call returns"
                )
            del live[victim]
        self._opening[caller] = opening + 1
        return victim

    def opened(self, caller: str, session_id: str) -> None:
        """The reserved opening succeeded as `session_id`."""
        self._settle(caller)
        self._live.setdefault(caller, OrderedDict())[session_id] = Session()

    def abandoned(self, caller: str) -> None:
        """The reserved opening did not open a session."""
        self._settle(caller)

    def _settle(self, caller: str) -> None:
        left = self._opening.get(caller, 0) - 1
        if left > 0:
            self._opening[caller] = left
        else:
            self._opening.pop(caller, None)

    def use(self, caller: str, session_id: str) -> Session | None:
        """The caller's session, now its most recently used; None if it has no such session."""
        live = self._live.get(caller)
        if live is None or session_id not in live:
            return None
        live.move_to_end(session_id)
        return live[session_id]

    def end(self, caller: str, session_id: str) -> None:
        live = self._live.get(caller)
        if live is not None:
            live.pop(session_id, None)

    def count(self, caller: str) -> int:
        return len(self._live.get(caller, ()))

    def clear(self) -> None:
        self._live.clear()
        self._opening.clear()


class SessionLimit:
    """`SessionTable` in front of the SDK's session manager, one HTTP request at a time.

    mcp 2.3.0 offers no public way for a server to end a session or to ask whether one is
    still open: `alive` and `close` read the manager's `_server_instances` and call its
    `_discard_session`, the very step it takes itself on DELETE and on idle expiry.
    """

    def __init__(self, app: ASGIApp, table: SessionTable, manager: StreamableHTTPSessionManager) -> None:
        self.app = app
        self.table = table
        self.manager = manager

    def alive(self, session_id: str) -> bool:
        return session_id in self.manager._server_instances

    async def close(self, session_id: str) -> None:
        transport = self.manager._server_instances.get(session_id)
        if transport is not None:
            await self.manager._discard_session(session_id, transport)

    async def serve(
        self, caller: str, scope: Scope, receive: Receive, send: Send, refused: Callable[[str], None]
    ) -> None:
        """Serve one request of `caller`; `refused(reason)` logs a refused opening."""
        headers = Headers(scope=scope)
        session_id = headers.get(MCP_SESSION_ID_HEADER)
        if session_id is not None:
            await self._serve_in(caller, session_id, scope, receive, send)
        elif opens_session(headers):
            await self._serve_opening(caller, scope, receive, send, refused)
        else:
            await self.app(scope, receive, send)

    async def _serve_in(self, caller: str, session_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        session = self.table.use(caller, session_id)
        if session is None:  # not this caller's (the SDK answers 404)
            await self.app(scope, receive, send)
            return
        session.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            session.in_flight -= 1
            if not self.alive(session_id):  # ended by this request (DELETE) or meanwhile
                self.table.end(caller, session_id)

    async def _serve_opening(
        self, caller: str, scope: Scope, receive: Receive, send: Send, refused: Callable[[str], None]
    ) -> None:
        try:
            victim = self.table.reserve(caller, self.alive)
        except RateLimitedError as exc:
            refused("sessions")
            await too_many_sessions(str(exc))(scope, receive, send)
            return
        if victim is not None:
            await self.close(victim)
        opened = False

        async def watch(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and message["status"] < 400:
                session_id = Headers(raw=message.get("headers", [])).get(MCP_SESSION_ID_HEADER)
                if session_id is not None and not opened:
                    opened = True
                    self.table.opened(caller, session_id)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if not opened:
                self.table.abandoned(caller)


def opens_session(headers: Headers) -> bool:
    """Whether the SDK would open a session for this request: it carries no session id and
    is not a 2026-07-28 one (the SDK routes a protocol version outside the handshake era to
    its session-less path)."""
    if headers.get(MCP_SESSION_ID_HEADER) is not None:
        return False
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


def too_many_sessions(message: str) -> Response:
    """429 with a JSON-RPC error body, shaped like the SDK's own refusals."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    return Response(
        json.dumps(body), status_code=429, media_type="application/json", headers={"Retry-After": str(RETRY_AFTER)}
    )
