"""Row, document and term counts shared by every search, valid for one committed state.

Counting is cheap but not free (a scan of the sections index, a vocabulary probe per term),
and the numbers change only when a write commits. Searches read on their own connections,
each inside its own snapshot, so a cached number may only serve a search whose snapshot
is the state it was counted in.

A commit is bracketed by two bumps of a generation number (odd while it commits). A search
notes the generation, opens its snapshot, and reads the generation again: the same even
number means no commit could land in between, so the counts cached under that generation
describe exactly its snapshot; otherwise it counts for itself and caches nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

MAX_CACHED_COUNTS = 50_000
"""Counts kept between two commits. A read-mostly world sees many questions between writes,
and a hostile caller can bring fresh words every time: past this many entries (each a short
string and an int, about 150 bytes) the cache starts over."""
MAX_CACHED_KEY = 64
"""Keys longer than this many characters are counted afresh every time: no real word is
that long, and caching such keys would let a few long queries hold a lot of memory."""


class CountCache:
    """Counts by key (`("rows", "")`, `("term", form)`, ...) for the current generation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        self._values: dict[tuple[str, str], int] = {}

    def generation(self) -> int:
        """Read before opening a snapshot; pass it to `stable` once the snapshot is open."""
        return self._generation

    def stable(self, before: int) -> int | None:
        """The generation whose counts fit a snapshot opened after `generation()` returned
        `before`, or None when a commit may have landed meanwhile."""
        return before if before == self._generation and before % 2 == 0 else None

    @contextmanager
    def committing(self) -> Iterator[None]:
        """Wrap a COMMIT: counts cached before it, or while it runs, are never served after."""
        self._advance()
        try:
            yield
        finally:
            self._advance()

    def get(self, generation: int | None, key: tuple[str, str]) -> int | None:
        if generation is None:
            return None
        with self._lock:
            if generation != self._generation:
                return None
            return self._values.get(key)

    def put(self, generation: int | None, key: tuple[str, str], value: int) -> None:
        if generation is None or len(key[1]) > MAX_CACHED_KEY:
            return
        with self._lock:
            if generation != self._generation:
                return
            if len(self._values) >= MAX_CACHED_COUNTS:
                self._values = {}
            self._values[key] = value

    def _advance(self) -> None:
        with self._lock:
            self._generation += 1
            self._values = {}
