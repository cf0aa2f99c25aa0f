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

Connecting has bounds of its own, and a failure is known as soon as the network or the
authority tells (see `connection`):

```
nothing listens on the port (refused at once)
    -> tried again quickly, for at most REFUSED_PATIENCE s (an authority restarting refuses
       for a moment), then "nothing is listening"
the handshake ends over the authority's certificate
    -> not retried; the error names --ca and --insecure
no answer to the handshake for `connect_timeout` s
    -> not retried: a second try would wait out the same silence again
```
Every request waiting for a connection shares the one dial in progress, so a dead authority
costs each of them one `connect_timeout` at most, not one per request queued before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path

from ..backend import VerbMethods
from ..errors import BadRequestError, OutcomeUnknownError, TransportError
from ..protocol import (
    WRITE_VERBS,
    MarkURL,
    Request,
    Response,
    encode_request,
    parse_mark_url,
    parse_response,
)
from ..tls import client_configuration, rejects_certificate, trust_advice
from .connection import MarkConnection, Rejected, open_connection

DIAL_TIMEOUT = 10.0
"""Seconds an authority may leave the handshake unanswered before it counts as unreachable
(generous for a distant authority: a handshake takes a couple of round trips)."""
REQUEST_TIMEOUT = 10.0
"""Seconds an authority may stay silent while answers are awaited before its connection
counts as dead (a ping is sent halfway, so a live authority always breaks the silence)."""
ANSWER_TIMEOUT = 60.0
"""Seconds one answer may take from an authority that is up (still sending) but busy."""
READ_RETRIES = 5
"""Tries a read gets on transport failures (a write gets one once a byte has left)."""
RETRY_DELAY = 0.1
"""Seconds before the first retry; each further retry waits twice as long as the last."""
REFUSED_PATIENCE = 1.5
"""Seconds a request keeps re-dialling an authority whose port refuses (by default four tries,
at 0, 0.1, 0.3 and 0.7 s): an authority restarted on the same machine may bind its port again
meanwhile, and "nothing is listening" is still said well within 3 s."""


class _NotSent(Exception):
    """The request never left this process; safe to retry even for writes."""


class _Unreachable(_NotSent):
    """The network said at once that the authority cannot be reached (usually: nothing
    listens on its port). Retried for a short while only."""

    def __init__(self, where: str, cause: OSError) -> None:
        super().__init__(f"{where}: {cause.strerror or type(cause).__name__}")
        self.where = where
        self.refused = isinstance(cause, ConnectionRefusedError)


class _Silent(ConnectionError):
    """The authority sent nothing for the whole silence timeout: the connection is dead."""


class _Slow(TimeoutError):
    """The authority is up but this answer did not complete in time."""


class Client(VerbMethods):
    """A connection to one authority, e.g. `Client("mark://localhost:6309")`.

    `timeout`: seconds the authority may stay silent while an answer is awaited (or a
    connection is set up, `connect_timeout`) before its connection counts as dead. A
    handshake left unanswered for `connect_timeout` is not tried again, so connecting
    costs a request at most `connect_timeout` (plus REFUSED_PATIENCE if the port refused
    first), whatever `retries` is.
    `answer_timeout`: seconds one answer may take while the authority is up.
    `retries`: tries a read gets; `retry_delay`: seconds before the first retry, doubled
    for each further one.
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
        self._dialing: asyncio.Task[MarkConnection] | None = None
        self._closing: set[asyncio.Task[None]] = set()
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
        dialing, self._dialing = self._dialing, None
        if dialing is not None:
            dialing.cancel()
            await asyncio.gather(dialing, return_exceptions=True)
        protocol, self._protocol = self._protocol, None
        if protocol is not None:
            with contextlib.suppress(Exception):
                await protocol.shut()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def _connection(self) -> MarkConnection:
        """The pooled connection, or a new one; callers that arrive while a dial is under
        way share its outcome instead of each dialling in turn."""
        if self._protocol is not None and not self._protocol.closed:
            return self._protocol
        if self._protocol is not None:  # it ended (idle timeout, the authority closed it)
            self._detach(self._protocol)
        if self._dialing is None:
            self._dialing = asyncio.ensure_future(self._dial())
            self._dialing.add_done_callback(self._dialled)
        return await asyncio.shield(self._dialing)  # one caller leaving does not stop it

    def _dialled(self, task: asyncio.Task[MarkConnection]) -> None:
        if self._dialing is task:
            self._dialing = None
        if not task.cancelled():
            task.exception()  # seen: every caller may have left before the dial ended

    async def _dial(self) -> MarkConnection:
        """A new connection with its handshake done, or the reason there is none.

        Raises:
            _Unreachable: every address of the authority refused at once (retried by the caller).
            TransportError: the handshake failed for good (certificate, timeout, unknown host).
        """
        loop = asyncio.get_running_loop()
        host, port = self._dial_host, self.target.port
        tried: list[str] = []
        try:
            async with asyncio.timeout(self._connect_timeout):
                try:
                    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
                except socket.gaierror as exc:
                    raise TransportError(
                        f"the host of {self.authority} could not be resolved ({host}: "
                        f"{exc.strerror}). Check the host name, then retry."
                    ) from exc
                config = client_configuration(ca=self._ca, insecure=self._insecure, server_name=self.target.host)
                unreachable: _Unreachable | None = None
                for family, addr in dict.fromkeys((info[0], info[4]) for info in infos):
                    tried.append(f"{addr[0]} port {port}")
                    try:  # the next address only if this one refused at once
                        self._protocol = await open_connection(config, family, addr, receive_buffer=self.receive_buffer)
                        return self._protocol
                    except OSError as exc:
                        unreachable = _Unreachable(tried[-1], exc)
                assert unreachable is not None  # getaddrinfo returns an address or raises
                raise unreachable
        except TimeoutError:
            where = " and ".join(tried) or f"{host} (still resolving)"
            raise TransportError(
                f"{self.authority} did not answer the QUIC handshake within "
                f"{self._connect_timeout:g} s ({where} sent nothing back). Check that the "
                f"authority is running and that UDP port {port} is reachable from here, then retry."
            ) from None
        except Rejected as exc:
            raise TransportError(self._rejection(exc)) from None

    def _rejection(self, exc: Rejected) -> str:
        if rejects_certificate(exc.error_code):
            return f"{self.authority} presented a certificate this client does not trust ({exc}). " + trust_advice(
                self._ca
            )
        return (
            f"the QUIC handshake with {self.authority} failed: {exc} (QUIC error "
            f"0x{exc.error_code:x}). Check that the address and port belong to a Mark "
            "authority, then retry."
        )

    def _detach(self, protocol: MarkConnection) -> None:
        """Stop using `protocol` (if it is still the current connection) and close it in
        the background: closing waits out QUIC's closing period, which a request that
        fails over to a new connection should not."""
        if self._protocol is not protocol:
            return
        protocol.fail_all(f"the connection to {self.authority} was given up")
        self._protocol = None

        async def close() -> None:
            with contextlib.suppress(Exception):
                await protocol.shut()

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
        loop = asyncio.get_running_loop()
        started = loop.time()
        last: Exception | None = None
        refused_since: float | None = None
        delay = self._retry_delay
        tries = 0
        while tries < self._retries:
            tries += 1
            try:
                return await self._roundtrip(data)
            except _Unreachable as exc:
                last = exc
                refused_since = loop.time() if refused_since is None else refused_since
                if loop.time() + delay - refused_since > REFUSED_PATIENCE:
                    break
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
            if tries < self._retries:
                await asyncio.sleep(delay)
                delay *= 2
        if isinstance(last, _Unreachable):
            raise TransportError(self._unreachable(last, tries, loop.time() - started))
        raise TransportError(
            f"{self.authority} did not answer {request.verb.value} {request.path} after "
            f"{tries} tries ({_cause(last)}). Check that the authority is running and reachable, "
            "then retry."
        )

    def _unreachable(self, exc: _Unreachable, tries: int, seconds: float) -> str:
        tried = f"after {tries} {'try' if tries == 1 else 'tries'} in {seconds:.1f} s"
        if exc.refused:
            return (
                f"nothing is listening at {self.authority} ({exc.where} refused the connection "
                f"{tried}). Check the host and port, start the authority if it is not running "
                "(demarkus serve), then retry."
            )
        return f"{self.authority} cannot be reached ({exc}, {tried}). Check the network and the address, then retry."

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
            # Whatever ended the wait (a timeout, the caller leaving), an answer still
            # arriving is dropped and the authority asked to stop; after a whole answer
            # the stream is already gone and this does nothing.
            protocol.abandon(stream_id)
            if answer.done() and not answer.cancelled():
                answer.exception()  # seen: a failure after the caller left is not "never retrieved"
        try:
            return parse_response(raw)
        except BadRequestError as exc:
            raise ConnectionError(f"malformed response from {self.authority}: {exc}") from exc

    async def _wait(self, protocol: MarkConnection, answer: asyncio.Future[bytes]) -> bytes:
        """The answer, as long as the authority keeps sending and `answer_timeout` holds.

        One timer watches the wait (not `asyncio.wait`'s waiter, set and timer on every
        request): at each check it fails the answer or pings the authority halfway through
        a silence, and sets itself again. Awaited directly, the answer is cancelled if the
        caller leaves; the caller then abandons its stream.

        Raises:
            _Silent: nothing arrived for `timeout` seconds (a ping halfway included).
            _Slow: the authority is up but the answer took longer than `answer_timeout`.
        """
        loop = asyncio.get_running_loop()
        sent = loop.time()
        limit = sent + self._answer_timeout
        timer: asyncio.TimerHandle | None = None

        def check() -> None:
            nonlocal timer
            if answer.done():
                return
            now = loop.time()
            heard = max(protocol.heard, sent)
            if now - heard >= self._timeout:
                answer.set_exception(_Silent(f"{self.authority} sent nothing for {self._timeout:g} s"))
                return
            if now >= limit:
                answer.set_exception(_Slow(f"no answer within {self._answer_timeout:g} s"))
                return
            halfway = heard + self._timeout / 2
            if now >= halfway:
                protocol.poke()
                wake = heard + self._timeout
            else:
                wake = halfway
            timer = loop.call_at(min(wake, limit), check)

        check()
        try:
            return await answer
        finally:
            if timer is not None:
                timer.cancel()


def _cause(exc: BaseException | None) -> str:
    """An exception as the reason in a message: its text, else its kind (a bare
    `TimeoutError()` has no text)."""
    if exc is None:
        return "no try was allowed"
    return str(exc) or type(exc).__name__


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
