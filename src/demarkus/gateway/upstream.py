"""The worlds as the gateway reaches them: one shared backend per world, a bound on the
upstream requests in flight, and a breaker that fails fast while a world is down.

```
tool call -> ScopedBackend (caller's token) -> Upstream.request
                                                 breaker: open? -> TransportError at once
                                                 gate: a slot overall and for this world,
                                                       waited for at most upstream_wait
                                                 backend.request (QUIC Client or Service)
```
The wait for a slot is bounded by `upstream_wait` (both semaphores together) and is not
counted against the request's own time, which starts once it holds its slot. How long a
request may then take is the QUIC client's business: an authority silent for
`upstream_timeout` is down; one that is up but busy gets `upstream_answer_timeout` per
answer, and a slow answer never tears down the connection the other requests share. A
read also gets at most `deadline` seconds in all, as a safety net.

A transport failure with no success since that request was sent opens the world's
breaker: the reads still in flight to it are abandoned, calls on it fail at once for
`cooldown` seconds, then one probe goes through and its success closes the breaker. Other
worlds keep their own slots (per-world cap), so a dead world cannot hold every slot while
its requests time out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from enum import StrEnum

from ..backend import Backend
from ..errors import OutcomeUnknownError, RateLimitedError, TransportError
from ..protocol import WRITE_VERBS, Request, Response

log = logging.getLogger("demarkus.gateway")

COOLDOWN = 1.0
"""Seconds a world's breaker stays open before it lets one probe through."""


class Gate:
    """At most `limit` upstream requests in flight overall and `per_world` per world; a
    request that cannot get a slot within `wait` seconds is refused."""

    def __init__(self, limit: int, per_world: int, wait: float) -> None:
        self.limit = limit
        self.per_world = per_world
        self.wait = wait
        self._all = asyncio.Semaphore(limit)
        self._worlds: dict[str, asyncio.Semaphore] = {}
        self.in_flight = 0
        self.peak = 0

    def _world(self, world: str) -> asyncio.Semaphore:
        sem = self._worlds.get(world)
        if sem is None:
            sem = self._worlds[world] = asyncio.Semaphore(self.per_world)
        return sem

    async def _take(self, sem: asyncio.Semaphore, what: str, until: float) -> None:
        """Acquire `sem` by loop time `until` (the slot's one deadline for both semaphores)."""
        if self.wait <= 0:
            if sem.locked():
                raise RateLimitedError(self._busy(what))
            await sem.acquire()
            return
        try:
            async with asyncio.timeout_at(until):
                await sem.acquire()
        except TimeoutError:
            raise RateLimitedError(self._busy(what)) from None

    def _busy(self, what: str) -> str:
        waited = f" for {self.wait:g} s" if self.wait > 0 else ""
        return (
            f"the gateway is busy: {what} stayed taken{waited}; "
            "retry in a few seconds, or ask for less (a smaller budget or limit)"
        )

    @contextlib.asynccontextmanager
    async def slot(self, world: str) -> AsyncIterator[None]:
        """Hold one slot for `world` while the body runs.

        Raises:
            RateLimitedError: no slot came free in time.
        """
        world_sem = self._world(world)
        until = asyncio.get_running_loop().time() + self.wait
        await self._take(world_sem, f"all {self.per_world} upstream slots for world {world}", until)
        try:
            await self._take(self._all, f"all {self.limit} upstream slots", until)
        except BaseException:
            world_sem.release()
            raise
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= 1
            self._all.release()
            world_sem.release()


class Health(StrEnum):
    """What the gateway knows of a world, from the requests it sent there."""

    UP = "up"
    """Its last request answered (or it is an embedded store)."""
    DOWN = "down"
    """Its breaker is open: a request failed and none has succeeded since."""
    UNKNOWN = "unknown"
    """No request has gone there yet."""


@dataclass
class Breaker:
    """Closed (requests pass), open (refused until `cooldown` has passed since the last
    failure), half-open (one probe passes; the others are refused until it answers).

    A failure opens the breaker only when no request to the world succeeded since the
    failed one was sent: one slow or lost answer among good ones is not a dead world."""

    world: str
    cooldown: float = COOLDOWN
    clock: Callable[[], float] = time.monotonic
    _failed_at: float | None = None
    _probing: bool = False
    _succeeded_at: float | None = None

    @property
    def open(self) -> bool:
        return self._failed_at is not None

    @property
    def health(self) -> Health:
        if self._failed_at is not None:
            return Health.DOWN
        return Health.UNKNOWN if self._succeeded_at is None else Health.UP

    def admit(self) -> bool:
        """Whether the request may go upstream; True for a probe means the caller must
        report its outcome (it always does: `success` or `failure`).

        Raises:
            TransportError: the world is down and this request is not the probe.
        """
        if self._failed_at is None:
            return False
        since = self.clock() - self._failed_at
        if since >= self.cooldown and not self._probing:
            self._probing = True
            return True
        raise TransportError(
            f"world {self.world} is not answering (its last request failed {since:.1f} s ago); "
            "the gateway keeps trying it: retry in a few seconds. Other worlds are not affected."
        )

    def success(self) -> None:
        self._failed_at = None
        self._probing = False
        self._succeeded_at = self.clock()

    def failure(self, sent: float) -> bool:
        """A request sent at `sent` (this breaker's clock) failed in transport; True when
        that opened the breaker."""
        if self._succeeded_at is not None and self._succeeded_at > sent and not self._probing:
            return False
        opened = self._failed_at is None
        self._failed_at = self.clock()
        self._probing = False
        return opened

    def release_probe(self) -> None:
        """A probe ended without a verdict (cancelled, or refused by the gate)."""
        self._probing = False


RECEIVE_BUFFER = 4 << 20
"""SO_RCVBUF asked for the gateway's QUIC sockets (`Client(receive_buffer=...)`; the kernel
caps it at net.core.rmem_max). The gateway multiplexes many callers' answers (whole
documents) over one connection per world; with the kernel's default buffer (about 208 KiB)
bursts overflow it, and QUIC loss recovery then stalls answers for seconds (the load bench
saw thousands of drops and false "world down" verdicts)."""


class Upstream:
    """One world's backend, shared by every caller; each request carries its caller's token.

    A read gets at most `deadline` seconds in all, counted from when it holds its slot,
    and when the world's breaker opens, the reads still in flight to it are abandoned at
    once (they would only time out one by one); writes keep the client's own at-most-once
    handling and are never abandoned.
    """

    def __init__(
        self, world: str, backend: Backend, gate: Gate, breaker: Breaker | None = None, *, deadline: float | None = None
    ) -> None:
        self.world = world
        self.backend = backend
        self.gate = gate
        self.breaker = breaker or Breaker(world)
        self.deadline = deadline
        self.requests = 0
        self._reads: set[asyncio.Future[Response]] = set()

    async def request(self, request: Request) -> Response:
        """Send one request to the world's authority.

        Raises:
            TransportError: the world is down (its breaker is open) or stopped answering.
            RateLimitedError: no upstream slot came free in time.
        """
        probe = self.breaker.admit()
        settled = False
        try:
            async with self.gate.slot(self.world):
                if not probe and self.breaker.open:  # it went down while this request waited
                    probe = self.breaker.admit()
                self.requests += 1
                sent = self.breaker.clock()
                try:
                    response = await self._send(request)
                except TransportError as exc:
                    if self.breaker.failure(sent):
                        self._abandon_reads()
                    settled = True
                    log.warning("world %s: %s", self.world, exc)
                    raise _world_error(self.world, request, exc) from exc
                self.breaker.success()
                settled = True
                return response
        finally:
            if probe and not settled:
                self.breaker.release_probe()

    async def _send(self, request: Request) -> Response:
        if request.verb in WRITE_VERBS:
            return await self.backend.request(request)
        read = asyncio.ensure_future(self.backend.request(request))
        self._reads.add(read)
        try:
            async with asyncio.timeout(self.deadline):
                return await read
        except TimeoutError:
            raise TransportError(
                f"no answer to {request.verb.value} {request.path} within {self.deadline:g} s"
            ) from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the caller itself was cancelled
            raise TransportError(
                f"{request.verb.value} {request.path} abandoned: the world stopped answering"
            ) from None
        finally:
            self._reads.discard(read)
            read.cancel()

    def _abandon_reads(self) -> None:
        for read in list(self._reads):
            read.cancel()


def _world_error(world: str, request: Request, exc: TransportError) -> TransportError:
    """The caller's message: which world and request, never the authority's internal address."""
    what = f"{request.verb.value} {request.path}"
    if isinstance(exc, OutcomeUnknownError):
        return OutcomeUnknownError(
            f"{what} was sent to world {world} but no answer arrived; it may or may not have been "
            "applied. Fetch the document and check its version before retrying."
        )
    return TransportError(
        f"world {world} did not answer {what}: its authority is unreachable or too slow. "
        "The gateway keeps trying it: retry in a few seconds. Other worlds are not affected."
    )
