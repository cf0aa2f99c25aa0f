"""The QUIC client against a scripted authority on 127.0.0.1: a slow answer fails alone,
an answer cut off by the connection's end fails whole, and the socket options it asks for.
And connecting: a port where nothing listens, a certificate the client does not trust and
an authority that never answers are each reported within seconds, with what to do next.

The scripted authority answers by path, so a test can hold one answer back (or cut it
off) while the others on the same connection go through.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Self

import pytest
from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer
from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection

from demarkus.client import Client
from demarkus.errors import OutcomeUnknownError, TransportError
from demarkus.protocol import Response, encode_response, parse_request
from demarkus.server.quic import MarkServer, serve_mark
from demarkus.service import Service
from demarkus.tls import ensure_dev_certificate, server_configuration

from .ports import free_udp_port, silent_udp_port

SLOWISH = 0.8
"""Seconds the authority takes over /slowish.md: under the answer timeout of these tests."""
HUSH = 1.0
"""Seconds the authority neither reads nor sends anything after the first request for /hush.md."""
BOUND = 3.0
"""Seconds a failure to connect may take to be reported. A behavioural bound, not a
benchmark: the failures below take under a second, and the margin is for a loaded machine."""


class ScriptedAuthority:
    """A QUIC listener answering by path: /never.md is never answered (the connection stays
    up), /slowish.md after SLOWISH seconds, /cut.md with half an answer and then the end of
    the connection; the first /hush.md stops the listener reading and sending for HUSH
    seconds and is never answered; any other path at once with its own name as the body."""

    def __init__(self, cert: Path, key: Path) -> None:
        self._cert, self._key = cert, key
        self._server: QuicServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections = 0
        self.seen: Counter[str] = Counter()
        self.stopped: list[int] = []
        """Streams whose answer the client asked to stop (STOP_SENDING)."""

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"mark://localhost:{self._server._transport.get_extra_info('sockname')[1]}"

    async def __aenter__(self) -> Self:
        authority = self

        class Scripted(QuicConnectionProtocol):
            def __init__(self, quic: QuicConnection, stream_handler: object = None) -> None:
                super().__init__(quic, lambda reader, writer: authority._spawn(self, reader, writer))
                authority.connections += 1

            def quic_event_received(self, event: events.QuicEvent) -> None:
                if isinstance(event, events.StopSendingReceived):
                    authority.stopped.append(event.stream_id)
                super().quic_event_received(event)

        self._server = await serve(
            "127.0.0.1", 0, configuration=server_configuration(self._cert, self._key), create_protocol=Scripted
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        assert self._server is not None
        self._server.close()
        await asyncio.sleep(0)

    def _spawn(
        self, protocol: QuicConnectionProtocol, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.ensure_future(self._answer(protocol, reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(
        self, protocol: QuicConnectionProtocol, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            await self._script(protocol, reader, writer)
        finally:  # a stream the client stopped refuses even the FIN; this marks it done
            with contextlib.suppress(Exception):
                writer.write_eof()

    async def _script(
        self, protocol: QuicConnectionProtocol, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        request = parse_request(await reader.read())
        self.seen[request.path] += 1
        if request.path == "/never.md":
            await asyncio.sleep(60)
        elif request.path == "/hush.md" and self.seen[request.path] == 1:
            assert self._server is not None  # deaf and mute for a while, like a stopped process
            transport = self._server._transport
            transport.pause_reading()
            transport.sendto = lambda data, addr=None: None  # type: ignore[method-assign]
            await asyncio.sleep(HUSH)
            del transport.sendto
            transport.resume_reading()
            await asyncio.sleep(60)  # and this request is never answered
        elif request.path == "/slowish.md":
            await asyncio.sleep(SLOWISH)
        elif request.path == "/cut.md":
            writer.write(encode_response(Response("ok", {}, b"x" * 100_000))[:60_000])
            await asyncio.sleep(0.2)
            protocol.close()
            return
        writer.write(encode_response(Response("ok", {}, request.path.encode())))
        writer.write_eof()


@pytest.fixture
async def authority(tls_files: tuple[Path, Path]) -> AsyncIterator[ScriptedAuthority]:
    async with ScriptedAuthority(*tls_files) as running:
        yield running


def scripted_client(authority: ScriptedAuthority, ca: Path, **options: object) -> Client:
    return Client(authority.url, ca=ca, dial_host="127.0.0.1", **options)  # type: ignore[arg-type]


async def test_a_slow_answer_fails_alone_and_the_shared_connection_carries_on(authority: ScriptedAuthority, tls_files):
    async with scripted_client(authority, tls_files[0], timeout=0.6, answer_timeout=1.2, retries=3) as client:
        assert (await client.fetch("/a.md")).body == b"/a.md"
        connection = client.connection
        never = asyncio.create_task(client.fetch("/never.md"))
        await asyncio.sleep(0.7)  # /slowish.md is still arriving when /never.md is given up
        slowish = asyncio.create_task(client.fetch("/slowish.md"))
        started = time.monotonic()
        with pytest.raises(TransportError) as caught:
            await never
        assert "is up but did not answer FETCH /never.md within 1.2 s" in str(caught.value)
        assert (await slowish).body == b"/slowish.md"
        assert time.monotonic() - started < SLOWISH + 0.5
        assert (await client.fetch("/b.md")).body == b"/b.md"
        assert client.connection is connection and not connection.closed
    # one connection throughout, and the slow answer was not sent again (the authority is busy, not gone)
    assert authority.connections == 1
    assert authority.seen["/never.md"] == 1 and authority.seen["/slowish.md"] == 1
    assert len(authority.stopped) == 1  # and the authority was told to drop the answer given up


async def test_a_caller_who_leaves_has_its_answer_stopped_and_the_connection_carries_on(
    authority: ScriptedAuthority, tls_files
):
    async with scripted_client(authority, tls_files[0], timeout=5, answer_timeout=20) as client:
        assert (await client.fetch("/a.md")).status == "ok"
        connection = client.connection
        assert connection is not None
        leaving = asyncio.create_task(client.fetch("/never.md"))
        while authority.seen["/never.md"] == 0:
            await asyncio.sleep(0.01)
        leaving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leaving
        for _ in range(200):  # the STOP_SENDING is on its way
            if authority.stopped:
                break
            await asyncio.sleep(0.01)
        assert len(authority.stopped) == 1
        assert not connection._answers  # nothing is kept for the answer nobody waits for
        assert (await client.fetch("/b.md")).body == b"/b.md"
        assert client.connection is connection


async def test_a_write_whose_answer_is_late_is_outcome_unknown_and_the_connection_stays(
    authority: ScriptedAuthority, tls_files
):
    async with scripted_client(authority, tls_files[0], timeout=0.6, answer_timeout=1.0, retries=3) as client:
        assert (await client.fetch("/a.md")).status == "ok"
        connection = client.connection
        with pytest.raises(OutcomeUnknownError, match="may or may not have been applied"):
            await client.publish("/never.md", "once")
        assert (await client.fetch("/b.md")).status == "ok"
        assert client.connection is connection
    assert authority.seen["/never.md"] == 1


async def test_an_answer_cut_off_by_the_end_of_the_connection_fails_instead_of_passing_truncated(
    authority: ScriptedAuthority, tls_files
):
    async with scripted_client(authority, tls_files[0], timeout=2, retries=2, retry_delay=0.01) as client:
        with pytest.raises(TransportError) as caught:
            await client.fetch("/cut.md")
        assert "after 2 tries" in str(caught.value) and "before the answer was complete" in str(caught.value)
        assert (await client.fetch("/a.md")).body == b"/a.md"  # a new connection replaces the closed one
    assert authority.seen["/cut.md"] == 2 and authority.connections == 3


async def test_a_silent_authority_is_given_up_after_the_silence_timeout_and_a_read_fails_over(
    authority: ScriptedAuthority, tls_files
):
    async with scripted_client(authority, tls_files[0], timeout=0.5, answer_timeout=20, retries=2) as client:
        assert (await client.fetch("/a.md")).status == "ok"
        first = client.connection
        started = time.monotonic()
        assert (await client.fetch("/hush.md")).body == b"/hush.md"  # the retry, on a new connection
        assert time.monotonic() - started < 10  # the silence decided, not the answer timeout
        assert first is not None and client.connection is not first
    assert authority.seen["/hush.md"] == 2 and authority.connections == 2


def _rmem_max() -> int | None:
    try:
        return int(Path("/proc/sys/net/core/rmem_max").read_text())
    except (OSError, ValueError):
        return None


async def test_the_receive_buffer_asked_for_is_set_on_the_connections_socket(server: MarkServer, tls_files):
    asked = 1 << 20
    async with Client(
        f"mark://localhost:{server.port}", ca=tls_files[0], dial_host="127.0.0.1", receive_buffer=asked
    ) as client:
        assert (await client.fetch("/health")).status == "ok"
        assert client.connection is not None
        granted = client.connection.receive_buffer
    async with Client(f"mark://localhost:{server.port}", ca=tls_files[0], dial_host="127.0.0.1") as plain:
        assert (await plain.fetch("/health")).status == "ok"
        assert plain.connection is not None
        default = plain.connection.receive_buffer
    assert granted is not None and default is not None
    # Linux doubles the size asked for (its bookkeeping) and caps it at net.core.rmem_max
    cap = _rmem_max()
    assert granted >= min(asked, cap if cap is not None else asked)
    if cap is None or cap > default:
        assert granted > default
    probe = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:  # the same clamp on a bare socket, as a cross-check of what the kernel grants
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, asked)
        assert granted == probe.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    finally:
        probe.close()


# --- connecting -------------------------------------------------------------------------


@pytest.fixture
async def unhandled() -> Callable[[], list[dict[str, object]]]:
    """What the event loop reported as unhandled ("Future exception was never retrieved",
    "Task exception was never retrieved"); asked for, it first collects the garbage, since a
    failed future left unseen is only reported when it is collected."""
    seen: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _, context: seen.append(context))

    def report() -> list[dict[str, object]]:
        gc.collect()
        return seen

    return report


async def test_a_port_where_nothing_listens_is_reported_within_seconds_as_such(unhandled):
    port = free_udp_port()
    async with Client(f"mark://localhost:{port}", dial_host="127.0.0.1") as client:
        started = time.monotonic()
        with pytest.raises(TransportError) as caught:
            await client.fetch("/a.md")
        elapsed = time.monotonic() - started
        with pytest.raises(TransportError) as write:
            await client.publish("/a.md", "never sent")
    assert elapsed < BOUND
    assert str(caught.value).startswith(
        f"nothing is listening at mark://localhost:{port} (127.0.0.1 port {port} refused the connection after "
    )
    assert "start the authority if it is not running" in str(caught.value)
    assert not isinstance(write.value, OutcomeUnknownError)  # nothing left: the write was not sent
    assert unhandled() == []


@pytest.mark.parametrize("trust", ["nothing", "another certificate"])
async def test_a_client_that_does_not_trust_the_certificate_is_told_about_ca_and_insecure_after_one_try(
    authority: ScriptedAuthority, tmp_path: Path, unhandled, trust: str
):
    ca = None if trust == "nothing" else ensure_dev_certificate(tmp_path / "other")[0]
    async with scripted_client(authority, ca) as untrusting:  # type: ignore[arg-type]
        started = time.monotonic()
        with pytest.raises(TransportError) as caught:
            await untrusting.fetch("/a.md")
        elapsed = time.monotonic() - started
    # the authority had seen every handshake before the client could refuse its certificate
    assert authority.connections == 1
    assert elapsed < BOUND
    message = str(caught.value)
    assert message.startswith(f"{authority.url} presented a certificate this client does not trust (")
    assert "Pass --ca FILE with the authority's certificate" in message and "--insecure" in message
    assert "$DEMARKUS_HOME/tls/dev-cert.pem, by default ~/.mark/tls/dev-cert.pem" in message
    assert (f"trusts only {ca} (--ca)" if ca else "dev-cert.pem, which does not exist") in message
    assert unhandled() == []


async def test_a_quic_server_that_is_not_a_mark_authority_is_named_as_such_after_one_try(tls_files, unhandled):
    cert, key = tls_files
    other = QuicConfiguration(is_client=False, alpn_protocols=["h3"])  # an HTTP/3 server, say
    other.load_cert_chain(str(cert), str(key))
    handshakes: list[QuicConnectionProtocol] = []

    def counted(quic: QuicConnection, stream_handler: object = None) -> QuicConnectionProtocol:
        handshakes.append(QuicConnectionProtocol(quic))
        return handshakes[-1]

    server = await serve("127.0.0.1", 0, configuration=other, create_protocol=counted)
    port = server._transport.get_extra_info("sockname")[1]
    try:
        async with Client(f"mark://localhost:{port}", ca=cert, dial_host="127.0.0.1") as client:
            started = time.monotonic()
            with pytest.raises(TransportError) as caught:
                await client.fetch("/a.md")
            elapsed = time.monotonic() - started
    finally:
        server.close()
    # the server refuses the ALPN with TLS alert 120 (no_application_protocol): 0x100 + 120
    assert str(caught.value) == (
        f"the QUIC handshake with mark://localhost:{port} failed: No common ALPN protocols "
        "(QUIC error 0x178). Check that the address and port belong to a Mark authority, then retry."
    )
    assert len(handshakes) == 1 and elapsed < BOUND
    assert unhandled() == []


async def test_requests_to_a_port_that_never_answers_share_one_dial_bounded_by_the_connect_timeout(unhandled):
    with silent_udp_port() as silent:
        async with Client(f"mark://localhost:{silent.port}", dial_host="127.0.0.1", connect_timeout=0.5) as client:
            started = time.monotonic()
            outcomes = await asyncio.gather(*(client.fetch(f"/{i}.md") for i in range(8)), return_exceptions=True)
            elapsed = time.monotonic() - started
        dials = len(silent.senders())
    assert all(isinstance(outcome, TransportError) for outcome in outcomes)
    # eight requests with five tries each: one dial in all, not one per try and per request
    assert dials == 1
    assert elapsed < BOUND
    assert str(outcomes[0]).startswith(
        f"mark://localhost:{silent.port} did not answer the QUIC handshake within 0.5 s "
        f"(127.0.0.1 port {silent.port} sent nothing back)"
    )
    assert unhandled() == []


async def test_an_authority_that_starts_after_a_refusal_is_reached_by_the_same_client(service: Service, tls_files):
    cert, key = tls_files
    port = free_udp_port()
    async with Client(f"mark://localhost:{port}", ca=cert, dial_host="127.0.0.1", retries=1) as client:
        with pytest.raises(TransportError, match="nothing is listening"):
            await client.fetch("/health")
        async with serve_mark(service, host="127.0.0.1", port=port, cert=cert, key=key):
            assert (await client.fetch("/health")).status == "ok"


async def test_an_authority_that_stops_is_reported_within_seconds_and_reached_again_once_back(
    service: Service, tls_files
):
    cert, key = tls_files
    async with serve_mark(service, host="127.0.0.1", port=0, cert=cert, key=key) as first:
        port = first.port
        client = Client(f"mark://localhost:{port}", ca=cert, dial_host="127.0.0.1")
        assert (await client.fetch("/health")).status == "ok"
    async with client:
        started = time.monotonic()
        with pytest.raises(TransportError, match="nothing is listening"):
            await client.fetch("/health")
        assert time.monotonic() - started < BOUND
        async with serve_mark(service, host="127.0.0.1", port=port, cert=cert, key=key):
            assert (await client.fetch("/health")).status == "ok"
