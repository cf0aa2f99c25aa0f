"""The real QUIC server on 127.0.0.1: raw bad input, concurrency, TLS and shutdown."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aioquic.asyncio import connect

from demarkus.client import Client
from demarkus.errors import TransportError
from demarkus.protocol import MAX_BODY, parse_response
from demarkus.server.quic import MarkServer
from demarkus.store import FileStore
from demarkus.tls import client_configuration

from ..conftest import Tokens


async def raw_request(port: int, cert: Path, data: bytes) -> bytes:
    """Send exact bytes on one stream, the way a buggy or hostile client would."""
    config = client_configuration(ca=cert, server_name="localhost")
    async with connect("127.0.0.1", port, configuration=config) as protocol:
        reader, writer = await protocol.create_stream()
        writer.write(data)
        writer.write_eof()
        async with asyncio.timeout(10):
            return await reader.read()


@pytest.mark.parametrize(
    "data, status",
    [
        (b"GARBAGE", "bad-request"),
        (b"FETCH /a.md", "bad-request"),
        (b"STEAL /a.md\n", "bad-request"),
        (b"FETCH /" + b"x" * 5000 + b"\n", "bad-request"),
        (b"FETCH /\xc3\x28.md\n", "bad-request"),
        (b"FETCH /a\x07.md\n", "bad-request"),
        (b"FETCH /../etc/passwd\n", "not-found"),
        (b"PUBLISH /a.md\n---\nk: " + b"v" * 70000 + b"\n---\nbody", "bad-request"),
        (b"PUBLISH /a.md\n" + b"x" * (MAX_BODY + 10), "bad-request"),
        (b"PUBLISH /a.md\n---\nversion: '3'\n---\nbody", "unauthorized"),
        (b"", "bad-request"),
    ],
    ids=[
        "no-newline",
        "unterminated",
        "unknown-verb",
        "long-line",
        "bad-utf8",
        "control-char",
        "dotdot",
        "big-meta",
        "big-body",
        "reserved-unauth",
        "empty",
    ],
)
async def test_bad_raw_requests_get_a_status_and_the_server_keeps_serving(
    server: MarkServer, tls_files: tuple[Path, Path], data: bytes, status: str
):
    response = parse_response(await raw_request(server.port, tls_files[0], data))
    assert response.status == status
    assert response.body.startswith(b"\n# ")
    assert len(response.body.decode().strip().splitlines()) >= 3
    healthy = parse_response(await raw_request(server.port, tls_files[0], b"FETCH /health\n"))
    assert healthy.status == "ok"


async def test_reserved_metadata_with_a_token_is_a_bad_request(server: MarkServer, tls_files, tokens: Tokens):
    data = f"PUBLISH /a.md\n---\nauth: {tokens.writer}\nversion: '3'\n---\nbody".encode()
    response = parse_response(await raw_request(server.port, tls_files[0], data))
    assert response.status == "bad-request"
    assert b"reserved" in response.body


async def test_a_client_without_the_certificate_is_refused(server: MarkServer):
    async with Client(f"mark://localhost:{server.port}", dial_host="127.0.0.1", retries=1) as untrusting:
        with pytest.raises(TransportError):
            await untrusting.fetch("/health")


async def test_one_connection_carries_many_concurrent_streams(client: Client, tokens: Tokens):
    await client.publish("/c.md", "x" * 2048, token=tokens.writer)
    responses = await asyncio.gather(*(client.fetch("/c.md") for _ in range(64)))
    assert {r.status for r in responses} == {"ok"}
    assert all(len(r.body) == 2048 for r in responses)


async def test_a_one_mebibyte_document_round_trips(client: Client, tokens: Tokens):
    body = (b"0123456789abcdef" * (MAX_BODY // 16))[:MAX_BODY]
    assert (await client.publish("/big.md", body, token=tokens.writer)).status == "created"
    assert (await client.fetch("/big.md")).body == body


async def test_concurrent_publishers_with_expected_version_win_exactly_once_each(
    server: MarkServer, tls_files: tuple[Path, Path], tokens: Tokens, store_root: Path
):
    cert = tls_files[0]
    clients = [Client(f"mark://localhost:{server.port}", ca=cert, dial_host="127.0.0.1") for _ in range(6)]
    try:
        await clients[0].publish("/race.md", "start", token=tokens.writer)
        for round_ in range(1, 6):
            results = await asyncio.gather(
                *(
                    c.publish("/race.md", f"round {round_} by {i}", expected_version=round_, token=tokens.writer)
                    for i, c in enumerate(clients)
                )
            )
            statuses = sorted(r.status for r in results)
            assert statuses == ["conflict"] * 5 + ["created"]
            winner = next(r for r in results if r.status == "created")
            assert winner.metadata["version"] == str(round_ + 1)
    finally:
        for c in clients:
            await c.close()
    store = FileStore(store_root)
    assert store.current_version("/race.md") == 6
    assert store.verify("/race.md") is None


async def test_the_client_reconnects_after_the_server_restarts(service, tls_files: tuple[Path, Path]):
    cert, key = tls_files
    first = MarkServer(service, "127.0.0.1", 0, cert, key)
    await first.start()
    port = first.port
    client = Client(f"mark://localhost:{port}", ca=cert, dial_host="127.0.0.1", retries=3, retry_delay=0.05)
    try:
        assert (await client.fetch("/health")).status == "ok"
        await first.close()
        second = MarkServer(service, "127.0.0.1", port, cert, key)
        await second.start()
        try:
            assert (await client.fetch("/health")).status == "ok"
        finally:
            await second.close()
    finally:
        await client.close()


async def test_reads_give_up_with_a_clear_error_when_nothing_listens(tls_files: tuple[Path, Path]):
    client = Client(
        "mark://localhost:9",
        ca=tls_files[0],
        dial_host="127.0.0.1",
        retries=2,
        retry_delay=0.01,
        timeout=1,
        connect_timeout=0.5,
    )
    try:
        with pytest.raises(TransportError) as caught:
            await client.fetch("/health")
        assert "after 2 tries" in str(caught.value)
    finally:
        await client.close()


async def test_a_client_that_stops_reading_an_answer_is_no_error_and_the_connection_carries_on(
    server: MarkServer, tls_files: tuple[Path, Path], caplog: pytest.LogCaptureFixture
):
    config = client_configuration(ca=tls_files[0], server_name="localhost")
    async with connect("127.0.0.1", server.port, configuration=config) as protocol:
        for _ in range(5):  # STOP_SENDING right behind the request: the answer is not wanted
            stream_id = protocol._quic.get_next_available_stream_id()
            protocol._quic.send_stream_data(stream_id, b"FETCH /health\n", end_stream=True)
            protocol._quic.stop_stream(stream_id, 0)
            protocol.transmit()
        await asyncio.sleep(0.3)
        reader, writer = await protocol.create_stream()
        writer.write(b"FETCH /health\n")
        writer.write_eof()
        async with asyncio.timeout(10):
            assert parse_response(await reader.read()).status == "ok"
        await asyncio.sleep(0.1)
        assert server._server is not None  # the bookkeeping of stopped streams does not grow
        connections = list(server._server._protocols.values())
        assert connections and all(c.streams == 0 for c in connections)
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text
