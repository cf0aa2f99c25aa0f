"""The Mark Protocol over QUIC: one request per bidirectional stream, answered by a Service.

The client writes the whole request and closes its side; the server reads to the end
(bounded by the protocol limits), answers, and closes. All behaviour lives in the service.
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

from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.asyncio.server import QuicServer
from aioquic.quic import events

from ..errors import BadRequestError, DemarkusError
from ..protocol import (
    MAX_REQUEST,
    MAX_REQUEST_LINE,
    Response,
    Status,
    encode_response,
    error_response,
    parse_request,
    response_for_error,
)
from ..service import Service
from ..tls import server_configuration

log = logging.getLogger("demarkus.server")
access = logging.getLogger("demarkus.access")

READ_TIMEOUT = 30.0
"""Seconds a client may take to send its whole request."""
SHUTDOWN_GRACE = 5.0


class _Connection(QuicConnectionProtocol):
    """One client's connection. It knows which streams still wait for their answer, and
    which of those the client stopped (STOP_SENDING, e.g. after it gave up waiting):
    nobody reads those, and aioquic refuses to write on them. A STOP_SENDING may come
    before the stream's first data; one for a stream already answered is not kept."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.answering: set[int] = set()
        self.stopped: set[int] = set()
        self.highest = -1
        """The highest stream id that has begun (a client's stream ids only grow)."""

    def begin(self, stream_id: int) -> None:
        self.answering.add(stream_id)
        self.highest = max(self.highest, stream_id)

    def end(self, stream_id: int) -> None:
        self.answering.discard(stream_id)
        self.stopped.discard(stream_id)

    def quic_event_received(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.StopSendingReceived) and (
            event.stream_id in self.answering or event.stream_id > self.highest
        ):
            self.stopped.add(event.stream_id)
        super().quic_event_received(event)


def _stream(writer: asyncio.StreamWriter) -> tuple[_Connection, int] | None:
    """The connection and stream id behind an aioquic stream writer."""
    transport = writer.transport
    connection = getattr(transport, "protocol", None)
    if not isinstance(connection, _Connection):
        return None
    return connection, transport.get_extra_info("stream_id")


class MarkServer:
    """A running QUIC listener; `port` is the bound port (useful with port 0)."""

    def __init__(self, service: Service, host: str, port: int, cert: Path, key: Path) -> None:
        self.service = service
        self.host = host
        self._requested_port = port
        self._cert, self._key = cert, key
        self._server: QuicServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the server first"
        return int(self._server._transport.get_extra_info("sockname")[1])

    @property
    def url(self) -> str:
        host = "localhost" if self.host in ("127.0.0.1", "::1", "localhost") else self.host
        return f"mark://{host}:{self.port}"

    async def start(self) -> None:
        self._server = await serve(
            self.host,
            self._requested_port,
            configuration=server_configuration(self._cert, self._key),
            create_protocol=_Connection,
            stream_handler=self._spawn,
        )

    def _spawn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # aioquic calls this synchronously; the work runs as a task we can wait for on close.
        stream = _stream(writer)
        if stream is not None:
            stream[0].begin(stream[1])
        task = asyncio.ensure_future(self._handle(reader, writer, stream))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      stream: tuple[_Connection, int] | None) -> None:
        started = time.perf_counter()
        verb, path = "-", "-"
        try:
            if self._closing:
                response = error_response(
                    Status.SERVER_ERROR, "The server is shutting down. Retry in a moment."
                )
            else:
                try:
                    async with asyncio.timeout(READ_TIMEOUT):
                        data = await _read_request(reader)
                    request = parse_request(data)
                    verb, path = request.verb.value, request.path
                    response = self.service.handle(request)
                except DemarkusError as exc:
                    response = response_for_error(exc)
                except TimeoutError:
                    response = error_response(
                        Status.BAD_REQUEST,
                        f"The request was not complete within {READ_TIMEOUT:.0f} seconds. "
                        "Send the whole request, then close the stream.",
                    )
            if stream is not None and stream[1] in stream[0].stopped:
                log.info("%s %s: the client stopped the stream; the answer was not sent", verb, path)
                with contextlib.suppress(RuntimeError):  # marks our side done; aioquic refuses the FIN
                    writer.write_eof()
                return
            writer.write(encode_response(response))
            writer.write_eof()
            _log_access(verb, path, response, started)
        except Exception:  # the top of a stream: log it and keep serving the others
            log.exception("stream failed")
        finally:
            if stream is not None:
                stream[0].end(stream[1])

    async def close(self) -> None:
        """Finish in-flight requests (bounded), then close every connection."""
        self._closing = True
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=SHUTDOWN_GRACE)
        if self._server is not None:
            self._server.close()
            self._server = None
            await asyncio.sleep(0)  # the datagram transport releases its socket on the next tick


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    """Read to end of stream, refusing early when a limit is already broken."""
    chunks: list[bytes] = []
    total = 0
    seen_newline = False
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if not seen_newline:
            seen_newline = b"\n" in chunk
            if not seen_newline and total > MAX_REQUEST_LINE:
                raise BadRequestError(f"the request line exceeds {MAX_REQUEST_LINE} bytes")
        if total > MAX_REQUEST:
            raise BadRequestError(
                "the request is larger than the protocol allows (64 KiB of metadata plus a "
                "1 MiB body); split the document"
            )


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
