"""The Mark Protocol client over QUIC: the same `Backend` as the in-process service.

One pooled connection per authority. Reads are retried on transient transport errors
(a bounded number of times, the connection dropped between tries). Writes are sent at
most once: a failure after the first byte was sent is reported as outcome-unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol

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
READ_RETRIES = 5
RETRY_DELAY = 0.1


class _NotSent(Exception):
    """The request never left this process; safe to retry even for writes."""


class Client(VerbMethods):
    """A connection to one authority, e.g. `Client("mark://localhost:6309")`."""

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
        retries: int = READ_RETRIES,
        retry_delay: float = RETRY_DELAY,
    ) -> None:
        self.target: MarkURL = parse_mark_url(url)
        self.token = token
        self._ca, self._insecure = ca, insecure
        self._dial_host = dial_host or self.target.host
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._retries = retries
        self._retry_delay = retry_delay
        self._protocol: QuicConnectionProtocol | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._lock = asyncio.Lock()
        self.requests_sent = 0

    @property
    def authority(self) -> str:
        return self.target.authority

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        stack, self._stack, self._protocol = self._stack, None, None
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()

    async def _connection(self) -> QuicConnectionProtocol:
        async with self._lock:
            if self._protocol is not None:
                return self._protocol
            stack = contextlib.AsyncExitStack()
            config = client_configuration(
                ca=self._ca, insecure=self._insecure, server_name=self.target.host
            )
            try:
                protocol = await asyncio.wait_for(
                    stack.enter_async_context(
                        connect(self._dial_host, self.target.port, configuration=config)
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

    async def _drop(self) -> None:
        await self.close()

    async def request(self, request: Request) -> Response:
        """Send one request and return the authority's answer, whatever its status.

        Raises:
            TransportError: the authority could not be reached after the allowed retries.
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
                await self._drop()
                if is_write:
                    raise OutcomeUnknownError(
                        f"{request.verb.value} {request.path} was sent to {self.authority} but no "
                        "answer arrived; it may or may not have been applied. Fetch the document "
                        "and check its version before retrying."
                    ) from exc
                last = exc
            await self._drop()
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
            reader, writer = await _open_stream(protocol)
        except Exception as exc:  # a dead connection fails before any byte leaves
            raise _NotSent(str(exc)) from exc
        writer.write(data)
        writer.write_eof()
        self.requests_sent += 1
        async with asyncio.timeout(self._timeout):
            raw = await _read_response(reader)
        try:
            return parse_response(raw)
        except BadRequestError as exc:
            raise ConnectionError(f"malformed response from {self.authority}: {exc}") from exc


async def _open_stream(
    protocol: QuicConnectionProtocol,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if protocol._closed.is_set():
        raise ConnectionError("connection closed")
    return await protocol.create_stream()


async def _read_response(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_RESPONSE:
            raise ConnectionError("the response exceeds the protocol's size limits")
    if not chunks:
        raise EOFError("the stream closed without a response")
    return b"".join(chunks)


class ClientPool:
    """One `Client` per authority, created on first use, for callers that span authorities."""

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
