"""Seed a graph from every current document of a store, e.g. right after a world load,
so backlinks and incoming relations are known before any document was explored.

Given a section index too, each document the index does not hold at its current version
is indexed from the same parse as its links: a world load then parses every document once,
not once for the index and again for the graph (parsing is most of either's cost). That
parse can also be made ahead, in another process (`prepare_world`, while a world load
publishes), and is used only for the very body and metadata it was made from.
"""

from __future__ import annotations

import logging
import multiprocessing
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path

from ..errors import NotFoundError
from ..index import Index
from ..markdown.sections import Outline, Section, outline_from_parse, parse_body
from ..store import FileStore
from ..store.versionfile import sha256_tag
from .observe import Edge, observe_document
from .store import GraphStore

log = logging.getLogger(__name__)


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


@contextmanager
def prepared_aside(world_dir: Path) -> Iterator[Callable[[], Mapping[str, Prepared]]]:
    """`prepare_world` in a second process, while this one publishes the world (publishing
    mostly waits on the disk). The function it yields waits for the parses; when that
    process cannot start or fails it gives none, and the seeding parses for itself. The
    process is killed on the way out, whatever happened."""
    context = multiprocessing.get_context("spawn")  # a fork would copy this process's threads' locks
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=send_prepared_world, args=(world_dir, sender), daemon=True)
    try:
        process.start()
    except OSError as exc:
        log.warning("cannot start a process to parse beside the load (%s); parsing after it", exc)
    finally:
        sender.close()  # its end is the child's alone: the child's exit ends the pipe

    def parsed() -> Mapping[str, Prepared]:
        if process.pid is None:
            return {}
        try:
            found: Mapping[str, Prepared] = receiver.recv()
            return found
        except (EOFError, OSError, pickle.UnpicklingError):  # it failed and sent nothing
            process.join(timeout=10)  # it closed its end on the way out
            log.warning("parsing beside the load failed (exit code %s); parsing after it", process.exitcode)
            return {}

    try:
        yield parsed
    finally:
        receiver.close()
        if process.pid is not None:
            process.kill()
            process.join()


def send_prepared_world(world_dir: Path, connection: Connection) -> None:
    """`prepare_world`, sent over `connection` (a worker process's whole job)."""
    with connection:
        connection.send(prepare_world(world_dir))


def prepare_world(world_dir: Path) -> dict[str, Prepared]:
    """Every document of the frozen world at `world_dir`, prepared at its last version as
    its authority will hold it (runs in a worker process during a world load)."""
    from ..worlds import open_world  # the worlds package is only needed here

    world = open_world(world_dir)
    return {
        doc.path: prepare(world.authority + doc.path, doc.metadata, doc.versions[-1].encode("utf-8"))
        for doc in world.documents()
    }


def seed_graph(
    graph: GraphStore,
    store: FileStore,
    authority: str,
    *,
    index: Index | None = None,
    prepared: Mapping[str, Prepared] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Observe every current, non-archived document as `authority + path` (and bring it
    into `index`, when given); returns the count. `prepared`: parses made ahead, by path."""
    return observe_paths(graph, store, authority, store.documents(), index=index, prepared=prepared, now=now)


def observe_paths(
    graph: GraphStore,
    store: FileStore,
    authority: str,
    paths: Iterable[str],
    *,
    index: Index | None = None,
    prepared: Mapping[str, Prepared] | None = None,
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
            ready = prepared.get(path) if prepared is not None else None
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
