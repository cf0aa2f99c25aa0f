"""The gateway's HTTP app: MCP over streamable HTTP at `/mcp` behind bearer tokens, and `/healthz`.

```
request -> McpPath (/mcp -> /mcp/) -> router
   /healthz  -> 200 {"status": "ok"}                      (no token needed)
   /mcp/     -> BearerAuth: Authorization: Bearer <token>
                  missing, unknown or expired -> 401 + WWW-Authenticate: Bearer realm="demarkus"
                  else: the caller (and MCP session id) go in a context variable
             -> the SDK's streamable HTTP app (stateful sessions, JSON answers)
             -> MCP middleware on tools/call: the caller's rate limit, then the tool;
                one JSON access-log line per call (caller, tool, world, status, ms)
             -> build_server's tools over the caller's GatewayTools
```
A caller's `GatewayTools` lives as long as its MCP session (handshake-era clients); a
2026-07-28 client has no session, so each of its calls gets fresh session state (the
`unchanged` answer of mark_fetch never appears there). The access log holds no document
text, no query, no path and no token.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..auth import hash_token
from ..backend import Backend
from ..client import Client
from ..mcp.server import build_server
from ..mcp.tools import ToolFailure
from ..service import Service
from .config import WORLD_NAME, CallerConfig, GatewayConfig
from .resolver import GatewayResolver
from .tools import GatewayTools, register
from .upstream import RECEIVE_BUFFER, Breaker, Gate, Upstream

access_log = logging.getLogger("demarkus.gateway.access")

REALM = "demarkus"
MAX_SESSIONS = 4096
"""Session states kept (least recently used dropped first); a dropped one only forgets
which documents it already returned in full."""
UPSTREAM_RETRIES = 1
"""Attempts per upstream request: one. A connection that ended between requests is replaced
before sending (that is not an attempt); after a failed attempt the world's breaker and
the caller decide what next, so the verdict on a world that died is not delayed by a
second connect."""

INSTRUCTIONS = """demarkus gateway: versioned markdown from several worlds through one endpoint.
Every URL names a world: mark://<world>/<path>, e.g. mark://docs/index.md#setup. mark_worlds lists your worlds and where you may write; mark_lookup_all searches all of them at once; mark_lookup with url=mark://<world>/ searches one."""


@dataclass(frozen=True, slots=True)
class CallContext:
    """Who is calling, set by BearerAuth for the duration of one HTTP request."""

    caller: CallerConfig
    session: str | None


_current: ContextVar[CallContext | None] = ContextVar("demarkus_gateway_call", default=None)
_refusal: ContextVar[str | None] = ContextVar("demarkus_gateway_refusal", default=None)
"""Set by the MCP middleware when a call must be refused: the tool raises it as its error,
so the refusal travels like every other tool error."""


@dataclass
class TokenBucket:
    """`rate_per_minute` calls a minute, bursts up to the same number."""

    rate_per_minute: int
    clock: Callable[[], float]
    tokens: float = field(init=False)
    updated: float = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = float(self.rate_per_minute)
        self.updated = self.clock()

    def take(self) -> float | None:
        """Spend one call; None when allowed, else the seconds until the next is."""
        now = self.clock()
        rate = self.rate_per_minute / 60.0
        self.tokens = min(float(self.rate_per_minute), self.tokens + (now - self.updated) * rate)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return None
        return (1.0 - self.tokens) / rate


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Gateway:
    """What every request shares: the worlds, the callers' resolvers, sessions and limits."""

    def __init__(
        self,
        config: GatewayConfig,
        *,
        backends: Mapping[str, Backend] | None = None,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.config = config
        self.clock = clock
        self.now = now
        self.gate = Gate(config.max_upstream, config.max_upstream_per_world, config.upstream_wait)
        self._owned: list[Client | Service] = []
        self.upstreams: dict[str, Upstream] = {}
        for name, world in config.worlds.items():
            backend = (backends or {}).get(name) or self._open(world.name)
            # The client enforces the timeouts; the deadline (a connect plus one answer, plus a
            # margin) is a safety net that bounds how long a read can hold its slot.
            deadline = config.upstream_timeout + config.upstream_answer_timeout + 0.5
            self.upstreams[name] = Upstream(name, backend, self.gate, Breaker(name, clock=clock), deadline=deadline)
        self._resolvers: dict[str, GatewayResolver] = {}
        self._buckets: dict[str, TokenBucket] = {}
        self._sessions: OrderedDict[tuple[str, str], GatewayTools] = OrderedDict()

    def _open(self, name: str) -> Backend:
        world = self.config.worlds[name]
        backend: Client | Service
        if world.root is not None:
            backend = Service.open(world.root, tokens=world.tokens, trusted=world.tokens is None)
        else:
            assert world.authority is not None
            timeout = self.config.upstream_timeout
            backend = Client(world.authority, ca=world.ca, insecure=world.insecure, dial_host=world.dial,
                             timeout=timeout, connect_timeout=timeout,
                             answer_timeout=self.config.upstream_answer_timeout,
                             retries=UPSTREAM_RETRIES, receive_buffer=RECEIVE_BUFFER)
        self._owned.append(backend)
        return backend

    async def close(self) -> None:
        for resolver in self._resolvers.values():
            resolver.close()
        self._resolvers.clear()
        self._sessions.clear()
        for backend in self._owned:
            if isinstance(backend, Client):
                await backend.close()
            else:
                backend.close()
        self._owned.clear()

    # --- callers --------------------------------------------------------------------------

    def authenticate(self, header: str | None) -> tuple[CallerConfig | None, str]:
        """The caller presenting this Authorization header, or None and why not."""
        scheme, _, token = (header or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None, "missing"
        caller = self.config.caller_by_hash(hash_token(token))
        if caller is None:
            return None, "unknown"
        if caller.expired(self.now()):
            return None, "expired"
        return caller, ""

    def resolver(self, caller: CallerConfig) -> GatewayResolver:
        resolver = self._resolvers.get(caller.name)
        if resolver is None:
            resolver = self._resolvers[caller.name] = GatewayResolver(caller, self.upstreams)
        return resolver

    def tools_for(self) -> GatewayTools:
        """The calling caller's tools for this MCP session (fresh ones without a session)."""
        refusal = _refusal.get()
        if refusal is not None:
            raise ToolFailure(refusal)
        call = _current.get()
        if call is None:
            raise ToolFailure("no authenticated caller: reach this server through its HTTP endpoint with a bearer token")
        resolver = self.resolver(call.caller)
        if call.session is None:
            return GatewayTools(resolver)
        key = (call.caller.name, call.session)
        tools = self._sessions.get(key)
        if tools is None:
            tools = self._sessions[key] = GatewayTools(resolver)
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(key)
        return tools

    def end_session(self, caller: CallerConfig, session: str) -> None:
        self._sessions.pop((caller.name, session), None)

    def rate_wait(self, caller: CallerConfig) -> float | None:
        """None when the caller may call now, else the seconds to wait."""
        bucket = self._buckets.get(caller.name)
        if bucket is None:
            rate = caller.rate_per_minute or self.config.rate_per_minute
            bucket = self._buckets[caller.name] = TokenBucket(rate, self.clock)
        return bucket.take()

    # --- MCP middleware ------------------------------------------------------------------

    async def mcp_middleware(self, ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        """Rate-limit and log every tools/call; other methods pass through."""
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params = ctx.params or {}
        tool = str(params.get("name", ""))
        arguments = params.get("arguments") or {}
        call = _current.get()
        started = self.clock()
        status = "error"
        refused = None
        try:
            if call is not None:
                wait = self.rate_wait(call.caller)
                if wait is not None:
                    rate = call.caller.rate_per_minute or self.config.rate_per_minute
                    refused = _refusal.set(
                        f"rate limit: {rate} tool calls a minute for this caller; "
                        f"the next call is allowed in {max(wait, 0.1):.1f} s"
                    )
            result = await call_next(ctx)
            status = "rate-limited" if refused is not None else "error" if _is_error(result) else "ok"
            return result
        finally:
            if refused is not None:
                _refusal.reset(refused)
            self.log_call(call.caller.name if call else "", tool, _world_of(tool, arguments), status, self.clock() - started)

    def log_call(self, caller: str, tool: str, world: str, status: str, seconds: float) -> None:
        access_log.info(json.dumps({
            "ts": _timestamp(self.now()), "event": "tool", "caller": caller, "tool": tool,
            "world": world, "status": status, "ms": round(seconds * 1000.0, 1),
        }, sort_keys=True))

    def log_refusal(self, reason: str, method: str) -> None:
        access_log.info(json.dumps({
            "ts": _timestamp(self.now()), "event": "http", "status": 401, "reason": reason, "method": method,
        }, sort_keys=True))


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _world_of(tool: str, arguments: Mapping[str, Any]) -> str:
    """The world a call names, for the log: a valid world name or "" (never the path)."""
    if tool == "mark_lookup_all":
        return "*"
    url = arguments.get("url")
    if not isinstance(url, str) or not url.lower().startswith("mark://"):
        return ""
    world = url[len("mark://"):].split("/", 1)[0].split("#", 1)[0].lower()
    return world if WORLD_NAME.fullmatch(world) else ""


def _is_error(result: object) -> bool:
    if isinstance(result, Mapping):
        return bool(result.get("isError"))
    return bool(getattr(result, "is_error", False))


# --- HTTP -------------------------------------------------------------------------------

_CHALLENGES = {
    "missing": ("", "this endpoint needs the header Authorization: Bearer <token>"),
    "unknown": ("invalid_token", "the bearer token is not known here; check that it was copied whole, or ask the operator for one"),
    "expired": ("invalid_token", "the bearer token has expired; ask the operator for a new one"),
}


def unauthorized(reason: str) -> JSONResponse:
    """401 with an RFC 6750 challenge; no error code when no credentials were sent."""
    code, message = _CHALLENGES[reason]
    challenge = f'Bearer realm="{REALM}"'
    if code:
        challenge += f', error="{code}", error_description="{message}"'
    return JSONResponse({"error": code or "unauthorized", "error_description": message}, status_code=401,
                        headers={"WWW-Authenticate": challenge})


class BearerAuth:
    """Authenticate every request to the MCP endpoint; the caller rides a context variable
    into the tool handlers (the SDK runs them in the request's context)."""

    def __init__(self, app: ASGIApp, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        caller, reason = self.gateway.authenticate(headers.get("authorization"))
        if caller is None:
            self.gateway.log_refusal(reason, scope.get("method", ""))
            await unauthorized(reason)(scope, receive, send)
            return
        # The SDK binds each session to the principal that opened it: another caller's
        # token cannot ride a session id it learned.
        scope["user"] = AuthenticatedUser(AccessToken(token=caller.hash, client_id=caller.name, scopes=[]))
        session = headers.get("mcp-session-id")
        token = _current.set(CallContext(caller, session))
        try:
            await self.app(scope, receive, send)
        finally:
            _current.reset(token)
            if scope.get("method") == "DELETE" and session:
                self.gateway.end_session(caller, session)


class McpPath:
    """Serve `/mcp` like `/mcp/` instead of redirecting (a redirect can drop a POST body)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") == "/mcp":
            scope = dict(scope, path="/mcp/", raw_path=b"/mcp/")
        await self.app(scope, receive, send)


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def create_app(
    config: GatewayConfig,
    *,
    host: str = "127.0.0.1",
    backends: Mapping[str, Backend] | None = None,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], datetime] = _utc_now,
) -> Starlette:
    """The gateway as an ASGI app; `app.state.gateway` is its `Gateway`.

    `host` is where it will listen: on loopback the SDK also checks Host and Origin headers
    (DNS rebinding). `backends` replaces how named worlds are reached (tests).
    """
    gateway = Gateway(config, backends=backends, clock=clock, now=now)
    server = build_server(gateway.tools_for, name="demarkus-gateway", instructions=INSTRUCTIONS, writable=True)
    register(server, gateway.tools_for)
    server.middleware.append(gateway.mcp_middleware)
    mcp_app = server.streamable_http_app(streamable_http_path="/", json_response=True, host=host)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Required: a mounted app's own lifespan does not run.
        async with server.session_manager.run():
            try:
                yield
            finally:
                await gateway.close()

    app = Starlette(
        routes=[Route("/healthz", healthz, methods=["GET"]), Mount("/mcp", app=BearerAuth(mcp_app, gateway))],
        middleware=[Middleware(McpPath)],
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    app.state.mcp = server
    return app
