"""Shared fixtures: stores, token files, a development certificate, real QUIC servers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from demarkus import auth
from demarkus.client import Client
from demarkus.server.quic import MarkServer, serve_mark
from demarkus.service import Service
from demarkus.tls import ensure_dev_certificate


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
