"""/healthz through a real uvicorn, with three worlds: an embedded store, a live QUIC
authority and an authority port where nothing listens. It reports what the breakers learnt
from real requests: counts for anyone, a caller's own worlds by name with its token."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from demarkus import auth
from demarkus.gateway import create_app
from demarkus.server.quic import serve_mark
from demarkus.service import Service

from ..conftest import call
from .conftest import make_config, uvicorn_on_loopback

AGENT, NARROW = auth.generate_token(), auth.generate_token()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def unused_udp_port() -> int:
    """A loopback UDP port nothing listens on (bound once by the OS, then let go)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_healthz_shows_a_world_down_after_it_fails_and_up_once_it_answers(demo_root: Path, tls_files):
    cert, key = tls_files
    dead_port = unused_udp_port()
    clock = FakeClock()
    async with contextlib.AsyncExitStack() as stack:
        # The authorities' stores are closed after: only one process may write a store, and
        # later tests start gateway processes on this one.
        live_store = stack.enter_context(contextlib.closing(Service.open(demo_root)))
        revived_store = stack.enter_context(contextlib.closing(Service.open(demo_root)))
        live = await stack.enter_async_context(serve_mark(live_store, port=0, cert=cert, key=key))
        at = {"ca": cert, "dial": "127.0.0.1"}
        config = make_config(
            {
                "demo": {"root": demo_root},
                "live": {"authority": f"mark://localhost:{live.port}", **at},
                "dead": {"authority": f"mark://localhost:{dead_port}", **at},
            },
            {
                "agent": {"token": AGENT, "read": ["demo", "live", "dead"]},
                "narrow": {"token": NARROW, "read": ["demo"]},
            },
            upstream_timeout=0.5,
        )
        base = await stack.enter_async_context(uvicorn_on_loopback(create_app(config, clock=clock)))
        health = f"{base}/healthz"
        anonymous = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
        agent_http = await stack.enter_async_context(
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {AGENT}"}, timeout=30)
        )
        transport = streamable_http_client(f"{base}/mcp/", http_client=agent_http)  # type: ignore[arg-type]
        agent = await stack.enter_async_context(Client(transport))

        fresh = await anonymous.get(health)
        fetched, fetch_err = await call(agent, "mark_fetch", url="mark://live/overview.md")
        failed, fail_err = await call(agent, "mark_fetch", url="mark://dead/overview.md")
        degraded = await anonymous.get(health)
        mine = await agent_http.get(health)
        narrow = await anonymous.get(health, headers={"Authorization": f"Bearer {NARROW}"})
        wrong = await anonymous.get(health, headers={"Authorization": "Bearer not-a-token"})
        async with serve_mark(revived_store, port=dead_port, cert=cert, key=key):
            clock.now += 5.0  # past the breaker's cooldown: the next call probes the world
            back, back_err = await call(agent, "mark_fetch", url="mark://dead/overview.md", force=True)
            recovered = await agent_http.get(health)
    assert not fetch_err and fetched.startswith("status: ok")
    assert fail_err and "world dead did not answer FETCH /overview.md" in failed
    assert not back_err and back.startswith("status: ok")
    assert fresh.status_code == 200
    # the embedded store is up from the start; the authorities are unknown until asked
    assert fresh.json() == {"status": "ok", "worlds": {"up": 1, "down": 0, "unknown": 2}}
    assert degraded.status_code == 200  # the gateway itself serves: a load balancer keeps it
    assert degraded.json() == {"status": "degraded", "worlds": {"up": 2, "down": 1, "unknown": 0}}
    assert not [name for name in ("demo", "live", "dead") if name in degraded.text]  # no names
    assert mine.json() == {
        "status": "degraded",
        "worlds": {"up": 2, "down": 1, "unknown": 0},
        "yours": {"dead": "down", "demo": "up", "live": "up"},
    }
    assert narrow.json()["yours"] == {"demo": "up"}  # only the caller's own worlds
    assert wrong.status_code == 200 and wrong.json() == degraded.json()
    assert recovered.json() == {
        "status": "ok",
        "worlds": {"up": 3, "down": 0, "unknown": 0},
        "yours": {"dead": "up", "demo": "up", "live": "up"},
    }
