"""The Mark Protocol over QUIC: one request per bidirectional stream, answered by a Service.

The client writes the whole request and closes its side; the server collects it (bounded
by the protocol limits and by `streams`' bounds on what a connection and the server may
hold), answers, and closes. All behaviour lives in the service.

The server does not use aioquic's stream readers: aioquic raises a stream's flow-control
credit as data arrives, not as it is read, so a reader nobody reads after a refusal
buffers whatever the client keeps sending, and aioquic keeps every reader until the
connection closes. Here each stream's bytes go to its record in an `Intake` as they
arrive; a refused stream is answered, the client is asked to stop (STOP_SENDING), and
whatever still arrives on it is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer, serve
from aioquic.quic import events
from aioquic.quic.connection import QuicConnection

from ..errors import BadRequestError, DemarkusError, ServerError
from ..protocol import (
    Request,
    Response,
    Status,
    encode_response,
    error_response,
    parse_request,
    response_for_error,
)
from ..service import Service
from ..tls import server_configuration
from .streams import Budget, Intake, Refusal

log = logging.getLogger("demarkus.server")
access = logging.getLogger("demarkus.access")

READ_TIMEOUT = 30.0
"""Seconds a client may take to send its whole request."""
SHUTDOWN_GRACE = 5.0
"""Seconds `close()` waits for the requests in flight to be answered."""
REFUSED = 0
"""Application error code of the STOP_SENDING that follows a refusal: the answer on the
stream already says why."""


class _Connection(QuicConnectionProtocol):
    """One client's connection: its streams' bytes go to an `Intake`, and each complete
    request is answered by a task. A stream the client stopped (STOP_SENDING, e.g. after
    it gave up waiting) gets no answer: aioquic has reset our side of it and refuses the
    write, and nobody would read it."""

    def __init__(self, quic: QuicConnection, server: MarkServer) -> None:
        super().__init__(quic)
        self._server = server
        self.intake = Intake(server.budget)
        self._arriving: dict[int, tuple[float, asyncio.TimerHandle]] = {}
        """Streams still arriving: when each began (perf_counter, for the access log) and
        the timer that refuses it after READ_TIMEOUT."""
        self._answering: dict[int, asyncio.Task[None]] = {}

    @property
    def streams(self) -> int:
        """Per-stream entries this connection holds now, of every kind."""
        return len(self.intake) + len(self._arriving) + len(self._answering)

    def quic_event_received(self, event: events.QuicEvent) -> None:
        # aioquic's own handling (stream readers) is deliberately not called.
        if isinstance(event, events.StreamDataReceived):
            self._received(event.stream_id, event.data, event.end_stream)
        elif isinstance(event, events.StreamReset):
            if self.intake.reset(event.stream_id):
                self._forget(event.stream_id)
                self._server.settle()
        elif isinstance(event, events.ConnectionTerminated):
            self._terminated()

    def _received(self, stream_id: int, data: bytes, end: bool) -> None:
        if not self.intake.knows(stream_id):
            if self._server.closing:
                shutting_down = ServerError("The server is shutting down. Retry in a moment.")
                self._refuse(stream_id, self.intake.refuse(stream_id, shutting_down, end), time.perf_counter())
                return
            if not end:  # a request whole in its first bytes (most are) needs no timer
                timer = self._loop.call_later(READ_TIMEOUT, self._expire, stream_id)
                self._arriving[stream_id] = (time.perf_counter(), timer)
        outcome = self.intake.receive(stream_id, data, end)
        if outcome is None:
            return
        started = self._forget(stream_id)
        if isinstance(outcome, Refusal):
            self._refuse(stream_id, outcome, started)
            self._server.settle()
        else:
            self._dispatch(stream_id, outcome, started)

    def _expire(self, stream_id: int) -> None:
        refusal = self.intake.expire(
            stream_id,
            BadRequestError(
                f"The request was not complete within {READ_TIMEOUT:.0f} seconds. "
                "Send the whole request, then close the stream."
            ),
        )
        if refusal is not None:
            self._refuse(stream_id, refusal, self._forget(stream_id))
            self._server.settle()

    def _forget(self, stream_id: int) -> float:
        """The stream is no longer arriving: drop its timer; returns when it began."""
        arriving = self._arriving.pop(stream_id, None)
        if arriving is None:
            return time.perf_counter()
        started, timer = arriving
        timer.cancel()
        return started

    def _refuse(self, stream_id: int, refusal: Refusal, started: float) -> None:
        """Answer a refused stream and, if the client is still sending, ask it to stop."""
        response = response_for_error(refusal.error)
        sent = self._send(stream_id, response)
        if not refusal.finished:
            with contextlib.suppress(ValueError):  # the stream is already gone
                self._quic.stop_stream(stream_id, REFUSED)
        self.transmit()  # from a timer too (READ_TIMEOUT), not only from aioquic's events
        if sent:
            _log_access("-", "-", response, started)

    def _dispatch(self, stream_id: int, data: bytes, started: float) -> None:
        """Answer a complete request: a quick one (`Service.quick`) at once, in this
        callback, so its answer leaves in the datagrams aioquic sends when the callback
        returns; any other on a task that awaits the service's worker threads."""
        try:
            request = parse_request(data)
        except DemarkusError as exc:  # malformed input: an answer, not a failure
            self._reply(stream_id, "-", "-", response_for_error(exc), started, flush=False)
            return
        del data  # the parsed request holds what is needed while it is answered
        if not self._server.service.quick(request):
            task = asyncio.ensure_future(self._answer(stream_id, request, started))
            self._answering[stream_id] = task
            return
        try:
            response = self._server.service.handle(request)
        except Exception:  # the top of a stream: log it and keep serving the others
            response = _failed(request)
        self._reply(stream_id, request.verb.value, request.path, response, started, flush=False)

    async def _answer(self, stream_id: int, request: Request, started: float) -> None:
        response: Response | None = None
        try:
            response = await self._server.service.request(request)
        except Exception:  # the top of a stream: log it and keep serving the others
            response = _failed(request)
        finally:
            self._answering.pop(stream_id, None)
            if response is None:  # cancelled: the connection ended
                self.intake.finish(stream_id)
                self._server.settle()
        self._reply(stream_id, request.verb.value, request.path, response, started, flush=True)

    def _reply(self, stream_id: int, verb: str, path: str, response: Response, started: float, *, flush: bool) -> None:
        """Send an answer and give back what its request held. `flush`: have the answer's
        datagrams sent on this turn of the event loop, once for every answer of the turn
        (as a bare aioquic server's stream writers do); without it the caller is inside
        aioquic's event handling, which sends them when it returns."""
        try:
            if not self._send(stream_id, response):
                log.info("%s %s: the client stopped the stream; the answer was not sent", verb, path)
                return
            if flush:
                self._transmit_soon()
            _log_access(verb, path, response, started)
        finally:
            self.intake.finish(stream_id)
            self._server.settle()

    def _send(self, stream_id: int, response: Response) -> bool:
        """Write a whole answer and finish the stream; False if the client stopped it.
        Nothing leaves until the connection transmits."""
        try:
            self._quic.send_stream_data(stream_id, encode_response(response), end_stream=True)
        except (RuntimeError, ValueError):  # reset after a STOP_SENDING, or already gone
            return False
        return True

    def _terminated(self) -> None:
        """The connection ended: nothing of it is kept, and no answer is awaited."""
        for _, timer in self._arriving.values():
            timer.cancel()
        self._arriving.clear()
        for task in self._answering.values():
            task.cancel()
        self.intake.close()
        self._server.settle()


class MarkServer:
    """A running QUIC listener; `port` is the bound port (useful with port 0)."""

    def __init__(self, service: Service, host: str, port: int, cert: Path, key: Path) -> None:
        self.service = service
        self.host = host
        self._requested_port = port
        self._cert, self._key = cert, key
        self._server: QuicServer | None = None
        self.budget = Budget()
        """What every connection holds together (see `streams`)."""
        self.closing = False
        self._settled: asyncio.Event | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the server first"
        transport = self._server._transport
        assert transport is not None  # serve() returns once the socket is bound
        return int(transport.get_extra_info("sockname")[1])

    @property
    def url(self) -> str:
        host = "localhost" if self.host in ("127.0.0.1", "::1", "localhost") else self.host
        return f"mark://{host}:{self.port}"

    async def start(self) -> None:
        def create_protocol(quic: QuicConnection, **_: Any) -> _Connection:
            return _Connection(quic, self)

        self._settled = asyncio.Event()
        self._server = await serve(
            self.host,
            self._requested_port,
            configuration=server_configuration(self._cert, self._key),
            create_protocol=create_protocol,
        )

    def settle(self) -> None:
        """Called whenever a request is done: wakes `close()` once none is left."""
        if self._settled is not None and self.budget.streams == 0:
            self._settled.set()

    async def close(self) -> None:
        """Finish in-flight requests (bounded), then close every connection."""
        self.closing = True
        if self._settled is not None and self.budget.streams:
            self._settled.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._settled.wait(), SHUTDOWN_GRACE)
        if self._server is not None:
            self._server.close()
            self._server = None
            await asyncio.sleep(0)  # the datagram transport releases its socket on the next tick


def _failed(request: Request) -> Response:
    log.exception("%s %s failed", request.verb.value, request.path)
    return error_response(Status.SERVER_ERROR, "The server failed to answer this request. Retry it.")


def _log_access(verb: str, path: str, response: Response, started: float) -> None:
    if access.isEnabledFor(logging.INFO):
        access.info(
            json.dumps(
                {
                    "msg": "request",
                    "verb": verb,
                    "path": path,
                    "status": response.status,
                    "ms": round((time.perf_counter() - started) * 1000, 3),
                },
                sort_keys=True,
            )
        )


@asynccontextmanager
async def serve_mark(
    service: Service, *, host: str = "127.0.0.1", port: int = 0, cert: Path, key: Path
) -> AsyncIterator[MarkServer]:
    server = MarkServer(service, host, port, cert, key)
    await server.start()
    try:
        yield server
    finally:
        await server.close()
