"""Gateway fixtures: configurations written as TOML, MCP sessions through the ASGI app
(httpx2's ASGITransport, no sockets) or through a real uvicorn on loopback, raw JSON-RPC
requests for what an SDK client would never send."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette

from demarkus import auth
from demarkus.gateway import GatewayConfig

BASE = "http://127.0.0.1:8787"
"""The SDK checks Host on loopback: in-process requests use a loopback host with a port."""
HANDSHAKE = "2025-11-25"
"""The protocol version of a handshake-era client (one that opens a session)."""
ACCEPT = {"Accept": "application/json, text/event-stream"}


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str | Path):
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(value)


def config_text(
    worlds: Mapping[str, Mapping[str, object]], callers: Mapping[str, Mapping[str, object]], **gateway: object
) -> str:
    """A gateway configuration file; callers name their raw token as `token` (hashed here)."""
    out = ["[gateway]"] + [f"{k} = {toml_value(v)}" for k, v in gateway.items()]
    for name, world in worlds.items():
        out.append(f"[worlds.{name}]")
        out += [f"{k} = {toml_value(v)}" for k, v in world.items()]
    for name, caller in callers.items():
        out.append(f"[callers.{name}]")
        upstream: Mapping[str, str] = {}
        for key, value in caller.items():
            if key == "token":
                out.append(f"hash = {toml_value(auth.hash_token(str(value)))}")
            elif key == "upstream":
                upstream = value  # type: ignore[assignment]
            else:
                out.append(f"{key} = {toml_value(value)}")
        if upstream:
            out.append(f"[callers.{name}.upstream]")
            out += [f"{toml_value(w)} = {toml_value(t)}" for w, t in upstream.items()]
    return "\n".join(out) + "\n"


def make_config(
    worlds: Mapping[str, Mapping[str, object]], callers: Mapping[str, Mapping[str, object]], **gateway: object
) -> GatewayConfig:
    return GatewayConfig.parse(config_text(worlds, callers, **gateway), source="test.toml")


@contextlib.asynccontextmanager
async def serving(app: Starlette) -> AsyncIterator[Starlette]:
    """Run the app's lifespan (ASGITransport does not)."""
    async with app.router.lifespan_context(app):
        yield app


@contextlib.asynccontextmanager
async def session(app: Starlette, token: str | None, *, mode: str = "auto") -> AsyncIterator[Client]:
    """An MCP client session through the ASGI app, presenting `token` as a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE, headers=headers, timeout=30)
    async with http:
        async with Client(streamable_http_client(f"{BASE}/mcp/", http_client=http), mode=mode) as client:  # type: ignore[arg-type]
            yield client


def fresh_copy(root: Path, into: Path) -> Path:
    """A copy of a store without any relation graph a local server left in it."""
    copy = into / root.name
    shutil.copytree(root, copy, symlinks=True)
    for leftover in (copy / ".demarkus").glob("graph.sqlite*"):
        leftover.unlink()
    return copy


@contextlib.asynccontextmanager
async def uvicorn_on_loopback(app: Starlette) -> AsyncIterator[str]:
    """Serve `app` on 127.0.0.1 from a socket already listening, so requests queue until
    uvicorn accepts them: nothing to wait for."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)
        sock.close()


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until `condition()` holds, looking every 10 ms, for at most `timeout` seconds."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


class RawSession:
    """One MCP session driven by hand-written JSON-RPC over HTTP (`http` carries the token)."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http = http
        self.url = url
        self.id = ""
        self._next = 0

    async def open(self) -> httpx2.Response:
        """initialize (and, when it succeeds, notifications/initialized)."""
        opened = await self.http.post(
            self.url,
            headers=ACCEPT,
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": HANDSHAKE,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            },
        )
        if opened.status_code == 200:
            self.id = opened.headers["mcp-session-id"]
            done = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert done.status_code == 202, done.text
        return opened

    @property
    def headers(self) -> dict[str, str]:
        return {**ACCEPT, "mcp-session-id": self.id, "mcp-protocol-version": HANDSHAKE}

    async def post(self, body: Any) -> httpx2.Response:
        return await self.http.post(self.url, headers=self.headers, json=body)

    async def request(self, method: str, params: Any = None) -> httpx2.Response:
        self._next += 1
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next, "method": method}
        if params is not None:
            body["params"] = params
        return await self.post(body)

    async def call(self, tool: str, **arguments: object) -> httpx2.Response:
        return await self.request("tools/call", {"name": tool, "arguments": arguments})

    async def close(self) -> httpx2.Response:
        return await self.http.delete(self.url, headers=self.headers)
