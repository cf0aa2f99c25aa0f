"""Seed a graph from every current document of a store, e.g. right after a world load,
so backlinks and incoming relations are known before any document was explored.

Given a section index too, each document the index does not hold at its current version
is indexed from the same parse as its links: a world load then parses every document once,
not once for the index and again for the graph (parsing is most of either's cost). That
parse can also be made ahead, in worker processes (`Ahead`, while a world load publishes),
and is used only for the very body and metadata it was made from.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime

from ..errors import DemarkusError, NotFoundError
from ..index import Index
from ..markdown.sections import Outline, Section, outline_from_parse, parse_body
from ..store import FileStore
from ..store.versionfile import sha256_tag
from .observe import Edge, observe_document
from .store import GraphStore

log = logging.getLogger(__name__)

RUN = 16
"""Documents per worker task: one pickling round trip a run rather than a document, and
the first runs are back while the publisher still reads the rest."""
MAX_WORKERS = 4
"""Parsing workers at most (one per core up to this): each is a Python interpreter of its
own, tens of megabytes."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """What the seeding takes from one document's parse: its outline's sections and its
    outgoing edges, for exactly the document (`url`), body (`content_hash`) and metadata
    they were read from."""

    url: str
    content_hash: str
    metadata: dict[str, str]
    sections: tuple[Section, ...]
    edges: list[Edge]


def prepare(url: str, metadata: Mapping[str, str], body: bytes) -> Prepared:
    """Parse `body` once, with its inline text: the outline for the index, the links for
    the graph.

    Raises:
        BadRequestError: `body` is not UTF-8, or `url` is not a mark:// URL.
    """
    parsed = parse_body(body, inline=True)
    outline = outline_from_parse(parsed)
    edges = observe_document(url, metadata, body, parsed=(parsed, outline))
    return Prepared(url, sha256_tag(body), dict(metadata), outline.sections, edges)


Run = tuple[str, str, dict[str, str], bytes]
"""One document handed to a worker: path, url, metadata, body."""


class Ahead:
    """Parses made in worker processes while this one publishes a world (a world load):
    the publisher hands each document over as it reads it (`submit`), in runs of `RUN`
    documents, and the seeding takes them back by path (`get`) as they arrive, so the
    seeding starts on the first runs while the last are still being parsed. A parse that
    does not come (a worker failed, or could not start) is None: the seeding then parses
    that document itself. Use it as a context manager: the workers stop on the way out."""

    def __init__(
        self,
        authority: str,
        workers: int | None = None,
        task: Callable[[Sequence[Run]], dict[str, Prepared]] | None = None,
    ) -> None:
        """`workers`: processes (one per core, `MAX_WORKERS` at most, when None); `task`:
        what a worker runs on a run of documents (`prepare_run`; a test gives another)."""
        self._authority = authority
        self._workers = workers if workers is not None else min(MAX_WORKERS, _cores())
        self._task = task if task is not None else prepare_run
        self._pool: ProcessPoolExecutor | None = None
        self._run: list[Run] = []
        self._pending: deque[Future[dict[str, Prepared]]] = deque()
        self._ready: dict[str, Prepared] = {}
        self._failed = False

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, path: str, metadata: Mapping[str, str], body: bytes) -> None:
        """Queue the document at `path` (as its authority will hold it) for parsing."""
        if self._failed:
            return
        self._run.append((path, self._authority + path, dict(metadata), body))
        if len(self._run) >= RUN:
            self._send()

    def get(self, path: str) -> Prepared | None:
        """The parse of the document at `path`, waiting for the runs before it; None when
        it will not come. Each parse is given once (the seeding visits a path once)."""
        self._send()
        while path not in self._ready and self._pending:
            try:
                self._ready.update(self._pending.popleft().result())
            except Exception as exc:  # a dead worker or a fault in one: the seeding parses itself
                self._fail(f"parsing beside the load failed ({exc or type(exc).__name__}); parsing after it")
        return self._ready.pop(path, None)

    def close(self) -> None:
        """Stop the workers; runs not yet started are dropped."""
        self._pending.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _send(self) -> None:
        if not self._run or self._failed:
            return
        run, self._run = self._run, []
        try:
            if self._pool is None:
                # spawn: a fork would copy this process's threads' locks
                self._pool = ProcessPoolExecutor(self._workers, mp_context=multiprocessing.get_context("spawn"))
            self._pending.append(self._pool.submit(self._task, run))
        except (BrokenProcessPool, OSError, RuntimeError) as exc:
            self._fail(f"cannot parse beside the load ({exc}); parsing after it")

    def _fail(self, message: str) -> None:
        log.warning("%s", message)
        self._failed = True
        self._pending.clear()
        self._run = []


def prepare_run(run: Sequence[Run]) -> dict[str, Prepared]:
    """`prepare` for each (path, url, metadata, body) of `run`, by path (a worker's task).
    A document that does not parse is left out: the seeding meets its error itself."""
    found = {}
    for path, url, metadata, body in run:
        try:
            found[path] = prepare(url, metadata, body)
        except DemarkusError:
            continue
    return found


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def seed_graph(
    graph: GraphStore,
    store: FileStore,
    authority: str,
    *,
    index: Index | None = None,
    prepared: Callable[[str], Prepared | None] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Observe every current, non-archived document as `authority + path` (and bring it
    into `index`, when given); returns the count. `prepared`: a parse made ahead, by path
    (`Ahead.get`)."""
    return observe_paths(graph, store, authority, store.documents(), index=index, prepared=prepared, now=now)


def observe_paths(
    graph: GraphStore,
    store: FileStore,
    authority: str,
    paths: Iterable[str],
    *,
    index: Index | None = None,
    prepared: Callable[[str], Prepared | None] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Observe the documents at `paths` as they are now (an archived or missing one is
    forgotten); returns how many are current. With `index`, each current document it
    does not hold at that version is indexed too, in one transaction; what it should drop
    is left to `reconcile`."""
    held = index.indexed_versions() if index is not None else {}
    seen = 0
    with index.bulk() if index is not None else nullcontext(), graph.bulk():
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
            ready = prepared(path) if prepared is not None else None
            if ready is None or (ready.url, ready.content_hash, ready.metadata) != (
                url,
                doc.content_hash,
                doc.metadata,
            ):
                ready = prepare(url, doc.metadata, doc.body)
            outline = Outline(doc.body, ready.sections)
            if index is not None and held.get(path) != doc.version:
                index.update(path, doc.version, doc.metadata, doc.body, doc.modified, outline=outline)
            title = doc.metadata.get("title", "")
            graph.observe(url, title=title, version=doc.version, edges=ready.edges, observed_at=now())
            seen += 1
    return seen
