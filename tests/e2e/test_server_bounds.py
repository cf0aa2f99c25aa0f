"""The real QUIC server's bounds on incoming requests: a refused stream is stopped and
what still arrives on it is dropped, a connection and the server hold a bounded amount,
nothing per stream outlives its stream, and a slow or late request is still answered."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic import events

from demarkus.client import Client
from demarkus.protocol import MAX_BODY, MAX_REQUEST, MAX_REQUEST_LINE, parse_response
from demarkus.server import quic, streams
from demarkus.server.quic import MarkServer
from demarkus.service import Service
from demarkus.tls import client_configuration

from ..conftest import Tokens

WAIT = 10.0
"""Seconds any one answer or event may take on loopback before the test fails."""


class Raw(QuicConnectionProtocol):
    """A raw client connection: it sends exact bytes on a stream, with or without the end
    of the stream, collects each answer whole, and records the server's STOP_SENDING per
    stream with the bytes this client had sent on that stream when it arrived."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._chunks: dict[int, list[bytes]] = {}
        self._answers: dict[int, asyncio.Future[bytes]] = {}
        self._stops: dict[int, asyncio.Future[int]] = {}

    def send(self, data: bytes, *, end: bool, stream_id: int | None = None) -> int:
        if stream_id is None:
            stream_id = self._quic.get_next_available_stream_id()
        self._quic.send_stream_data(stream_id, data, end_stream=end)
        self.transmit()
        return stream_id

    async def status(self, stream_id: int) -> str:
        async with asyncio.timeout(WAIT):
            return parse_response(await self._future(self._answers, stream_id)).status

    async def stopped(self, stream_id: int) -> int:
        """Bytes this client had sent on the stream when the server asked it to stop."""
        async with asyncio.timeout(WAIT):
            return await self._future(self._stops, stream_id)

    def _future(self, table: dict[int, asyncio.Future[Any]], stream_id: int) -> asyncio.Future[Any]:
        return table.setdefault(stream_id, self._loop.create_future())

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.StreamDataReceived):
            chunks = self._chunks.setdefault(event.stream_id, [])
            chunks.append(event.data)
            if event.end_stream:
                self._future(self._answers, event.stream_id).set_result(b"".join(chunks))
        elif isinstance(event, events.StopSendingReceived):
            stream = self._quic._streams.get(event.stream_id)
            sent = stream.sender.highest_offset if stream is not None else -1
            future = self._future(self._stops, event.stream_id)
            if not future.done():
                future.set_result(sent)


@asynccontextmanager
async def raw(server: MarkServer, cert: Path) -> AsyncIterator[Raw]:
    config = client_configuration(ca=cert, server_name="localhost")
    async with connect("127.0.0.1", server.port, configuration=config, create_protocol=Raw) as protocol:
        yield protocol  # type: ignore[misc]


async def the_one_refused(statuses: list[asyncio.Future[str]]) -> int:
    """Which of the streams held open was refused: exactly one answers before its end."""
    done, _ = await asyncio.wait(statuses, timeout=WAIT, return_when=asyncio.FIRST_COMPLETED)
    assert [future.result() for future in done] == ["rate-limited"]
    return statuses.index(done.pop())


def connections(server: MarkServer) -> list[QuicConnectionProtocol]:
    """The server's open connections (aioquic lists one under each of its ids)."""
    assert server._server is not None
    return list({id(c): c for c in server._server._protocols.values()}.values())


async def healthy(server: MarkServer, cert: Path) -> bool:
    async with Client(f"mark://localhost:{server.port}", ca=cert, dial_host="127.0.0.1") as other:
        return (await other.fetch("/health")).status == "ok"


def publish(body_size: int, token: str) -> bytes:
    """A whole-size PUBLISH, each to a path of its own (the same body twice is not news)."""
    path = f"/held/{next(_PATHS)}.md"
    return f"PUBLISH {path}\n---\nauth: {token}\n---\n".encode() + b"x" * body_size


_PATHS = itertools.count()


async def test_a_client_that_keeps_sending_after_its_refusal_is_stopped_and_nothing_is_kept(
    server: MarkServer, tls_files: tuple[Path, Path]
):
    flood = 32 * 1024 * 1024
    async with raw(server, tls_files[0]) as protocol:
        stream_id = protocol.send(b"PUBLISH /a.md\n" + b"x" * flood, end=False)  # it would go on
        assert await protocol.status(stream_id) == "bad-request"
        assert await protocol.stopped(stream_id) < flood // 2  # told to stop long before the end
        await protocol.ping()  # the server has seen everything up to the client's reset
        (connection,) = connections(server)
        assert connection.streams == 0
        assert server.budget.bytes == 0 and server.budget.streams == 0
        assert await healthy(server, tls_files[0])
        assert await protocol.status(protocol.send(b"FETCH /health\n", end=True)) == "ok"


async def test_a_request_line_without_a_newline_is_refused_before_the_stream_ends(
    server: MarkServer, tls_files: tuple[Path, Path]
):
    async with raw(server, tls_files[0]) as protocol:
        stream_id = protocol.send(b"FETCH /" + b"x" * MAX_REQUEST_LINE, end=False)
        assert await protocol.status(stream_id) == "bad-request"
        await protocol.stopped(stream_id)


async def test_a_connection_holding_too_many_bytes_has_one_stream_refused_and_the_rest_served(
    server: MarkServer, tls_files: tuple[Path, Path], tokens: Tokens
):
    size = MAX_BODY - 100
    held = streams.MAX_CONNECTION_BYTES // size + 1  # one more than fits
    async with raw(server, tls_files[0]) as protocol:
        # held open: their bytes stay on the server
        stream_ids = [protocol.send(publish(size, tokens.writer), end=False) for _ in range(held)]
        statuses = [asyncio.ensure_future(protocol.status(s)) for s in stream_ids]
        refused = await the_one_refused(statuses)
        assert await healthy(server, tls_files[0])  # another client is served meanwhile
        for i, stream_id in enumerate(stream_ids):
            if i != refused:
                protocol.send(b"", end=True, stream_id=stream_id)
        answers = sorted(await asyncio.gather(*statuses))
    assert answers == ["created"] * (held - 1) + ["rate-limited"]
    assert server.budget.bytes == 0


async def test_the_server_refuses_what_exceeds_its_total_and_serves_the_rest(
    server: MarkServer, tls_files: tuple[Path, Path], tokens: Tokens, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(streams, "MAX_SERVER_BYTES", 2 * MAX_REQUEST)
    cert = tls_files[0]
    async with raw(server, cert) as first, raw(server, cert) as second, raw(server, cert) as third:
        held = [(p, p.send(publish(MAX_BODY - 100, tokens.writer), end=False)) for p in (first, second, third)]
        statuses = [asyncio.ensure_future(p.status(s)) for p, s in held]
        refused = await the_one_refused(statuses)  # whichever crosses the total; two fit
        for i, (protocol, stream_id) in enumerate(held):
            if i != refused:
                protocol.send(b"", end=True, stream_id=stream_id)
        answers = sorted(await asyncio.gather(*statuses))
    assert answers == ["created", "created", "rate-limited"]
    assert server.budget.bytes == 0


async def test_a_connection_with_too_many_requests_in_flight_has_the_next_refused(
    server: MarkServer, tls_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(streams, "MAX_STREAMS", 4)
    async with raw(server, tls_files[0]) as protocol:
        stream_ids = [protocol.send(b"FETCH /health\n", end=False) for _ in range(5)]
        statuses = [asyncio.ensure_future(protocol.status(s)) for s in stream_ids]
        refused = await the_one_refused(statuses)
        for i, stream_id in enumerate(stream_ids):
            if i != refused:
                protocol.send(b"", end=True, stream_id=stream_id)
        answers = sorted(await asyncio.gather(*statuses))
    assert answers == ["ok"] * 4 + ["rate-limited"]


async def test_nothing_per_stream_outlives_two_thousand_requests_on_one_connection(server: MarkServer, client: Client):
    for _ in range(40):
        responses = await asyncio.gather(*(client.fetch("/health") for _ in range(50)))
        assert {r.status for r in responses} == {"ok"}
    assert client.connection is not None
    await client.connection.ping()  # every answer's delivery acknowledged to the server
    (connection,) = connections(server)
    assert len(connection._stream_readers) == 0  # aioquic's readers are not used
    assert connection.streams == 0
    assert len(connection._quic._streams) < 50  # aioquic discards finished streams itself


async def test_an_unfinished_request_is_refused_after_the_read_timeout_and_stopped(
    server: MarkServer, tls_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(quic, "READ_TIMEOUT", 0.2)
    async with raw(server, tls_files[0]) as protocol:
        stream_id = protocol.send(b"FETCH /health\n", end=False)  # and never the end of it
        assert await protocol.status(stream_id) == "bad-request"
        await protocol.stopped(stream_id)
        await protocol.ping()
        assert connections(server)[0].streams == 0
        assert server.budget.streams == 0


async def test_close_answers_requests_in_flight_and_refuses_new_ones(service: Service, tls_files: tuple[Path, Path]):
    cert, key = tls_files
    server = MarkServer(service, "127.0.0.1", 0, cert, key)
    await server.start()
    async with raw(server, cert) as protocol:
        early = protocol.send(b"FETCH /health\n", end=False)  # begun before the close
        await protocol.ping()
        closing = asyncio.ensure_future(server.close())
        await asyncio.sleep(0)  # close() has begun; it waits for the request in flight
        assert not closing.done()
        late = protocol.send(b"FETCH /health\n", end=True)
        assert await protocol.status(late) == "server-error"
        protocol.send(b"", end=True, stream_id=early)
        assert await protocol.status(early) == "ok"
        await asyncio.wait_for(closing, quic.SHUTDOWN_GRACE)


async def test_a_bad_request_is_one_short_log_line(
    server: MarkServer, tls_files: tuple[Path, Path], caplog: pytest.LogCaptureFixture
):
    deep = b"FETCH /" + b"a/" * 2040 + b"x.md\n"  # about 4 KiB of path, too deep to serve
    caplog.set_level(logging.DEBUG, logger="demarkus")
    async with raw(server, tls_files[0]) as protocol:
        assert await protocol.status(protocol.send(deep, end=True)) == "bad-request"
    records = [r for r in caplog.records if r.name.startswith("demarkus")]
    assert [r.name for r in records] == ["demarkus.access"]
    assert len(records[0].getMessage()) < 200 and records[0].exc_info is None
