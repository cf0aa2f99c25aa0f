"""What every section-index backend shares: the hit row, the `Index` protocol, and keeping
an index in step with a `FileStore` (`rebuild`, `reconcile`).

The index is derived data. The store is the truth: a crash between a store write and the
index update is repaired at start-up by `reconcile`, which compares the version each
document is indexed at with the store's current version and archived flag.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from ..catalog import Filter
from ..errors import IntegrityError, NotFoundError
from ..markdown import Outline
from ..store import FileStore

log = logging.getLogger("demarkus.index")


@dataclass(frozen=True, slots=True)
class SectionHit:
    """One search result: a section of a document, or the document itself (`anchor == ""`)."""

    path: str
    anchor: str
    """`""` names the document itself: its preamble, a body without headings, or the
    catalog answer (every query term in its title or tags)."""
    heading: str
    """The section's heading text; `""` for a bare-path row."""
    title: str
    tags: tuple[str, ...]
    importance: float
    snippet: str
    """One line, at most 240 bytes of UTF-8, no highlighting markup."""
    score: float
    informative: tuple[int, int] = (0, 0)
    """Of the query's informative words (`query.informative`), how many the row holds and
    how many the query has: how much of what was asked the row is about."""
    telling: tuple[str, ...] = ()
    """The query's informative words, every spelling asked (the same for every row of one
    search): the words a budgeted lookup chooses the sections and paragraphs it prints by."""


class Index(Protocol):
    """A section index: one row per section (plus one bare-path row) of every current,
    non-archived document. Implementations are safe to share between threads."""

    def update(
        self,
        path: str,
        version: int,
        metadata: Mapping[str, str],
        body: bytes,
        modified: datetime,
        *,
        outline: Outline | None = None,
    ) -> int:
        """Replace every row of `path` in one transaction; returns the rows written.
        `outline`: the body's outline (`parse_outline`) when the caller parsed it already."""
        ...

    def remove(self, path: str) -> None:
        """Drop `path` (archived or deleted); a path not indexed is a no-op."""
        ...

    def indexed_versions(self) -> dict[str, int]:
        """Path -> version held, for reconciling with the store."""
        ...

    def search(
        self,
        query: str,
        scope: str,
        *,
        limit: int,
        flt: Filter | None = None,
        visible: Callable[[str], bool] = lambda _path: True,
    ) -> list[SectionHit]:
        """The best rows for a natural-language query, best first."""
        ...

    def bulk(self) -> AbstractContextManager[None]:
        """One transaction around many updates."""
        ...

    def optimize(self) -> None:
        """Merge what many updates left behind: once, after a bulk load; searches are faster
        after it."""
        ...

    def close(self) -> None: ...


def rebuild(index: Index, store: FileStore) -> int:
    """Reindex every current, non-archived document of `store` and drop everything else;
    returns the rows (sections and bare-path rows) indexed."""
    rows = 0
    with index.bulk():
        present = set(store.documents())
        for path in sorted(set(index.indexed_versions()) - present):
            index.remove(path)
        for path in sorted(present):
            rows += _reindex(index, store, path)
    index.optimize()
    return rows


def reconcile(index: Index, store: FileStore) -> int:
    """Bring `index` in step with `store`: index documents that are new or whose current
    version differs, drop removed and archived ones. Returns the documents touched.

    Only version numbers and archived flags are read for documents already in step, so
    this is cheap when nothing drifted.
    """
    wanted = _current_versions(store)
    held = index.indexed_versions()
    touched = 0
    with index.bulk():
        for path in sorted(set(held) - set(wanted)):
            index.remove(path)
            touched += 1
        for path, version in sorted(wanted.items()):
            if held.get(path) != version:
                _reindex(index, store, path)
                touched += 1
    return touched


def _reindex(index: Index, store: FileStore, path: str) -> int:
    try:
        doc = store.read(path)
    except (NotFoundError, IntegrityError) as exc:
        log.warning("not indexing %s: %s", path, exc)
        index.remove(path)
        return 0
    if doc.archived:
        index.remove(path)
        return 0
    return index.update(path, doc.version, doc.metadata, doc.body, doc.modified)


def _current_versions(store: FileStore) -> dict[str, int]:
    """Path -> current version of every non-archived document, from listings (which read
    only the head of each version file)."""
    paths = store.documents()
    archived: dict[str, bool] = {}
    for directory in sorted({posixpath.dirname(p) or "/" for p in paths}):
        try:
            entries = store.list_dir(directory)
        except NotFoundError:
            continue
        for entry in entries:
            if not entry.is_dir:
                archived[posixpath.join(directory, entry.name)] = entry.archived
    out: dict[str, int] = {}
    for path in paths:
        if archived.get(path, False):
            continue
        version = store.current_version(path)
        if version > 0:
            out[path] = version
    return out
