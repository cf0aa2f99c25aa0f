"""MCP sessions through a real uvicorn: bounded per caller (one more closes the caller's
least recently used idle session, and really ends it in the SDK), refused with 429 when
every one is busy, ended after being idle, and never a reason for another caller's session
to fail. A 2026-07-28 client, which has no session, is not affected."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import weakref
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from demarkus import auth
from demarkus.backend import VerbMethods
from demarkus.errors import RateLimitedError
from demarkus.gateway import create_app
from demarkus.gateway.config import SESSIONS_PER_CALLER
from demarkus.gateway.sessions import SessionTable
from demarkus.protocol import Request, Response
from demarkus.service import Service

from ..conftest import call
from .conftest import RawSession, make_config, until, uvicorn_on_loopback

FLOOD, OTHER = auth.generate_token(), auth.generate_token()


def two_callers(demo_root: Path, **gateway: object):  # type: ignore[no-untyped-def]
    return make_config(
        {"demo": {"root": demo_root}},
        {"flood": {"token": FLOOD, "read": ["demo"]}, "other": {"token": OTHER, "read": ["demo"]}},
        **gateway,
    )


def caller_http(token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)


class Held(VerbMethods):
    """A store whose requests wait until released; `entered` counts the waiting ones."""

    def __init__(self, inner: Service) -> None:
        self.inner = inner
        self.entered = 0
        self.release = asyncio.Event()

    async def request(self, request: Request) -> Response:
        self.entered += 1
        await asyncio.wait_for(self.release.wait(), 20)
        return await self.inner.request(request)


async def test_a_caller_opening_far_more_sessions_than_its_bound_cannot_lock_out_another(demo_root: Path):
    app = create_app(two_callers(demo_root))
    sdk = app.state.mcp.session_manager._server_instances  # the SDK's live sessions, by id
    async with uvicorn_on_loopback(app) as base, caller_http(FLOOD) as flood_http:
        url = f"{base}/mcp/"
        flood = [RawSession(flood_http, url) for _ in range(3 * SESSIONS_PER_CALLER)]
        opened = [await session.open() for session in flood]  # none closed with DELETE
        peak = len(sdk)
        async with caller_http(OTHER) as other_http:
            transport = streamable_http_client(url, http_client=other_http)  # type: ignore[arg-type]
            async with Client(transport, mode="legacy") as other:
                worlds, err = await call(other, "mark_worlds")
                during = len(sdk)
        newest = await flood[-1].request("tools/list")
        oldest = await flood[0].request("tools/list")
        tracked = app.state.gateway.sessions.count("flood")
    assert [answer.status_code for answer in opened] == [200] * len(flood)
    assert peak == SESSIONS_PER_CALLER  # the SDK itself holds no more than the bound
    assert during == SESSIONS_PER_CALLER + 1
    assert not err and "| demo | mark://demo/ | no |" in worlds
    assert tracked == SESSIONS_PER_CALLER
    assert newest.status_code == 200
    assert oldest.status_code == 404  # closed to make room: a client initializes again


async def test_a_closed_session_gives_its_sdk_state_and_tool_state_back(demo_root: Path):
    app = create_app(two_callers(demo_root, max_sessions_per_caller=2))
    sdk = app.state.mcp.session_manager._server_instances
    async with uvicorn_on_loopback(app) as base, caller_http(FLOOD) as http:
        first, second, third = (RawSession(http, f"{base}/mcp/") for _ in range(3))
        await first.open()
        fetched = await first.call("mark_fetch", url="mark://demo/overview.md")
        tools = weakref.ref(app.state.gateway.sessions.use("flood", first.id).tools)
        transport = weakref.ref(sdk[first.id])
        await second.open()
        await second.request("tools/list")  # now `first` is the least recently used
        await third.open()
        live = set(sdk)
        # Its transport is garbage once the SDK's task serving the session has ended.
        await until(lambda: gc.collect() >= 0 and transport() is None)
        again = await first.call("mark_fetch", url="mark://demo/overview.md")
        deleted = await third.close()
        left = app.state.gateway.sessions.count("flood"), set(sdk)
    assert fetched.status_code == 200
    assert live == {second.id, third.id}
    assert tools() is None  # its GatewayTools (what it already returned in full) was dropped
    assert again.status_code == 404
    assert deleted.status_code == 200 and left == (1, {second.id})  # DELETE ends it in both


async def test_when_every_session_of_a_caller_is_busy_a_new_one_gets_429_and_others_are_unaffected(
    demo_root: Path, caplog
):
    # Closed after: only one process may write a store, and later tests start gateway
    # processes on it.
    with contextlib.closing(Service.open(demo_root)) as store:
        held = Held(store)
        app = create_app(two_callers(demo_root, max_sessions_per_caller=2), backends={"demo": held})
        caplog.set_level(logging.INFO, logger="demarkus.gateway.access")
        async with uvicorn_on_loopback(app) as base, caller_http(FLOOD) as http, caller_http(OTHER) as other_http:
            url = f"{base}/mcp/"
            busy = [RawSession(http, url), RawSession(http, url)]
            for session in busy:
                await session.open()
            calls = [asyncio.create_task(s.call("mark_fetch", url="mark://demo/overview.md")) for s in busy]
            await until(lambda: held.entered == 2)
            refused = await RawSession(http, url).open()
            other = await RawSession(other_http, url).open()
            held.release.set()
            answered = await asyncio.gather(*calls)
            later = await RawSession(http, url).open()  # both idle again: the oldest makes room
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    message = refused.json()["error"]["message"]
    assert message.startswith("all 2 MCP sessions this caller may hold are busy, so no new one can open;")
    assert "reuse one of yours (send its Mcp-Session-Id header)" in message
    assert "HTTP DELETE" in message
    assert other.status_code == 200
    assert [answer.status_code for answer in answered] == [200, 200]
    assert later.status_code == 200
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "demarkus.gateway.access"]
    refusals = [{k: v for k, v in line.items() if k != "ts"} for line in lines if line["event"] == "http"]
    assert refusals == [{"event": "http", "status": 429, "reason": "sessions", "method": "POST", "caller": "flood"}]


async def test_an_idle_session_expires_and_gives_its_memory_back(demo_root: Path):
    app = create_app(two_callers(demo_root, session_idle_timeout=0.2))
    sdk = app.state.mcp.session_manager._server_instances
    async with uvicorn_on_loopback(app) as base, caller_http(FLOOD) as http:
        idle = RawSession(http, f"{base}/mcp/")
        await idle.open()
        await idle.call("mark_worlds")
        tools = weakref.ref(app.state.gateway.sessions.use("flood", idle.id).tools)
        await until(lambda: idle.id not in sdk)
        expired = await idle.request("tools/list")
        fresh = RawSession(http, f"{base}/mcp/")
        reopened = await fresh.open()
        tracked = app.state.gateway.sessions.count("flood")
        gc.collect()
    assert expired.status_code == 404
    assert reopened.status_code == 200
    assert tracked == 1  # the expired one left the table too
    assert tools() is None


async def test_a_2026_client_without_a_session_works_while_its_caller_is_at_its_bound(demo_root: Path):
    app = create_app(two_callers(demo_root, max_sessions_per_caller=2))
    sdk = app.state.mcp.session_manager._server_instances
    async with uvicorn_on_loopback(app) as base, caller_http(FLOOD) as http:
        url = f"{base}/mcp/"
        held = [RawSession(http, url), RawSession(http, url)]
        for session in held:
            await session.open()
        before = set(sdk)
        transport = streamable_http_client(url, http_client=http)  # type: ignore[arg-type]
        async with Client(transport, mode="auto") as modern:
            worlds, err = await call(modern, "mark_worlds")
            fetched, fetch_err = await call(modern, "mark_fetch", url="mark://demo/overview.md")
        after = set(sdk)
        still = [await session.request("tools/list") for session in held]
    assert not err and "| demo | mark://demo/ | no |" in worlds
    assert not fetch_err and fetched.startswith("status: ok")
    assert before == after == {session.id for session in held}  # it opened none and closed none
    assert [answer.status_code for answer in still] == [200, 200]


def test_the_table_replaces_the_least_recently_used_idle_session_and_forgets_ended_ones():
    table = SessionTable(per_caller=3)
    alive = {"a", "b", "c"}
    for sid in ("a", "b", "c"):
        assert table.reserve("x", alive.__contains__) is None
        table.opened("x", sid)
    table.use("x", "a")  # least recently used first: b, c, a
    table.use("x", "b").in_flight = 1  # type: ignore[union-attr]
    assert table.reserve("x", alive.__contains__) == "c"  # b is busy: the next least recent goes
    table.opened("x", "d")
    alive |= {"d"}
    assert table.reserve("y", alive.__contains__) is None  # another caller has its own bound
    alive.discard("a")  # the SDK ended it (idle)
    assert table.reserve("x", alive.__contains__) is None  # a is forgotten: room without closing
    assert table.count("x") == 2  # b, d, and one being opened
    table.use("x", "d").in_flight = 1  # type: ignore[union-attr]
    with pytest.raises(RateLimitedError, match="all 3 MCP sessions this caller may hold are busy"):
        table.reserve("x", alive.__contains__)  # b and d busy, one still opening
    table.abandoned("x")
    assert table.reserve("x", alive.__contains__) is None
