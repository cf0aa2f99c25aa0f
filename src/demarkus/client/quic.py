"""The Mark Protocol client over QUIC: the same `Backend` as the in-process service.

One pooled connection per authority, shared by every request in flight; one request per
stream. How long an answer may take depends on what the authority is doing:

```
authority silent (no packet, not even the ack of a ping) for `timeout` s
    -> the connection is dead: it is dropped (every request on it fails over) and reads
       are retried on a new one; a write reports outcome-unknown
authority heard from, but this answer not complete after `answer_timeout` s
    -> only this request's stream is abandoned; the connection and the other requests
       on it carry on; the request fails (not retried: the authority is busy, not gone)
the connection ends while an answer is arriving
    -> that answer fails (never a cut-off document passed off as whole)
```
Reads are retried on transport failures (a bounded number of times). Writes are sent at
most once: a failure after the first byte was sent is reported as outcome-unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from pathlib import Path
from typing import Any

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol, QuicStreamHandler
from aioquic.quic import events
from aioquic.quic.connection import QuicConnection

from ..backend import VerbMethods
from ..errors import BadRequestError, OutcomeUnknownError, TransportError
from ..protocol import (
    MAX_RESPONSE,
    WRITE_VERBS,
    MarkURL,
    Request,
    Response,
    encode_request,
    parse_mark_url,
    parse_response,
)
from ..tls import client_configuration

log = logging.getLogger("demarkus.client")

DIAL_TIMEOUT = 10.0
REQUEST_TIMEOUT = 10.0
"""Seconds an authority may stay silent while answers are awaited before its connection
counts as dead (a ping is sent halfway, so a live authority always breaks the silence)."""
ANSWER_TIMEOUT = 60.0
"""Seconds one answer may take from an authority that is up (still sending) but busy."""
READ_RETRIES = 5
RETRY_DELAY = 0.1
STOPPED = 0
"""Application error code of the STOP_SENDING that asks an authority to drop an answer
nobody waits for any more."""


class _NotSent(Exception):
    """The request never left this process; safe to retry even for writes."""


class _Silent(ConnectionError):
    """The authority sent nothing for the whole silence timeout: the connection is dead."""


class _Slow(TimeoutError):
    """The authority is up but this answer did not complete in time."""


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


class MarkConnection(QuicConnectionProtocol):
    """One QUIC connection to an authority as the client uses it: a request per stream,
    each answer collected whole.

    It replaces aioquic's stream readers for three reasons that matter under load: an
    answer cut off by the end of the connection fails (aioquic ends every open stream as
    if the authority had finished it, so a truncated document would pass for a whole
    one); one answer can be abandoned without touching the others; and it records when
    the authority was last heard from, which tells a busy authority from a dead one.
    """

    def __init__(self, quic: QuicConnection, stream_handler: QuicStreamHandler | None = None, *,
                 receive_buffer: int | None = None) -> None:
        super().__init__(quic, stream_handler)
        self._receive_buffer = receive_buffer
        self._answers: dict[int, _Answer] = {}
        self._pinged = 0.0
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
        return self._closed.is_set()

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        self.heard = self._loop.time()
        super().datagram_received(data, addr)

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
        self.transmit()
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
        elif isinstance(event, events.ConnectionTerminated):
            reason = event.reason_phrase or f"error {event.error_code}"
            self.fail_all(f"the connection closed before the answer was complete ({reason})")


class Client(VerbMethods):
    """A connection to one authority, e.g. `Client("mark://localhost:6309")`.

    `timeout`: seconds the authority may stay silent while an answer is awaited (or a
    connection is set up, `connect_timeout`) before its connection counts as dead.
    `answer_timeout`: seconds one answer may take while the authority is up.
    `receive_buffer`: bytes asked for the UDP socket's receive buffer (SO_RCVBUF) when a
    connection is made; None keeps the system default. A client that multiplexes many
    large answers over one connection needs more than the default (about 208 KiB on
    Linux): an overflowing buffer drops datagrams, and QUIC's loss recovery then stalls
    answers for seconds. The kernel caps it at net.core.rmem_max; `connection.receive_buffer`
    reports what it granted.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        ca: Path | None = None,
        insecure: bool = False,
        dial_host: str | None = None,
        timeout: float = REQUEST_TIMEOUT,
        connect_timeout: float = DIAL_TIMEOUT,
        answer_timeout: float = ANSWER_TIMEOUT,
        retries: int = READ_RETRIES,
        retry_delay: float = RETRY_DELAY,
        receive_buffer: int | None = None,
    ) -> None:
        self.target: MarkURL = parse_mark_url(url)
        self.token = token
        self._ca, self._insecure = ca, insecure
        self._dial_host = dial_host or self.target.host
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._answer_timeout = max(answer_timeout, timeout)
        self._retries = retries
        self._retry_delay = retry_delay
        self.receive_buffer = receive_buffer
        self._protocol: MarkConnection | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()
        self.requests_sent = 0

    @property
    def authority(self) -> str:
        return self.target.authority

    @property
    def connection(self) -> MarkConnection | None:
        """The current connection, if one is open (for inspection; requests connect)."""
        return self._protocol

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        stack, self._stack, self._protocol = self._stack, None, None
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def _connection(self) -> MarkConnection:
        async with self._lock:
            if self._protocol is not None and not self._protocol.closed:
                return self._protocol
            if self._protocol is not None:  # it ended (idle timeout, the authority closed it)
                self._detach(self._protocol)
            stack = contextlib.AsyncExitStack()
            config = client_configuration(
                ca=self._ca, insecure=self._insecure, server_name=self.target.host
            )
            buffer = self.receive_buffer

            def create_protocol(quic: QuicConnection, stream_handler: QuicStreamHandler | None = None) -> MarkConnection:
                return MarkConnection(quic, stream_handler, receive_buffer=buffer)

            try:
                protocol = await asyncio.wait_for(
                    stack.enter_async_context(
                        connect(self._dial_host, self.target.port, configuration=config,
                                create_protocol=create_protocol)
                    ),
                    self._connect_timeout,
                )
            except (TimeoutError, ConnectionError, OSError) as exc:
                await stack.aclose()
                raise _NotSent(
                    f"could not connect to {self.authority}: {exc or type(exc).__name__}"
                ) from exc
            self._stack, self._protocol = stack, protocol
            return protocol

    def _detach(self, protocol: MarkConnection) -> None:
        """Stop using `protocol` (if it is still the current connection) and close it in
        the background: closing waits out QUIC's closing period, which a request that
        fails over to a new connection should not."""
        if self._protocol is not protocol:
            return
        protocol.fail_all(f"the connection to {self.authority} was given up")
        stack, self._stack, self._protocol = self._stack, None, None
        if stack is None:
            return

        async def close() -> None:
            with contextlib.suppress(Exception):
                await stack.aclose()

        task = asyncio.ensure_future(close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def request(self, request: Request) -> Response:
        """Send one request and return the authority's answer, whatever its status.

        Raises:
            TransportError: the authority could not be reached after the allowed retries,
                or it is up but did not answer in `answer_timeout`.
            OutcomeUnknownError: a write was sent but no answer arrived.
        """
        if self.token and "auth" not in request.metadata:
            request = Request(request.verb, request.path, {**request.metadata, "auth": self.token}, request.body)
        data = encode_request(request)
        is_write = request.verb in WRITE_VERBS
        last: Exception | None = None
        for attempt in range(1, self._retries + 1):
            try:
                return await self._roundtrip(data)
            except _NotSent as exc:  # nothing left this process: a retry is safe, even a write
                last = exc
            except (TimeoutError, ConnectionError, OSError, EOFError) as exc:
                if is_write:
                    raise OutcomeUnknownError(
                        f"{request.verb.value} {request.path} was sent to {self.authority} but no "
                        "answer arrived; it may or may not have been applied. Fetch the document "
                        "and check its version before retrying."
                    ) from exc
                if isinstance(exc, _Slow):
                    raise TransportError(
                        f"{self.authority} is up but did not answer {request.verb.value} {request.path} "
                        f"within {self._answer_timeout:g} s; it may be overloaded. Retry later, or ask "
                        "for less."
                    ) from exc
                last = exc
            if attempt < self._retries:
                await asyncio.sleep(self._retry_delay)
        raise TransportError(
            f"{self.authority} did not answer {request.verb.value} {request.path} after "
            f"{self._retries} tries ({last}). Check that the authority is running and reachable, "
            "then retry."
        )

    async def _roundtrip(self, data: bytes) -> Response:
        protocol = await self._connection()
        try:
            stream_id, answer = protocol.send(data)
        except Exception as exc:  # a dead connection fails before any byte leaves
            self._detach(protocol)
            raise _NotSent(str(exc)) from exc
        self.requests_sent += 1
        try:
            raw = await self._wait(protocol, answer)
        except _Silent:
            self._detach(protocol)
            raise
        finally:
            if not answer.done():
                protocol.abandon(stream_id)
            elif not answer.cancelled():
                answer.exception()  # seen: a failure after the caller left is not "never retrieved"
        try:
            return parse_response(raw)
        except BadRequestError as exc:
            raise ConnectionError(f"malformed response from {self.authority}: {exc}") from exc

    async def _wait(self, protocol: MarkConnection, answer: asyncio.Future[bytes]) -> bytes:
        """The answer, as long as the authority keeps sending and `answer_timeout` holds.

        Raises:
            _Silent: nothing arrived for `timeout` seconds (a ping halfway included).
            _Slow: the authority is up but the answer took longer than `answer_timeout`.
        """
        loop = asyncio.get_running_loop()
        sent = loop.time()
        limit = sent + self._answer_timeout
        while not answer.done():
            now = loop.time()
            heard = max(protocol.heard, sent)
            if now - heard >= self._timeout:
                raise _Silent(f"{self.authority} sent nothing for {self._timeout:g} s")
            if now >= limit:
                raise _Slow(f"no answer within {self._answer_timeout:g} s")
            halfway = heard + self._timeout / 2
            if now >= halfway:
                protocol.poke()
                wake = heard + self._timeout
            else:
                wake = halfway
            await asyncio.wait((answer,), timeout=max(0.0, min(wake, limit) - now))
        return answer.result()


class ClientPool:
    """One `Client` per authority, created on first use, for callers that span authorities.

    `options` are `Client`'s keyword arguments (token, ca, timeout, receive_buffer, ...),
    the same for every authority."""

    def __init__(self, **options: object) -> None:
        self._options = options
        self._clients: dict[str, Client] = {}

    def get(self, url: str) -> Client:
        authority = parse_mark_url(url).authority
        client = self._clients.get(authority)
        if client is None:
            client = Client(authority, **self._options)  # type: ignore[arg-type]
            self._clients[authority] = client
        return client

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()
