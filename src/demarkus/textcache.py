"""Values worked out from a text, kept by the text itself (so a text is never read through
another's), bounded by the characters of the texts kept: the least recently used go
first. Any thread may use one: the index searches and the gateway selects in several."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")


class TextCache(Generic[V]):
    """A value per text, at most `max_chars` characters of texts kept."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._entries: OrderedDict[str, V] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> V | None:
        """The value kept for `text` (now the most recently used), None when there is none."""
        with self._lock:
            found = self._entries.get(text)
            if found is not None:
                self._entries.move_to_end(text)
            return found

    def put(self, text: str, value: V) -> None:
        """Keep `value` for `text` unless one is kept already (another thread may have
        worked it out meanwhile), then drop the least recently used past the bound."""
        with self._lock:
            if text in self._entries:
                return
            self._entries[text] = value
            self._chars += len(text)
            while self._chars > self.max_chars:
                dropped, _ = self._entries.popitem(last=False)
                self._chars -= len(dropped)

    def update(self, text: str, value: V) -> None:
        """Replace the value kept for `text`; nothing when it is no longer kept."""
        with self._lock:
            if text in self._entries:
                self._entries[text] = value

    def texts(self) -> list[str]:
        """The texts kept, least recently used first (for the tests)."""
        with self._lock:
            return list(self._entries)
