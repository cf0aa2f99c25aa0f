"""Limits and failures: the per-caller rate limit, the bound on upstream requests in
flight, a world whose authority dies and comes back, and lookup_all's partial failures."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from demarkus import auth
from demarkus.backend import VerbMethods
from demarkus.errors import RateLimitedError, TransportError
from demarkus.gateway import create_app
from demarkus.gateway.upstream import Breaker, Gate, Upstream
from demarkus.protocol import Request, Response, Verb
from demarkus.server.quic import serve_mark
from demarkus.service import Service

from ..conftest import call
from .conftest import make_config, serving, session

TOKEN = auth.generate_token()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Held(VerbMethods):
    """A backend whose requests wait until released; `entered` is set by the first one."""

    def __init__(self, inner: Service) -> None:
        self.inner = inner
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def request(self, request: Request) -> Response:
        self.entered.set()
        await asyncio.wait_for(self.release.wait(), 10)
        return await self.inner.request(request)


class Down(VerbMethods):
    """An authority that never answers."""

    def __init__(self) -> None:
        self.calls = 0

    async def request(self, request: Request) -> Response:
        self.calls += 1
        raise TransportError("mark://10.0.0.7:7000 did not answer FETCH /a.md after 2 tries (timeout)")


# --- rate limit ----------------------------------------------------------------------------


async def test_a_caller_over_its_rate_gets_a_tool_error_until_the_bucket_refills(demo_root: Path):
    clock = FakeClock()
    config = make_config(
        {"demo": {"root": demo_root}},
        {
            "agent": {"token": TOKEN, "read": ["demo"], "rate_per_minute": 2},
            "other": {"token": "other-token", "read": ["demo"]},
        },
    )
    async with serving(create_app(config, clock=clock)) as app:
        async with session(app, TOKEN) as agent, session(app, "other-token") as other:
            first = await call(agent, "mark_worlds")
            second = await call(agent, "mark_worlds")
            third = await call(agent, "mark_worlds")
            unaffected = await call(other, "mark_worlds")
            clock.now += 30.0  # half a minute refills one call
            fourth = await call(agent, "mark_worlds")
            fifth = await call(agent, "mark_worlds")
    assert not first[1] and not second[1] and not unaffected[1] and not fourth[1]
    assert third[1] and third[0].endswith(
        "rate limit: 2 tool calls a minute for this caller; the next call is allowed in 30.0 s"
    )
    assert fifth[1] and "rate limit" in fifth[0]


# --- the bound on upstream requests in flight ------------------------------------------------


async def test_requests_over_the_upstream_bound_get_a_clear_tool_error(demo_root: Path):
    held = Held(Service.open(demo_root, writable=False))
    config = make_config(
        {"demo": {"root": demo_root}}, {"agent": {"token": TOKEN, "read": ["demo"]}}, max_upstream=1, upstream_wait=0
    )
    async with serving(create_app(config, backends={"demo": held})) as app:
        async with session(app, TOKEN) as agent:
            first = asyncio.create_task(call(agent, "mark_fetch", url="mark://demo/overview.md"))
            await asyncio.wait_for(held.entered.wait(), 10)
            busy = await call(agent, "mark_fetch", url="mark://demo/overview.md")
            held.release.set()
            done = await asyncio.wait_for(first, 10)
            after = await call(agent, "mark_list", url="mark://demo/")
    assert busy[1]
    assert "the gateway is busy: all 1 upstream slots" in busy[0] and "retry in a few seconds" in busy[0]
    assert not done[1] and done[0].startswith("status: ok")
    assert not after[1]


async def test_the_gate_waits_for_a_slot_up_to_its_bound_and_caps_each_world():
    gate = Gate(limit=2, per_world=1, wait=0.05)
    async with gate.slot("a"):
        with pytest.raises(RateLimitedError, match="all 1 upstream slots for world a stayed taken for 0.05 s"):
            async with gate.slot("a"):
                pass
        async with gate.slot("b"):  # another world still gets its slot
            assert gate.in_flight == 2
    assert gate.in_flight == 0 and gate.peak == 2


async def test_the_gate_bounds_the_whole_wait_for_a_slot_not_each_semaphore():
    gate = Gate(limit=2, per_world=1, wait=1.0)
    loop = asyncio.get_running_loop()
    taken = asyncio.Semaphore(0)

    async def hold(world: str, seconds: float) -> None:
        async with gate.slot(world):
            taken.release()
            await asyncio.sleep(seconds)

    holders = [asyncio.create_task(hold("a", 0.8)), asyncio.create_task(hold("b", 2.0))]
    for _ in holders:
        await taken.acquire()
    holders.append(asyncio.create_task(hold("c", 2.0)))  # first in line for the overall slot a frees
    await asyncio.sleep(0.05)
    started = loop.time()
    with pytest.raises(RateLimitedError, match="all 2 upstream slots stayed taken for 1 s"):
        async with gate.slot("a"):  # world a's slot comes at 0.8 s, an overall one never: refused at 1.0 s, not 1.8 s
            pass
    waited = loop.time() - started
    await asyncio.gather(*holders)
    assert 0.9 <= waited < 1.6


def test_the_gateway_asks_for_a_wide_receive_buffer_on_its_quic_connections(tls_files):
    from demarkus.client import Client
    from demarkus.gateway.upstream import RECEIVE_BUFFER

    config = make_config(
        {"remote": {"authority": "mark://localhost:7000", "ca": tls_files[0], "dial": "127.0.0.1"}},
        {"agent": {"token": TOKEN, "read": ["remote"]}},
    )
    backend = create_app(config).state.gateway.upstreams["remote"].backend
    assert isinstance(backend, Client) and backend.receive_buffer == RECEIVE_BUFFER


# --- a dead world ------------------------------------------------------------------------------


async def test_a_breaker_fails_fast_while_a_world_is_down_and_probes_once_after_its_cooldown():
    clock = FakeClock()
    down = Down()
    upstream = Upstream("w", down, Gate(4, 4, 0), Breaker("w", cooldown=1.0, clock=clock))
    request = Request(Verb.FETCH, "/a.md")
    with pytest.raises(TransportError) as first:
        await upstream.request(request)
    assert str(first.value) == (
        "world w did not answer FETCH /a.md: its authority is unreachable or too slow. "
        "The gateway keeps trying it: retry in a few seconds. Other worlds are not affected."
    )
    assert "10.0.0.7" not in str(first.value)  # the authority's internal address stays inside
    with pytest.raises(TransportError, match="world w is not answering"):
        await upstream.request(request)
    assert down.calls == 1
    clock.now += 1.0
    with pytest.raises(TransportError, match="did not answer"):  # the probe goes through
        await upstream.request(request)
    assert down.calls == 2


class Hanging(VerbMethods):
    """The first request fails when `fail` is set; the others hang until abandoned."""

    def __init__(self) -> None:
        self.entered = 0
        self.all_in = asyncio.Event()
        self.fail = asyncio.Event()

    async def request(self, request: Request) -> Response:
        self.entered += 1
        first = self.entered == 1
        if self.entered == 3:
            self.all_in.set()
        if first:
            await asyncio.wait_for(self.fail.wait(), 10)
            raise TransportError("connection lost")
        await asyncio.wait_for(asyncio.Event().wait(), 30)
        raise AssertionError("not abandoned")


async def test_reads_in_flight_are_abandoned_when_their_world_goes_down():
    hanging = Hanging()
    upstream = Upstream("w", hanging, Gate(8, 8, 0), Breaker("w"), deadline=30)
    reads = [asyncio.create_task(upstream.request(Request(Verb.FETCH, f"/{i}.md"))) for i in range(3)]
    await asyncio.wait_for(hanging.all_in.wait(), 10)
    hanging.fail.set()
    outcomes = await asyncio.wait_for(asyncio.gather(*reads, return_exceptions=True), 5)
    assert [type(o) for o in outcomes] == [TransportError] * 3
    assert all(str(o).startswith(f"world w did not answer FETCH /{i}.md") for i, o in enumerate(outcomes))


def test_one_lost_answer_among_good_ones_does_not_open_the_breaker():
    clock = FakeClock()
    breaker = Breaker("w", cooldown=1.0, clock=clock)
    sent = clock()
    clock.now += 3.0
    breaker.success()  # another request answered while the slow one was waiting
    breaker.failure(sent)
    assert not breaker.open and breaker.admit() is False
    breaker.failure(clock())  # nothing answered since this one was sent: the world is down
    assert breaker.open


async def test_a_killed_authority_fails_clearly_other_worlds_go_on_and_it_recovers(
    demo_root: Path, tls_files, tmp_path: Path
):
    cert, key = tls_files
    clock = FakeClock()
    async with serve_mark(Service.open(demo_root), port=0, cert=cert, key=key) as first:
        port = first.port
        config = make_config(
            {
                "remote": {"authority": f"mark://localhost:{port}", "ca": cert, "dial": "127.0.0.1"},
                "local": {"root": demo_root},
            },
            {"agent": {"token": TOKEN, "read": ["remote", "local"]}},
            upstream_timeout=0.5,
        )
        app = create_app(config, clock=clock)
        async with serving(app), session(app, TOKEN) as agent:
            before = await call(agent, "mark_fetch", url="mark://remote/overview.md")
            await first.close()
            dead = await asyncio.wait_for(call(agent, "mark_fetch", url="mark://remote/overview.md", force=True), 20)
            fast = await asyncio.wait_for(call(agent, "mark_lookup", query="snapshot", url="mark://remote/"), 5)
            alive = await call(agent, "mark_fetch", url="mark://local/overview.md")
            partial = await asyncio.wait_for(call(agent, "mark_lookup_all", query="snapshot", limit=3), 5)
            async with serve_mark(Service.open(demo_root), port=port, cert=cert, key=key):
                clock.now += 5.0
                back = await asyncio.wait_for(
                    call(agent, "mark_fetch", url="mark://remote/overview.md", force=True), 20
                )
    assert not before[1] and before[0].startswith("status: ok")
    assert dead[1] and "world remote did not answer FETCH /overview.md" in dead[0]
    assert fast[1] and "world remote is not answering" in fast[0]
    assert not alive[1] and alive[0].startswith("status: ok")
    assert not partial[1]
    assert "worlds: 2\nsucceeded: 1\nfailed: 1\n" in partial[0]
    assert "- remote: world remote is not answering" in partial[0] and "| mark://local/" in partial[0]
    assert not back[1] and back[0].startswith("status: ok")


# --- lookup_all -----------------------------------------------------------------------------


async def test_lookup_all_fails_as_a_tool_error_only_when_every_world_fails(demo_root: Path):
    config = make_config(
        {"a": {"root": demo_root}, "b": {"root": demo_root}}, {"agent": {"token": TOKEN, "read": ["a", "b"]}}
    )
    async with serving(create_app(config, backends={"a": Down(), "b": Down()})) as app:
        async with session(app, TOKEN) as agent:
            text, is_error = await call(agent, "mark_lookup_all", query="snapshot")
    assert is_error
    assert "every world failed: a: world a did not answer LOOKUP /" in text and "b: world b did not answer" in text


async def test_lookup_all_merges_by_rank_then_importance_then_world_under_a_global_limit(demo_root: Path):
    config = make_config(
        {"one": {"root": demo_root}, "two": {"root": demo_root}}, {"agent": {"token": TOKEN, "read": ["one", "two"]}}
    )
    async with serving(create_app(config)) as app:
        async with session(app, TOKEN) as agent:
            single, _ = await call(agent, "mark_lookup", query="snapshot", url="mark://one/", match="body", limit=3)
            merged, err = await call(agent, "mark_lookup_all", query="snapshot", match="body", limit=5)
    assert not err
    rows = [line.split(" | ")[0][2:] for line in single.splitlines() if line.startswith("| mark://")]
    merged_rows = [line.split(" | ")[0][2:] for line in merged.splitlines() if line.startswith("| mark://")]
    # the same store twice: each rank appears once per world, world `one` first within a rank
    expected = [row.replace("mark://one/", f"mark://{w}/") for row in rows for w in ("one", "two")][:5]
    assert merged_rows == expected
    assert len(rows) == 3
    assert merged.startswith("status: ok\nworlds: 2\nsucceeded: 2\nfailed: 0\nmatches: 5\nmatch: body\n")
    assert '# Lookup matches for "snapshot" in / across one, two' in merged


def test_merge_order_is_rank_then_importance_then_world_then_path():
    from demarkus.expand.table import Table, TableRow
    from demarkus.gateway.tools import merge_rows
    from demarkus.render import render_lookup

    empty = Table.parse(render_lookup("q", "/", [], body_match=False))
    assert empty is not None
    a = replace(empty, rows=(TableRow("/x.md", "", ("0.50", "X", "t")), TableRow("/y.md", "", ("0.90", "Y", "t"))))
    b = replace(empty, rows=(TableRow("/z.md", "", ("0.70", "Z", "t")), TableRow("/w.md", "", ("0.90", "W", "t"))))
    merged = merge_rows({"a": a, "b": b}, 3, 3)
    assert [row.location for row in merged] == ["mark://b/z.md", "mark://a/x.md", "mark://a/y.md"]
    padded = merge_rows({"a": a}, 1, 4)
    assert padded[0].cells == ("0.50", "X", "t", "")
