"""Row, document and term counts, and the fields of section rows, shared by every search,
valid for one committed state.

Counting is cheap but not free (a scan of the sections index, a vocabulary probe per term),
reading a few hundred rows' fields by id costs about a tenth of a search, and both change
only when a write commits. Searches read on their own connections, each inside its own
snapshot, so a cached value may only serve a search whose snapshot is the state it was
read in.

A commit is bracketed by two bumps of a generation number (odd while it commits). A search
notes the generation, opens its snapshot, and reads the generation again: the same even
number means no commit could land in between, so the counts cached under that generation
describe exactly its snapshot; otherwise it counts for itself and caches nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

RowFields = tuple[str, str, str, float]
"""A section row's path, anchor, heading and importance."""

MAX_CACHED_COUNTS = 50_000
"""Counts kept between two commits. A read-mostly world sees many questions between writes,
and a hostile caller can bring fresh words every time: past this many entries (each a short
string and an int, about 150 bytes) the cache starts over."""
MAX_CACHED_ROWS = 50_000
"""Rows whose fields (path, anchor, heading, importance: about 250 bytes each) are kept
between two commits; past this many the cache starts over. A search reads the fields of a
few hundred candidates, and the same sections come back question after question."""
MAX_CACHED_KEY = 64
"""Keys longer than this many characters are counted afresh every time: no real word is
that long, and caching such keys would let a few long queries hold a lot of memory."""


class CountCache:
    """Counts by key (`("rows", "")`, `("term", form)`, ...) and row fields by row id, for
    the current generation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        self._values: dict[tuple[str, str], int] = {}
        self._rows: dict[int, RowFields] = {}

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

    def rows(self, generation: int | None, keys: Iterable[int]) -> dict[int, RowFields]:
        """The fields cached for the rows `keys` under `generation` (those it holds)."""
        if generation is None:
            return {}
        with self._lock:
            if generation != self._generation:
                return {}
            held = self._rows
            return {key: held[key] for key in keys if key in held}

    def put_rows(self, generation: int | None, fields: Mapping[int, RowFields]) -> None:
        if generation is None:
            return
        with self._lock:
            if generation != self._generation:
                return
            if len(self._rows) + len(fields) > MAX_CACHED_ROWS:
                self._rows = {}
            self._rows.update(fields)

    def _advance(self) -> None:
        with self._lock:
            self._generation += 1
            self._values = {}
            self._rows = {}
