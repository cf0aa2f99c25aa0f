"""The documents lookups fetched, so the next lookup asks for them with `if-none-match`
and the authority answers `not-modified` without sending the body again, or, when the
lookup's own answer named the etag a held document still has (a row's, or one a row
relates to), does not ask.

Held per tool surface: a stdio MCP server's one caller, or all of a gateway's callers
together (a body one agent fetched is not sent again for the next). A held body is reused
for a caller only after an answer to that caller's own request vouched for it: a
`not-modified` to its token, or its lookup naming the document's etag among those it may
read. A caller that may not read a document is told so by the authority, whoever holds
it. Bounded by the bytes of the bodies held, least recently used dropped first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from .document import Fetched

MAX_BYTES = 4 << 20
"""Body bytes one caller holds: the documents of several lookups (a lookup fetches at most
ten), and one of the largest a store accepts (1 MiB)."""
SHARED_MAX_BYTES = 32 << 20
"""Body bytes a gateway holds for all its callers: the parse cache's size."""


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
        self._lock = threading.Lock()  # shared by a gateway's callers
        self.bodies = 0
        """Fetches that transferred a body, for the tests and benches."""
        self.unchanged = 0
        """Fetches answered `not-modified`: the held body was reused."""
        self.current = 0
        """Fetches not sent: the lookup's answer named the held etag."""

    def etag(self, location: str) -> str | None:
        with self._lock:
            held = self._entries.get(location)
        return held.etag if held is not None else None

    def reuse(self, location: str, etag: str) -> Fetched | None:
        """The document held with `etag`, after the authority said the version with that
        etag has not changed; None when it was dropped or replaced meanwhile (ask again)."""
        with self._lock:
            held = self._entries.get(location)
            if held is None or held.etag != etag:
                return None
            self._entries.move_to_end(location)
            self.unchanged += 1
            return held.fetched

    def still(self, location: str, etag: str | None) -> Fetched | None:
        """The held document when `etag`, the one the authority just named for it, is the
        one it was sent with; None otherwise (ask for it)."""
        with self._lock:
            held = self._entries.get(location)
            if held is None or etag is None or held.etag != etag:
                return None
            self._entries.move_to_end(location)
            self.current += 1
            return held.fetched

    def keep(self, location: str, etag: str | None, fetched: Fetched) -> None:
        """Remember a body the authority sent (without an etag it cannot be asked for again)."""
        with self._lock:
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
