"""Seed a graph from every current document of a store, e.g. right after a world load,
so backlinks and incoming relations are known before any document was explored."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from ..errors import NotFoundError
from ..store import FileStore
from .observe import observe_document
from .store import GraphStore


def seed_graph(
    graph: GraphStore,
    store: FileStore,
    authority: str,
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Observe every current, non-archived document as `authority + path`; returns the count."""
    return observe_paths(graph, store, authority, store.documents(), now=now)


def observe_paths(
    graph: GraphStore,
    store: FileStore,
    authority: str,
    paths: Iterable[str],
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Observe the documents at `paths` as they are now (an archived or missing one is
    forgotten); returns how many are current."""
    seen = 0
    for path in paths:
        url = authority + path
        try:
            doc = store.read(path)
        except NotFoundError:
            graph.forget(url)
            continue
        if doc.archived:
            graph.forget(url)
            continue
        edges = observe_document(url, doc.metadata, doc.body)
        graph.observe(url, title=doc.metadata.get("title", ""), version=doc.version, edges=edges, observed_at=now())
        seen += 1
    return seen
