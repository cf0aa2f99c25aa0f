"""The documents one caller's lookups fetched, so the next lookup asks for them with
`if-none-match` and the authority answers `not-modified` without sending the body again,
or, when the lookup's own answer named the etag a held document still has (a row's, or
one a row relates to), does not ask.

Held per caller (one per tool surface: a stdio MCP server, a gateway session), never
shared: a body is reused only for the caller that fetched it, and only after an answer
to that caller's token vouched for it (a `not-modified`, or the lookup naming the
document's etag among those the caller may read). Bounded by the bytes of the bodies
held, least recently used dropped first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from .document import Fetched

MAX_BYTES = 4 << 20
"""Body bytes one caller holds: the documents of several lookups (a lookup fetches at most
ten), and one of the largest a store accepts (1 MiB)."""


@dataclass(frozen=True, slots=True)
class Held:
    """A fetched document and the etag its authority gave it."""

    etag: str
    fetched: Fetched


class HeldDocuments:
    """What a caller fetched, by location, within `max_bytes`."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, Held] = OrderedDict()
        self._bytes = 0
        self.bodies = 0
        """Fetches that transferred a body, for the tests and benches."""
        self.unchanged = 0
        """Fetches answered `not-modified`: the held body was reused."""
        self.current = 0
        """Fetches not sent: the lookup's answer named the held etag."""

    def etag(self, location: str) -> str | None:
        held = self._entries.get(location)
        return held.etag if held is not None else None

    def reuse(self, location: str) -> Fetched:
        """The held document, after the authority said it has not changed."""
        held = self._entries[location]
        self._entries.move_to_end(location)
        self.unchanged += 1
        return held.fetched

    def still(self, location: str, etag: str | None) -> Fetched | None:
        """The held document when `etag`, the one the authority just named for it, is the
        one it was sent with; None otherwise (ask for it)."""
        held = self._entries.get(location)
        if held is None or etag is None or held.etag != etag:
            return None
        self._entries.move_to_end(location)
        self.current += 1
        return held.fetched

    def keep(self, location: str, etag: str | None, fetched: Fetched) -> None:
        """Remember a body the authority sent (without an etag it cannot be asked for again)."""
        self.bodies += 1
        old = self._entries.pop(location, None)
        if old is not None:
            self._bytes -= len(old.fetched.body)
        if not etag or len(fetched.body) > self.max_bytes:
            return
        self._entries[location] = Held(etag, fetched)
        self._bytes += len(fetched.body)
        while self._bytes > self.max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= len(dropped.fetched.body)
