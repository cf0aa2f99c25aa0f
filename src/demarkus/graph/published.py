"""The authority's side of `/graph.md` (`export`): the edges of its current documents, each
document parsed once per version, rendered for one caller from what it may read.

Reading every document's links costs a parse each (seconds for a thousand proposals), so
the first export after a start pays it and later ones parse only the documents whose
version changed. Links are read as if the store were served under a placeholder name
(`HERE`), then written as paths: the authority does not know the name its callers use.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from ..catalog import CatalogEntry
from ..errors import DemarkusError
from ..protocol import SCHEME
from ..store import FileStore
from .export import render_export
from .observe import Edge, observe_document

__all__ = ["PublishedGraph"]

log = logging.getLogger(__name__)

HERE = f"{SCHEME}://here.invalid"
"""The authority's own documents while their links are read (`.invalid` is never a host)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
RENDERED = 8
"""Exports kept: one per set of readable documents (anonymous, each read grant) in use;
at most 8 MiB."""


class PublishedGraph:
    """Edges of a store's current documents by path, kept per version; safe from several
    threads (a document two callers parse at once is parsed twice, and kept once)."""

    def __init__(self, store: FileStore) -> None:
        self._store = store
        self._by_path: dict[str, tuple[int, tuple[Edge, ...]]] = {}
        self._rendered: dict[tuple[int, bytes], bytes] = {}
        """Exports by (catalog generation, the readable paths' digest): callers who may read
        the same documents of an unchanged store get the same bytes without a render."""
        self._lock = threading.Lock()

    def render(
        self, generation: int, entries: Sequence[CatalogEntry], visible: Callable[[str], bool], max_bytes: int
    ) -> bytes:
        """The export of the documents in `entries` (the current ones, as of the catalog's
        `generation`) that `visible` allows: their edges, and the titles their metadata
        gives (as a client's graph records a document it reads)."""
        readable = [entry for entry in entries if visible(entry.path)]
        key = (generation, hashlib.sha256("\n".join(entry.path for entry in readable).encode()).digest())
        with self._lock:
            kept = self._rendered.get(key)
        if kept is not None:
            return kept
        current = {entry.path for entry in entries}
        with self._lock:
            for gone in self._by_path.keys() - current:
                del self._by_path[gone]
        edges = [edge for entry in readable for edge in self._edges(entry.path)]
        titles = {entry.path: entry.metadata.get("title", "") for entry in readable}
        exported = max((entry.modified for entry in readable), default=_EPOCH)
        body = render_export(titles, edges, exported, max_bytes)
        with self._lock:
            for old in [k for k in self._rendered if k[0] != generation]:
                del self._rendered[old]  # of a store that changed since
            if len(self._rendered) >= RENDERED:
                del self._rendered[next(iter(self._rendered))]  # the oldest
            self._rendered[key] = body
        return body

    def _edges(self, path: str) -> tuple[Edge, ...]:
        version = self._store.current_version(path)
        with self._lock:
            kept = self._by_path.get(path)
        if kept is not None and kept[0] == version:
            return kept[1]
        try:
            doc = self._store.read(path)
            found = observe_document(HERE + path, doc.metadata, doc.body)
        except DemarkusError as exc:  # a document that cannot be read now has no edges to tell
            log.warning("the graph export leaves out %s: %s", path, exc)
            return ()
        edges = tuple(local for edge in found if (local := _local(edge)) is not None)
        with self._lock:
            self._by_path[path] = (doc.version, edges)
        return edges


def _local(edge: Edge) -> Edge | None:
    """`edge` with this authority's URLs as paths; None for a link to the web."""
    target = edge.target
    if target.startswith(HERE + "/"):
        target = target[len(HERE) :]
    elif not target.lower().startswith(f"{SCHEME}://"):
        return None
    source = edge.source[len(HERE) :]
    return Edge(source, target, edge.rel, edge.label, edge.anchor, edge.fragment, edge.count)
