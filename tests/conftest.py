"""Shared fixtures: stores, token files, a development certificate, real QUIC servers."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client as MCPClient

from demarkus import auth
from demarkus.client import Client
from demarkus.graph import GraphStore
from demarkus.mcp.server import LocalResolver, build_server
from demarkus.mcp.tools import Tools
from demarkus.protocol import Request, Response, Verb
from demarkus.server.quic import MarkServer, serve_mark
from demarkus.service import Service
from demarkus.tls import ensure_dev_certificate
from demarkus.worlds import demo_world_path, open_world
from demarkus.worlds.loader import load_world


@dataclass(frozen=True)
class Tokens:
    file: Path
    writer: str
    """publish on everything."""
    reader: str
    """read on /private/**."""
    docs_writer: str
    """publish on /docs/** only."""


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing a test does touches the real ~/.mark."""
    monkeypatch.setenv("DEMARKUS_HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return ensure_dev_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tokens(tmp_path: Path) -> Tokens:
    file = tmp_path / "tokens.toml"
    writer, reader, docs_writer = auth.generate_token(), auth.generate_token(), auth.generate_token()
    auth.add_grant(file, "writer", writer, ["/**"], ["publish"])
    auth.add_grant(file, "reader", reader, ["/private/**"], ["read"])
    auth.add_grant(file, "docs-writer", docs_writer, ["/docs/**"], ["publish"])
    return Tokens(file, writer, reader, docs_writer)


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    root.mkdir()
    return root


@pytest.fixture
def service(store_root: Path, tokens: Tokens) -> Service:
    return Service.open(store_root, tokens=tokens.file)


@pytest.fixture
async def server(service: Service, tls_files: tuple[Path, Path]) -> AsyncIterator[MarkServer]:
    cert, key = tls_files
    async with serve_mark(service, host="127.0.0.1", port=0, cert=cert, key=key) as running:
        yield running


@pytest.fixture
async def client(server: MarkServer, tls_files: tuple[Path, Path]) -> AsyncIterator[Client]:
    async with Client(f"mark://localhost:{server.port}", ca=tls_files[0], dial_host="127.0.0.1") as connected:
        yield connected


# --- the demo world, for tool texts ---------------------------------------------------

FIXED_MTIME = 1_790_000_000  # 2026-09-21T13:33:20Z
AUTHORITY = "mark://demo.world"


def pin_mtimes(root: Path) -> None:
    for dirpath, _, files in os.walk(root):
        for name in files:
            os.utime(Path(dirpath) / name, (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)


@pytest.fixture(scope="session")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo-store")
    service = Service.open(root, trusted=True)
    asyncio.run(load_world(open_world(demo_world_path()), service))
    service.close()  # gives the store back: tests start other processes on it
    pin_mtimes(root / "")
    return root


def make_server(root: Path, *, authority: str = AUTHORITY, scope: str = "/", trusted: bool = False):  # type: ignore[no-untyped-def]
    service = Service.open(root, trusted=trusted, writable=trusted)  # untrusted: no token file, no writes
    tools = Tools(LocalResolver(service, authority, GraphStore(None), scope=scope))
    return build_server(lambda: tools)


PEPS_WORLD = Path(__file__).resolve().parents[1].parent / "shared" / "worlds" / "peps"
"""The PEPs world, in the `shared` folder beside the checkout."""


@pytest.fixture(scope="session")
def peps_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PEPs world (736 documents, 2014 versions) in a store; about 20 s, once."""
    if not PEPS_WORLD.is_dir():
        pytest.skip(f"the PEPs world is not at {PEPS_WORLD}")
    root = tmp_path_factory.mktemp("peps-store")
    service = Service.open(root, trusted=True)
    try:
        with service.deferred_index():  # index once at the end, as `demarkus world load` does
            asyncio.run(load_world(open_world(PEPS_WORLD), service))
    finally:
        service.close()
    return root


@pytest.fixture
def demo_server(demo_root: Path):  # type: ignore[no-untyped-def]
    """A fresh server (fresh session state) over the shared demo store."""
    return make_server(demo_root)


async def call(client: MCPClient, tool: str, **arguments: object) -> tuple[str, bool]:
    result = await client.call_tool(tool, arguments)
    text = "".join(part.text for part in result.content if getattr(part, "text", None) is not None)
    return text, bool(result.is_error)


def count_fetches(service: Service) -> list[str]:
    """The paths of the FETCH requests `service` answers from now on, in order (the QUIC
    server and in-process callers alike go through `handle`)."""
    seen: list[str] = []
    handle = service.handle

    def counted(request: Request) -> Response:
        if request.verb == Verb.FETCH:
            seen.append(request.path)
        return handle(request)

    service.handle = counted  # type: ignore[method-assign]
    return seen
