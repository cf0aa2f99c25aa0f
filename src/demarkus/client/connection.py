"""One QUIC connection to an authority, as the client uses it: dialled over a connected UDP
socket, a request per stream, each answer collected whole.

aioquic's own `connect()` sends from an unconnected socket, so the network's "port
unreachable" (which loopback and LANs return at once) never reaches it, and a handshake
to a port where nothing listens waits out its whole timeout. Here the socket is connected
to the authority's address first, and the kernel relays that refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from typing import Any

from aioquic.asyncio.protocol import QuicConnectionProtocol, QuicStreamHandler
from aioquic.quic import events
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import NetworkAddress, QuicConnection, QuicConnectionAdapter

from ..protocol import MAX_RESPONSE

log = logging.getLogger("demarkus.client")

STOPPED = 0
"""Application error code of the STOP_SENDING that asks an authority to drop an answer
nobody waits for any more."""


class Rejected(Exception):
    """The handshake was closed over a TLS or QUIC error (by either side): never retried."""

    def __init__(self, close: events.ConnectionTerminated) -> None:
        super().__init__(close.reason_phrase or "no reason given")
        self.error_code = close.error_code


class _Answer:
    """One answer being received, whole or not at all."""

    __slots__ = ("chunks", "done", "size")

    def __init__(self, done: asyncio.Future[bytes]) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.done = done

    def finish(self) -> None:
        if self.done.done():
            return
        if self.chunks:
            self.done.set_result(b"".join(self.chunks))
        else:
            self.done.set_exception(EOFError("the stream closed without a response"))

    def fail(self, exc: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(exc)


class _ClientLog(QuicConnectionAdapter):
    """aioquic's log for one client connection, its warnings and errors lowered to debug.

    aioquic warns when a protocol or TLS error closes a connection; the client raises that
    as an error naming the cause, so the warning would only repeat it on stderr.
    """

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self.debug(msg, *args, **kwargs)

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        self.debug(msg, *args, **kwargs)


class MarkConnection(QuicConnectionProtocol):
    """One QUIC connection to an authority (made by `open_connection`).

    It replaces aioquic's stream readers for three reasons that matter under load: an
    answer cut off by the end of the connection fails (aioquic ends every open stream as
    if the authority had finished it, so a truncated document would pass for a whole
    one); one answer can be abandoned without touching the others; and it records when
    the authority was last heard from, which tells a busy authority from a dead one.

    It also tells an end as soon as it is known. The handshake (`handshake`) fails on the
    network's refusal (`error_received`) or on a close over the certificate, not after
    QUIC's closing period. Once connected, a refusal means the authority's process is gone,
    and a close from the authority means nothing more will come: either way the awaited
    answers fail there and then, instead of after a silence timeout or the closing period.
    """

    def __init__(
        self,
        quic: QuicConnection,
        stream_handler: QuicStreamHandler | None = None,
        *,
        receive_buffer: int | None = None,
    ) -> None:
        super().__init__(quic, stream_handler)
        self._receive_buffer = receive_buffer
        self._answers: dict[int, _Answer] = {}
        self._pinged = 0.0
        self._ended: str | None = None
        """Why the connection is over for requests, before aioquic counts it closed."""
        self.handshake: asyncio.Future[None] = self._loop.create_future()
        """Completes when the handshake does; fails with the network's OSError or Rejected."""
        self.heard = self._loop.time()
        """Loop time of the last datagram from the authority."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self._receive_buffer:  # before the first datagram: the handshake has not begun
            sock = transport.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer)
                except OSError as exc:
                    log.warning("could not set the UDP receive buffer to %d bytes: %s", self._receive_buffer, exc)

    @property
    def receive_buffer(self) -> int | None:
        """SO_RCVBUF as the kernel granted it (Linux reports twice the bytes asked, capped
        by net.core.rmem_max); None without a socket."""
        sock = self._transport.get_extra_info("socket") if self._transport is not None else None
        return None if sock is None else int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))

    @property
    def closed(self) -> bool:
        return self._closed.is_set() or self._ended is not None

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        self.heard = self._loop.time()
        super().datagram_received(data, addr)
        close = self._quic._close_event  # set the moment either side closes: no public view
        if close is None or self._ended is not None:
            return
        if not self.handshake.done():
            self.handshake.set_exception(Rejected(close))
            return
        self._ended = close.reason_phrase or f"error {close.error_code}"
        self.fail_all(f"the connection closed before the answer was complete ({self._ended})")

    def error_received(self, exc: Exception) -> None:
        """The network reports an error for a datagram to the authority (ICMP)."""
        if not self.handshake.done():
            self.handshake.set_exception(exc)
        elif isinstance(exc, ConnectionRefusedError) and self._ended is None:
            self._ended = f"{self.authority_address} refused: the authority stopped"
            self.fail_all(f"the connection closed before the answer was complete ({self._ended})")
        # other errors (no route for a moment) are left to QUIC's loss recovery

    @property
    def authority_address(self) -> str:
        """Where the socket is connected, for messages: "127.0.0.1 port 6309"."""
        peer = self._transport.get_extra_info("peername") if self._transport is not None else None
        return "the authority" if not peer else f"{peer[0]} port {peer[1]}"

    def abort(self) -> None:
        """Drop a connection whose handshake failed, at once. Its CONNECTION_CLOSE still
        goes out, but QUIC's closing period is skipped: no stream was ever opened, so no
        late packet can matter, and the caller is waiting for the verdict."""
        self._ended = self._ended or "the handshake failed"
        self.close()
        if self._timer is not None:  # nothing may send on the socket once it is closed
            self._timer.cancel()
            self._timer = None
        if self._transport is not None:
            self._transport.close()

    async def shut(self) -> None:
        """Close an established connection: CONNECTION_CLOSE, QUIC's closing period (so
        late packets are answered with a close), then the socket."""
        self.close()
        await self.wait_closed()
        if self._transport is not None:
            self._transport.close()

    def send(self, data: bytes) -> tuple[int, asyncio.Future[bytes]]:
        """Send one whole request on a new stream; the future completes with its answer.

        Raises:
            ConnectionError: the connection is closed (nothing was sent).
        """
        if self.closed:
            raise ConnectionError("connection closed")
        stream_id = self._quic.get_next_available_stream_id()
        self._quic.send_stream_data(stream_id, data, end_stream=True)
        answer = self._answers[stream_id] = _Answer(self._loop.create_future())
        # Sent on this turn of the event loop, together with every request of the turn
        # (as aioquic's stream writers do), not in datagrams of its own.
        self._transmit_soon()
        return stream_id, answer.done

    def abandon(self, stream_id: int) -> None:
        """Stop waiting for one answer; the other streams are not affected. The authority
        is asked to stop sending it (STOP_SENDING), and whatever still arrives is dropped."""
        answer = self._answers.pop(stream_id, None)
        if answer is None:
            return
        answer.done.cancel()
        with contextlib.suppress(ValueError):  # the stream is already gone: nothing to stop
            self._quic.stop_stream(stream_id, STOPPED)
        self.transmit()

    def fail_all(self, reason: str) -> None:
        """Fail every awaited answer at once (the connection is being given up)."""
        answers, self._answers = self._answers, {}
        for answer in answers.values():
            answer.fail(ConnectionError(reason))

    def poke(self) -> None:
        """Send a PING (once per silence) so that a live authority answers with an ack."""
        if self._pinged > self.heard or self.closed:
            return
        self._pinged = self._loop.time()
        self._quic.send_ping(0)
        self.transmit()

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.StreamDataReceived):
            answer = self._answers.get(event.stream_id)
            if answer is None:  # abandoned, or a stream the authority opened (never used)
                return
            answer.chunks.append(event.data)
            answer.size += len(event.data)
            if answer.size > MAX_RESPONSE:
                answer.fail(ConnectionError("the response exceeds the protocol's size limits"))
                self.abandon(event.stream_id)
            elif event.end_stream:
                del self._answers[event.stream_id]
                answer.finish()
        elif isinstance(event, events.StreamReset):
            answer = self._answers.pop(event.stream_id, None)
            if answer is not None:
                answer.fail(ConnectionError(f"the authority reset the stream (error {event.error_code})"))
        elif isinstance(event, events.HandshakeCompleted):
            if not self.handshake.done():
                self.handshake.set_result(None)
        elif isinstance(event, events.ConnectionTerminated):
            if not self.handshake.done():
                self.handshake.set_exception(Rejected(event))
            reason = event.reason_phrase or f"error {event.error_code}"
            self.fail_all(f"the connection closed before the answer was complete ({reason})")


async def open_connection(
    config: QuicConfiguration, family: int, addr: NetworkAddress, *, receive_buffer: int | None = None
) -> MarkConnection:
    """A connection to one address with its handshake done (the caller bounds the wait).

    Raises:
        OSError: the network refused at once (nothing listens on the port, no route).
        Rejected: the handshake was closed over a TLS or QUIC error.
    """
    loop = asyncio.get_running_loop()
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        sock.connect(addr)  # UDP: no packet yet, but the kernel now relays ICMP errors
    except OSError:
        sock.close()
        raise
    quic = QuicConnection(configuration=config)
    quic._logger = _ClientLog(quic._logger.logger, quic._logger.extra)
    _, protocol = await loop.create_datagram_endpoint(
        lambda: MarkConnection(quic, receive_buffer=receive_buffer), sock=sock
    )
    try:
        protocol.connect(sock.getpeername())
        await protocol.handshake
    except BaseException:
        protocol.abort()
        raise
    return protocol
