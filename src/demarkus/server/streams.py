"""The requests a connection is receiving, and the bounds on what they may hold. No I/O.

Each request arrives on its own stream. An `Intake` (one per connection) collects a
stream's bytes until the client finishes it, refuses it as soon as a limit is broken,
and forgets it when its answer is sent. A `Budget` (one per server) holds the totals
over every connection, so that many clients together cannot exceed what one server
may hold.

```
first bytes of a stream        -> a record (refused at once if the connection or the
                                  server is full)
more bytes                     -> kept, or the stream is refused (too large, request
                                  line without a newline, connection or server full)
the client finishes the stream -> the whole request, handed out to be answered
answer sent                    -> the record is gone, its bytes given back
refused, client still sending  -> only its id is kept, to drop what still arrives,
                                  until the client finishes or resets the stream
```

Bytes stay charged until the answer is sent, not only while they arrive: a request
being answered still sits in memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import BadRequestError, DemarkusError, RateLimitedError
from ..protocol import MAX_REQUEST, MAX_REQUEST_LINE

MAX_STREAMS = 128
"""Requests one connection may have at once (being received or answered). The QUIC
layer lets a client open 128 streams at a time and makes it wait for more, so a client
that waits for its answers never meets this bound; it stops one that abandons streams
(STOP_SENDING) and opens new ones while the old ones are still being answered."""
MAX_CONNECTION_BYTES = 4 * MAX_REQUEST
"""Request bytes one connection may hold at once: four full-size publishes (about
4.3 MiB), while small requests (a FETCH is a few dozen bytes) hardly count."""
MAX_SERVER_STREAMS = 1024
"""Requests the whole server may hold at once. The service answers a few at a time
(`service.WORKERS`); beyond this many, more would only wait in its queue."""
MAX_SERVER_BYTES = 32 * MAX_REQUEST
"""Request bytes the whole server may hold at once (about 34 MiB): eight connections
at their own bound, a small share of the memory of the smallest machine that runs a
server."""


@dataclass(slots=True)
class Budget:
    """What every connection of one server holds together."""

    streams: int = 0
    bytes: int = 0


@dataclass(slots=True)
class _Record:
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    newline: bool = False
    complete: bool = False
    """The whole request was handed out; it is being answered."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A stream refused with `error`. `finished`: the client already finished sending it,
    so there is nothing to ask it to stop."""

    error: DemarkusError
    finished: bool


class Intake:
    """One connection's incoming requests, by stream id.

    A stream id it does not know is a new stream: the QUIC layer delivers no data for a
    stream after the client finished or reset it, and a refused stream is remembered
    until then.
    """

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self._records: dict[int, _Record] = {}
        self._refused: set[int] = set()
        """Refused streams the client is still sending on. Bounded by the QUIC layer: such
        a stream stays open there until the client finishes or resets it."""
        self.bytes = 0

    def __len__(self) -> int:
        """Per-stream entries of any kind held now (records and refused ids)."""
        return len(self._records) + len(self._refused)

    @property
    def busy(self) -> int:
        """Requests being received or answered."""
        return len(self._records)

    def knows(self, stream_id: int) -> bool:
        return stream_id in self._records or stream_id in self._refused

    def receive(self, stream_id: int, data: bytes, end: bool) -> bytes | Refusal | None:
        """Take bytes of one stream. Returns the whole request when `end` completes it,
        a `Refusal` when this stream breaks a limit, or None (more to come, or the
        bytes belong to a refused stream and are dropped)."""
        if stream_id in self._refused:
            if end:
                self._refused.discard(stream_id)
            return None
        record = self._records.get(stream_id)
        if record is None:
            full = self._full()
            if full is not None:
                return self.refuse(stream_id, full, end)
            record = self._records[stream_id] = _Record()
            self._budget.streams += 1
        elif record.complete:  # nothing arrives after the end of a stream; ignore it if it does
            return None
        error = self._admit(record, data)
        if error is not None:
            return self.refuse(stream_id, error, end)
        if not end:
            return None
        record.complete = True
        data, record.chunks = b"".join(record.chunks), []
        return data

    def refuse(self, stream_id: int, error: DemarkusError, end: bool) -> Refusal:
        """Refuse a stream: whatever it holds is given back, and whatever still arrives on
        it is dropped until the client finishes (`end`) or resets it."""
        self._release(stream_id)
        if not end:
            self._refused.add(stream_id)
        return Refusal(error, finished=end)

    def expire(self, stream_id: int, error: DemarkusError) -> Refusal | None:
        """Refuse a stream that is still arriving (it took too long); None if it is not."""
        record = self._records.get(stream_id)
        if record is None or record.complete:
            return None
        return self.refuse(stream_id, error, end=False)

    def reset(self, stream_id: int) -> bool:
        """The client abandoned the stream (RESET_STREAM). Returns whether a request that
        was still arriving is gone with it; a complete one is still being answered."""
        self._refused.discard(stream_id)
        record = self._records.get(stream_id)
        if record is None or record.complete:
            return False
        self._release(stream_id)
        return True

    def finish(self, stream_id: int) -> None:
        """The answer was sent (or cannot be): the stream holds nothing any more."""
        self._release(stream_id)

    def close(self) -> None:
        """The connection ended: give everything back."""
        for stream_id in list(self._records):
            self._release(stream_id)
        self._refused.clear()

    def _full(self) -> DemarkusError | None:
        if len(self._records) >= MAX_STREAMS:
            return RateLimitedError(
                f"this connection already has {MAX_STREAMS} requests in flight; wait for "
                "their answers before sending more"
            )
        if self._budget.streams >= MAX_SERVER_STREAMS:
            return RateLimitedError(
                f"the server is answering {MAX_SERVER_STREAMS} requests at once; retry in a few seconds"
            )
        return None

    def _admit(self, record: _Record, data: bytes) -> DemarkusError | None:
        """Keep `data` in `record`, or say which limit it breaks."""
        size = record.size + len(data)
        if not record.newline:
            record.newline = b"\n" in data
            if not record.newline and size > MAX_REQUEST_LINE:
                return BadRequestError(f"the request line exceeds {MAX_REQUEST_LINE} bytes")
        if size > MAX_REQUEST:
            return BadRequestError(
                "the request is larger than the protocol allows (64 KiB of metadata plus a "
                "1 MiB body); split the document"
            )
        if self.bytes + len(data) > MAX_CONNECTION_BYTES:
            return RateLimitedError(
                f"this connection already holds {_mib(self.bytes)} of requests in flight "
                f"(at most {_mib(MAX_CONNECTION_BYTES)}); wait for their answers, then "
                "send this one again"
            )
        if self._budget.bytes + len(data) > MAX_SERVER_BYTES:
            return RateLimitedError(
                f"the server holds {_mib(MAX_SERVER_BYTES)} of requests from all clients, its "
                "limit; send this one again in a few seconds"
            )
        record.chunks.append(data)
        record.size = size
        self.bytes += len(data)
        self._budget.bytes += len(data)
        return None

    def _release(self, stream_id: int) -> None:
        record = self._records.pop(stream_id, None)
        if record is None:
            return
        self.bytes -= record.size
        self._budget.bytes -= record.size
        self._budget.streams -= 1


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"
