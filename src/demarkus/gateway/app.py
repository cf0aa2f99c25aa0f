"""The gateway's HTTP app: MCP over streamable HTTP at `/mcp` behind bearer tokens, and `/healthz`.

```
request -> McpPath (/mcp -> /mcp/) -> router
   /healthz  -> 200 {"status": "ok"|"degraded", "worlds": {"up": n, "down": n, "unknown": n}}
                (no token needed; with a caller's token also "yours": {<world>: <state>})
   /mcp/     -> BearerAuth: Authorization: Bearer <token>
                  missing, unknown or expired -> 401 + WWW-Authenticate: Bearer realm="demarkus"
                  else: the caller (and MCP session id) go in a context variable
             -> SessionLimit: at most max_sessions_per_caller sessions per caller (sessions.py)
             -> the SDK's streamable HTTP app (stateful sessions, JSON answers; sessions idle
                for session_idle_timeout end)
             -> MCP middleware on tools/call: params checked (name a string, arguments an
                object: else a JSON-RPC invalid-params error), the caller's rate limit, then
                the tool; one JSON access-log line per call (caller, tool, world, status, ms)
             -> build_server's tools over the caller's GatewayTools
```
A caller's `GatewayTools` lives as long as its MCP session (handshake-era clients); a
2026-07-28 client has no session, so each of its calls gets fresh session state (the
`unchanged` answer of mark_fetch never appears there). The access log holds no document
text, no query, no path and no token.

/healthz reports what the worlds' breakers know from real requests and never sends one
itself: an anonymous request cannot make the gateway contact a world, nor trip the breaker
its callers share. Anonymous callers see counts only: which worlds exist is not told to
someone without a token (a refused world URL does not tell either). It answers 200 while
the gateway runs, even with every world down: another gateway reaches the same worlds, so
a load balancer gains nothing by dropping this one, and callers keep getting clear errors.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, PARSE_ERROR
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..auth import hash_token
from ..backend import Backend
from ..client import Client
from ..errors import BadRequestError
from ..expand.held import SHARED_MAX_BYTES, HeldDocuments
from ..mcp.server import build_server
from ..mcp.tools import ToolFailure
from ..service import Service
from .config import WORLD_NAME, CallerConfig, GatewayConfig
from .resolver import GatewayResolver
from .sessions import SessionLimit, SessionTable
from .tools import GatewayTools, register
from .upstream import RECEIVE_BUFFER, Breaker, Gate, Health, Upstream

access_log = logging.getLogger("demarkus.gateway.access")

REALM = "demarkus"
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
        self.sessions = SessionTable(config.max_sessions_per_caller)
        self.held = HeldDocuments(SHARED_MAX_BYTES)
        """The documents every caller's lookups fetched: a body is sent once for all of
        them, and reused for each only as the authority vouches (`expand.held`)."""

    def _open(self, name: str) -> Backend:
        world = self.config.worlds[name]
        backend: Client | Service
        if world.root is not None:
            backend = Service.open(world.root, tokens=world.tokens, trusted=world.tokens is None)
        else:
            assert world.authority is not None
            timeout = self.config.upstream_timeout
            backend = Client(
                world.authority,
                ca=world.ca,
                insecure=world.insecure,
                dial_host=world.dial,
                timeout=timeout,
                connect_timeout=timeout,
                answer_timeout=self.config.upstream_answer_timeout,
                retries=UPSTREAM_RETRIES,
                receive_buffer=RECEIVE_BUFFER,
            )
        self._owned.append(backend)
        return backend

    async def close(self) -> None:
        for resolver in self._resolvers.values():
            resolver.close()
        self._resolvers.clear()
        self.sessions.clear()
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
            raise ToolFailure(
                "no authenticated caller: reach this server through its HTTP endpoint with a bearer token"
            )
        resolver = self.resolver(call.caller)
        session = None
        if call.session is not None:
            session = self.sessions.use(call.caller.name, call.session)
        if session is None:
            return GatewayTools(resolver, self.held)
        if session.tools is None:
            session.tools = GatewayTools(resolver, self.held)
        return session.tools

    def rate_wait(self, caller: CallerConfig) -> float | None:
        """None when the caller may call now, else the seconds to wait."""
        bucket = self._buckets.get(caller.name)
        if bucket is None:
            rate = caller.rate_per_minute or self.config.rate_per_minute
            bucket = self._buckets[caller.name] = TokenBucket(rate, self.clock)
        return bucket.take()

    # --- MCP middleware ------------------------------------------------------------------

    async def mcp_middleware(self, ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        """Check, rate-limit and log every tools/call; other methods pass through."""
        if ctx.method != "tools/call":
            return await call_next(ctx)
        call = _current.get()
        started = self.clock()
        try:
            tool, arguments = read_call(ctx.params)
        except BadRequestError as exc:
            self.log_call(
                call.caller.name if call else "", _logged_tool(ctx.params), "", "bad-request", self.clock() - started
            )
            raise MCPError(INVALID_PARAMS, str(exc)) from None
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
            self.log_call(
                call.caller.name if call else "",
                _logged_tool(ctx.params),
                _world_of(tool, arguments),
                status,
                self.clock() - started,
            )

    def log_call(self, caller: str, tool: str, world: str, status: str, seconds: float) -> None:
        access_log.info(
            json.dumps(
                {
                    "ts": _timestamp(self.now()),
                    "event": "tool",
                    "caller": caller,
                    "tool": tool,
                    "world": world,
                    "status": status,
                    "ms": round(seconds * 1000.0, 1),
                },
                sort_keys=True,
            )
        )

    def log_refusal(self, status: int, reason: str, method: str, caller: str = "") -> None:
        """One access-log line for an HTTP request refused before any tool ran."""
        line: dict[str, object] = {
            "ts": _timestamp(self.now()),
            "event": "http",
            "status": status,
            "reason": reason,
            "method": method,
        }
        if caller:
            line["caller"] = caller
        access_log.info(json.dumps(line, sort_keys=True))

    # --- health --------------------------------------------------------------------------

    def world_health(self, name: str) -> Health:
        """What the world's breaker knows; an embedded store is up from the start."""
        health = self.upstreams[name].breaker.health
        if health is Health.UNKNOWN and self.config.worlds[name].root is not None:
            return Health.UP
        return health

    def health(self, caller: CallerConfig | None) -> dict[str, object]:
        """/healthz's answer: counts for anyone, and the caller's own worlds by name."""
        states = {name: self.world_health(name) for name in self.upstreams}
        counts = {str(health): 0 for health in Health}
        for health in states.values():
            counts[str(health)] += 1
        answer: dict[str, object] = {
            "status": "degraded" if counts[str(Health.DOWN)] else "ok",
            "worlds": counts,
        }
        if caller is not None:
            answer["yours"] = {name: str(states[name]) for name in caller.read}
        return answer


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""A tool name the access log repeats; any other `name` is logged as "?" (a caller's text,
of any length, never goes into the log)."""


def read_call(params: object) -> tuple[str, Mapping[str, Any]]:
    """The tool name and arguments of a tools/call's params (absent or null arguments: none).

    Raises:
        BadRequestError: params is not an object, name not a string, or arguments not an object.
    """
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise BadRequestError(
            'tools/call params must be an object such as {"name": "mark_fetch", '
            '"arguments": {"url": "mark://<world>/index.md"}}; '
            f"it was {_json_kind(params)}"
        )
    name = params.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequestError(
            "tools/call params.name must be a tool's name as a string "
            f"(tools/list lists them); it was {_json_kind(name)}"
        )
    arguments = params.get("arguments")
    if arguments is None:
        return name, {}
    if not isinstance(arguments, Mapping):
        raise BadRequestError(
            f"tools/call params.arguments must be an object with {name[:64]}'s "
            'parameters by name, e.g. {"url": "mark://<world>/index.md"} '
            f"(or left out when it takes none); it was {_json_kind(arguments)}"
        )
    return name, arguments


def _json_kind(value: object) -> str:
    """The JSON type of a parsed value, in words ("a string", "null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "an empty string" if not value else "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _logged_tool(params: object) -> str:
    name = params.get("name") if isinstance(params, Mapping) else None
    if name is None:
        return ""
    return name if isinstance(name, str) and TOOL_NAME.fullmatch(name) else "?"


def _world_of(tool: str, arguments: Mapping[str, Any]) -> str:
    """The world a call names, for the log: a valid world name or "" (never the path)."""
    if tool == "mark_lookup_all":
        return "*"
    url = arguments.get("url")
    if not isinstance(url, str) or not url.lower().startswith("mark://"):
        return ""
    world = url[len("mark://") :].split("/", 1)[0].split("#", 1)[0].lower()
    return world if WORLD_NAME.fullmatch(world) else ""


def _is_error(result: object) -> bool:
    if isinstance(result, Mapping):
        return bool(result.get("isError"))
    return bool(getattr(result, "is_error", False))


# --- HTTP -------------------------------------------------------------------------------

_CHALLENGES = {
    "missing": ("", "this endpoint needs the header Authorization: Bearer <token>"),
    "unknown": (
        "invalid_token",
        "the bearer token is not known here; check that it was copied whole, or ask the operator for one",
    ),
    "expired": ("invalid_token", "the bearer token has expired; ask the operator for a new one"),
}


def unauthorized(reason: str) -> JSONResponse:
    """401 with an RFC 6750 challenge; no error code when no credentials were sent."""
    code, message = _CHALLENGES[reason]
    challenge = f'Bearer realm="{REALM}"'
    if code:
        challenge += f', error="{code}", error_description="{message}"'
    return JSONResponse(
        {"error": code or "unauthorized", "error_description": message},
        status_code=401,
        headers={"WWW-Authenticate": challenge},
    )


REWRITTEN_REJECTIONS = {
    PARSE_ERROR: "the request body is not JSON; send one JSON-RPC 2.0 request object",
    INVALID_PARAMS: (
        'the request is not a JSON-RPC 2.0 message: send one object such as {"jsonrpc": "2.0", '
        '"id": 1, "method": "tools/call", "params": {"name": "mark_worlds", "arguments": {}}}, '
        "params being an object"
    ),
}
"""What the SDK's transport answers, with HTTP 400, to a body it cannot parse or validate:
its own text quotes the parser (pydantic's class names and URL), so the caller gets this."""
REJECTION_BUFFER = 64 << 10
"""Bytes of a 400 answer held to rewrite it. The SDK's answers are a few KiB at most; a
longer one is passed on as it is rather than held."""


def plain_rejections(send: Send, rejected: Callable[[], None]) -> Send:
    """Wrap `send` so that the SDK's 400 answers to an unreadable body say what to send
    instead (`REWRITTEN_REJECTIONS`); `rejected()` is called for each one rewritten."""
    start: Message | None = None
    chunks: list[bytes] = []

    async def wrapped(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start" and message["status"] == 400:
            start = message
            return
        if start is None or message["type"] != "http.response.body":
            await send(message)
            return
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
        if more and sum(len(chunk) for chunk in chunks) <= REJECTION_BUFFER:
            return
        body = b"".join(chunks)
        rewritten = None if more else _rewritten(body)
        headers = list(start.get("headers", []))
        if rewritten is not None:
            rejected()
            body = rewritten
            headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode("ascii")))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": more})
        start = None
        chunks.clear()

    return wrapped


def _rewritten(body: bytes) -> bytes | None:
    """The plain answer for a JSON-RPC error the SDK sent about an unreadable body, else None."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    error = answer.get("error") if isinstance(answer, dict) and answer.get("id") is None else None
    code = error.get("code") if isinstance(error, dict) else None
    message = REWRITTEN_REJECTIONS.get(code) if isinstance(code, int) else None
    if message is None:
        return None
    plain = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return json.dumps(plain).encode()


class BearerAuth:
    """Authenticate every request to the MCP endpoint; the caller rides a context variable
    into the tool handlers (the SDK runs them in the request's context)."""

    def __init__(self, sessions: SessionLimit, gateway: Gateway) -> None:
        self.sessions = sessions
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.sessions.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        caller, reason = self.gateway.authenticate(headers.get("authorization"))
        method = scope.get("method", "")
        if caller is None:
            self.gateway.log_refusal(401, reason, method)
            await unauthorized(reason)(scope, receive, send)
            return
        # The SDK binds each session to the principal that opened it: another caller's
        # token cannot ride a session id it learned.
        scope["user"] = AuthenticatedUser(AccessToken(token=caller.hash, client_id=caller.name, scopes=[]))
        token = _current.set(CallContext(caller, headers.get("mcp-session-id")))
        name = caller.name
        log = self.gateway.log_refusal
        try:
            await self.sessions.serve(
                name,
                scope,
                receive,
                plain_rejections(send, lambda: log(400, "bad-request", method, name)),
                lambda why: log(429, why, method, name),
            )
        finally:
            _current.reset(token)


class McpPath:
    """Serve `/mcp` like `/mcp/` instead of redirecting (a redirect can drop a POST body)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") == "/mcp":
            scope = dict(scope, path="/mcp/", raw_path=b"/mcp/")
        await self.app(scope, receive, send)


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
    # Every session is reserved per caller first (SessionLimit), so the SDK's own cap is the
    # sum of the callers' bounds and never refuses anyone.
    mcp_app = server.streamable_http_app(
        streamable_http_path="/",
        json_response=True,
        host=host,
        session_idle_timeout=config.session_idle_timeout,
        max_sessions=config.max_sessions_per_caller * max(1, len(config.callers)),
    )
    sessions = SessionLimit(mcp_app, gateway.sessions, server.session_manager)

    async def healthz(request: Request) -> JSONResponse:
        caller, _ = gateway.authenticate(request.headers.get("authorization"))
        return JSONResponse(gateway.health(caller))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Required: a mounted app's own lifespan does not run.
        async with server.session_manager.run():
            try:
                yield
            finally:
                await gateway.close()

    app = Starlette(
        routes=[Route("/healthz", healthz, methods=["GET"]), Mount("/mcp", app=BearerAuth(sessions, gateway))],
        middleware=[Middleware(McpPath)],
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    app.state.mcp = server
    app.state.sessions = sessions
    return app
