"""Seed a graph from every current document of a store, e.g. right after a world load,
so backlinks and incoming relations are known before any document was explored.

Given a section index too, each document the index does not hold at its current version
is indexed from the same parse as its links: a world load then parses every document once,
not once for the index and again for the graph (parsing is most of either's cost).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import nullcontext
from datetime import UTC, datetime

from ..errors import NotFoundError
from ..index import Index
from ..markdown.sections import outline_from_parse, parse_body
from ..store import FileStore
from .observe import observe_document
from .store import GraphStore


def seed_graph(
    graph: GraphStore,
    store: FileStore,
    authority: str,
    *,
    index: Index | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Observe every current, non-archived document as `authority + path` (and bring it
    into `index`, when given); returns the count."""
    return observe_paths(graph, store, authority, store.documents(), index=index, now=now)


def observe_paths(
    graph: GraphStore,
    store: FileStore,
    authority: str,
    paths: Iterable[str],
    *,
    index: Index | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Observe the documents at `paths` as they are now (an archived or missing one is
    forgotten); returns how many are current. With `index`, each current document it
    does not hold at that version is indexed too, in one transaction; what it should drop
    is left to `reconcile`."""
    held = index.indexed_versions() if index is not None else {}
    seen = 0
    with index.bulk() if index is not None else nullcontext():
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
            parsed = parse_body(doc.body, inline=True)
            outline = outline_from_parse(parsed)
            if index is not None and held.get(path) != doc.version:
                index.update(path, doc.version, doc.metadata, doc.body, doc.modified, outline=outline)
            edges = observe_document(url, doc.metadata, doc.body, parsed=(parsed, outline))
            graph.observe(url, title=doc.metadata.get("title", ""), version=doc.version, edges=edges, observed_at=now())
            seen += 1
    return seen
