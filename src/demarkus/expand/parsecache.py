"""The parsed outline and block starts of document bodies, shared by every lookup in the
process (the MCP server's and the gateway's callers alike).

A version is immutable, so its parse never changes: parsing was two thirds of a budgeted
lookup's time, and the same few documents come back lookup after lookup. Entries are keyed
by the SHA-256 of the body computed here, never by a hash an authority sent, so one world
cannot plant a parse for another's bytes; they hold nothing a caller did not already
fetch. The cache is bounded by the bytes of the bodies it holds and drops the least
recently used first.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..markdown import Outline, parse_blocks

MAX_BYTES = 32 << 20
"""Body bytes the shared cache holds: a few hundred typical documents, and room for
thirty of the largest a store accepts (1 MiB each)."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """One body's outline and the offsets where a long range may be cut."""

    outline: Outline
    cuts: tuple[int, ...]


class ParseCache:
    """Bodies' parses, least recently used dropped first once over `max_bytes`."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, Parsed] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # the gateway's service may run lookups in threads
        self.parses = 0
        """Bodies parsed (cache misses), for the tests and benches."""
        self.hits = 0

    def get(self, body: bytes) -> Parsed:
        """The parse of `body`, from the cache or parsed now.

        Raises:
            BadRequestError: the body is not UTF-8 text (nothing is cached).
        """
        key = hashlib.sha256(body).digest()
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return found
        outline, cuts = parse_blocks(body)  # outside the lock: parses may run side by side
        parsed = Parsed(outline, tuple(cuts))
        with self._lock:
            self.parses += 1
            if len(body) > self.max_bytes or key in self._entries:
                return parsed
            self._entries[key] = parsed
            self._bytes += len(body)
            while self._bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= len(dropped.outline.body)
        return parsed

    def shared(self, body: bytes) -> bytes:
        """The cache's own copy of these bytes when it holds their parse, else `body`: a
        caller keeping a body keeps the one copy every other caller keeps."""
        key = hashlib.sha256(body).digest()
        with self._lock:
            found = self._entries.get(key)
        return found.outline.body if found is not None else body

    def holds(self, body: bytes) -> bool:
        """Whether `body`'s parse is cached (a `get` would not parse)."""
        key = hashlib.sha256(body).digest()
        with self._lock:
            return key in self._entries

    def clear(self) -> None:
        """Forget every parse and the counts."""
        with self._lock:
            self._entries.clear()
            self._bytes = self.parses = self.hits = 0


PARSES = ParseCache()
"""The process's cache."""
