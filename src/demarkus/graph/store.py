"""The graph store: observed documents and their outgoing edges in SQLite; backlinks and
neighbourhood queries for `mark_explore` and `mark_backlinks`.

Schema (PRAGMA user_version = 1)::

    nodes(url PK, title, version, observed_at ISO-8601 UTC, gone 0|1)
    edges(source, target, rel, label, anchor, fragment, count)
        PRIMARY KEY (source, target, rel)       -- outgoing: by source
        INDEX edges_by_target (target, source, rel)  -- incoming: by target

An observation replaces the FULL outgoing edge set of its document in one transaction,
so a fresh read always wins and stale links vanish; a seed (an authority's `/graph.md`,
`seed`) does the same for the documents this store has not read itself. Targets need not
be nodes: edges to documents never observed, on other authorities or outside mark:// are
kept as they are.

One connection (WAL, `check_same_thread=False`) guarded by a lock, so the store can be
shared by the threads of one process; another process sees committed observations.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from ..errors import BadRequestError, IntegrityError
from .observe import Edge, node_url

__all__ = [
    "DIRECTIONS",
    "MAX_CURSOR_LENGTH",
    "MAX_EDGES_PER_ROW",
    "MAX_PAGE_SIZE",
    "MAX_RELATIONS",
    "SCHEMA_VERSION",
    "SEEDED_AT",
    "GraphStore",
    "NeighborhoodPage",
    "NeighborhoodRow",
    "Node",
]

SCHEMA_VERSION = 1
DIRECTIONS = ("incoming", "outgoing", "both")
MAX_PAGE_SIZE = 100
MAX_RELATIONS = 20
MAX_EDGES_PER_ROW = 20
MAX_CURSOR_LENGTH = 1024
SEEDED_AT = datetime(1970, 1, 1, tzinfo=UTC)
"""When a node taken from an authority's export (`seed`) counts as observed: never, by
this store; any read of the document itself is later."""

_SCHEMA = """
CREATE TABLE nodes (
    url TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    version INTEGER NOT NULL,
    observed_at TEXT NOT NULL,
    gone INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE edges (
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    rel TEXT NOT NULL,
    label TEXT NOT NULL,
    anchor TEXT NOT NULL,
    fragment TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (source, target, rel)
) WITHOUT ROWID;
CREATE INDEX edges_by_target ON edges (target, source, rel);
"""

_EDGE_COLUMNS = "source, target, rel, label, anchor, fragment, count"


@dataclass(frozen=True, slots=True)
class Node:
    url: str
    title: str
    version: int
    observed_at: datetime
    """When the document was last observed (or, once gone, last observed alive); UTC."""
    gone: bool = False
    """True after `forget`: the document was reported gone or archived."""


@dataclass(frozen=True, slots=True)
class NeighborhoodRow:
    url: str
    """The neighbour: the end of each edge that is not the queried URL."""
    edges: tuple[Edge, ...]
    """Sorted by (source, target, rel); at most MAX_EDGES_PER_ROW."""
    omitted_edges: int
    """Edges with this neighbour left out by the per-row cap."""


@dataclass(frozen=True, slots=True)
class NeighborhoodPage:
    url: str
    """The queried URL, canonical."""
    direction: str
    relations: tuple[str, ...] | None
    """Sorted, de-duplicated filter; None = every relation and plain link."""
    rows: tuple[NeighborhoodRow, ...]
    """Distinct neighbours sorted by URL, after the cursor."""
    total_rows: int
    """Distinct neighbours of the whole query, every page together."""
    remaining_rows: int
    """Neighbours after this page."""
    next_cursor: str | None
    """Pass back as `cursor` for the next page; None on the last page."""


class GraphStore:
    """Observed documents and their edges, persisted in SQLite (None = in memory)."""

    def __init__(self, path: Path | None) -> None:
        """Open (creating when missing) the store at `path`.

        Raises:
            IntegrityError: the file is not a graph store this version can read.
        """
        self.path = path
        self._lock = threading.RLock()  # `bulk` holds it around the writes it joins
        self._seeds: dict[str, tuple[float, str]] = {}
        """Per authority: when its export was last asked for (monotonic seconds), and the
        etag of the export last taken in; kept in memory, so a new process asks once."""
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        target = ":memory:" if path is None else str(path)
        self._conn = sqlite3.connect(target, check_same_thread=False, isolation_level=None)
        try:
            self._conn.execute("PRAGMA busy_timeout = 5000")
            if path is not None:
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = NORMAL")
                # a write inside `bulk` is a savepoint: its undo pages stay in memory, not
                # in a temp file (one document's edges each)
                self._conn.execute("PRAGMA temp_store = MEMORY")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise IntegrityError(
                f"the graph store {path} cannot be read ({exc}); move it aside and the graph "
                "is rebuilt as documents are observed again"
            ) from exc
        except IntegrityError:
            self._conn.close()
            raise

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        if version != 0:
            raise IntegrityError(
                f"the graph store {self.path} has schema version {version}, this demarkus reads "
                f"version {SCHEMA_VERSION}; upgrade demarkus or move the file aside"
            )
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._conn.execute(statement)
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    # --- writes -------------------------------------------------------------------------

    def observe(
        self,
        url: str,
        *,
        title: str,
        version: int,
        edges: Sequence[Edge],
        observed_at: datetime,
    ) -> None:
        """Record the document at `url` and replace its FULL outgoing edge set with `edges`.

        Edges repeating one (target, rel) are merged, their counts added.

        Raises:
            BadRequestError: `url` is a malformed mark:// URL.
            ValueError: an edge's source is not `url`, or `observed_at` is naive.
        """
        source = node_url(url)
        for edge in edges:
            if edge.source != source:
                raise ValueError(f"edge source {edge.source!r} is not the observed {source!r}")
        when = _timestamp(observed_at)
        with self._lock, self._transaction():
            self._replace_outgoing(source, edges)
            self._conn.execute(
                "INSERT INTO nodes (url, title, version, observed_at, gone) VALUES (?, ?, ?, ?, 0) "
                "ON CONFLICT (url) DO UPDATE SET title = excluded.title, "
                "version = excluded.version, observed_at = excluded.observed_at, gone = 0",
                (source, title, version, when),
            )

    def forget(self, url: str) -> None:
        """The document at `url` is gone or archived: drop its outgoing edges, mark it gone.

        Edges from other documents to it stay: those documents still link here.

        Raises:
            BadRequestError: `url` is a malformed mark:// URL.
        """
        source = node_url(url)
        with self._lock, self._transaction():
            self._conn.execute("DELETE FROM edges WHERE source = ?", (source,))
            self._conn.execute("UPDATE nodes SET gone = 1 WHERE url = ?", (source,))

    def seed(self, titles: Mapping[str, str], edges: Iterable[Edge]) -> int:
        """Take in edges an authority published (`export.parse_export`): each of their
        sources gets them as its outgoing set, and each titled node its title, unless this
        store read the document itself (its own read wins: the reference's rule). Seeded
        nodes are recorded as observed at `SEEDED_AT`, so the next seed replaces them.
        Returns the sources taken in."""
        by_source: dict[str, list[Edge]] = {}
        for edge in edges:
            by_source.setdefault(edge.source, []).append(edge)
        when = _timestamp(SEEDED_AT)
        taken = 0
        with self._lock, self._transaction():
            read = {url for (url,) in self._conn.execute("SELECT url FROM nodes WHERE observed_at != ?", (when,))}
            for source in sorted(by_source.keys() - read):
                self._replace_outgoing(source, by_source[source])
                taken += 1
            for url in sorted((titles.keys() | by_source.keys()) - read):
                self._conn.execute(
                    "INSERT INTO nodes (url, title, version, observed_at, gone) VALUES (?, ?, 0, ?, 0) "
                    "ON CONFLICT (url) DO UPDATE SET title = excluded.title, gone = 0",
                    (url, titles.get(url, ""), when),
                )
        return taken

    def seed_due(self, authority: str, now: float, interval: float) -> str | None:
        """Whether `authority`'s export is to be asked for at `now`: None when it was asked
        for less than `interval` seconds ago, else the etag of the one taken in last ("" for
        none), and the ask is recorded, so callers at the same moment do not all ask."""
        with self._lock:
            asked, etag = self._seeds.get(authority, (None, ""))
            if asked is not None and now - asked < interval:
                return None
            self._seeds[authority] = (now, etag)
            return etag

    def seeded(self, authority: str, etag: str) -> None:
        """The export of `authority` with `etag` was taken in (`seed`)."""
        with self._lock:
            asked, _ = self._seeds.get(authority, (0.0, ""))
            self._seeds[authority] = (asked, etag)

    # --- reads --------------------------------------------------------------------------

    def node(self, url: str) -> Node | None:
        """The last observation of `url`, None when it was never observed."""
        with self._lock:
            row = self._conn.execute(
                "SELECT url, title, version, observed_at, gone FROM nodes WHERE url = ?",
                (_query_url(url),),
            ).fetchone()
        if row is None:
            return None
        return Node(row[0], row[1], row[2], datetime.fromisoformat(row[3]), bool(row[4]))

    def titles(self, urls: Iterable[str]) -> dict[str, str]:
        """Title of each observed URL among `urls` that has a non-empty one."""
        wanted = sorted({_query_url(u) for u in urls})
        found: dict[str, str] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                for url, title in self._conn.execute(
                    f"SELECT url, title FROM nodes WHERE url IN ({marks}) AND title != ''", chunk
                ):
                    found[url] = title
        return found

    def outgoing(self, url: str) -> list[Edge]:
        """Edges from `url`, sorted by (target, rel)."""
        return self._edges("WHERE source = ? ORDER BY target, rel", (_query_url(url),))

    def incoming(self, url: str) -> list[Edge]:
        """Edges to `url`, sorted by (source, rel)."""
        return self._edges("WHERE target = ? ORDER BY source, rel", (_query_url(url),))

    def backlinks(self, url: str, *, within: str | None = None) -> list[Edge]:
        """Edges to `url` (typed relations and plain links), sorted by source URL then rel;
        with `within` (a URL such as `mark://host/docs`), only those from under it."""
        if within is None:
            return self.incoming(url)
        clause, params = _within_clause("source", within)
        return self._edges(f"WHERE target = ?{clause} ORDER BY source, rel", (_query_url(url), *params))

    def neighborhood(
        self,
        url: str,
        *,
        direction: str = "both",
        relations: Sequence[str] | None = None,
        page_size: int = 10,
        cursor: str | None = None,
        within: str | None = None,
    ) -> NeighborhoodPage:
        """One page of the distinct neighbours of `url`, sorted by URL, with their edges.

        `direction` is `incoming` (edges to `url`), `outgoing` (edges from it) or `both`
        (the union; a self-loop counts once, as incoming). `relations` keeps only those
        exact predicates, `""` meaning plain body links; None keeps everything. `within`
        (a URL such as `mark://host/docs`) keeps only neighbours at or under it: the
        graph is shared, and a caller confined to a scope sees nothing outside it.

        Raises:
            BadRequestError: bad direction, relations, page size or cursor.
        """
        center = _query_url(url)
        if direction not in DIRECTIONS:
            raise BadRequestError(
                f"direction {direction!r} is not one of incoming, outgoing, both; "
                "call again with one of them (both is the default)"
            )
        rels = _relations_filter(relations)
        if isinstance(page_size, bool) or not isinstance(page_size, int) or not (1 <= page_size <= MAX_PAGE_SIZE):
            raise BadRequestError(f"page_size {page_size!r} is out of range; call again with 1 to {MAX_PAGE_SIZE}")
        identity = _query_identity(center, direction, rels)
        after = None if cursor is None else _decode_cursor(cursor, center, identity)

        query = _Neighbours(center, direction, rels, within)
        with self._lock:
            sql, params = query.page(after, page_size + 1)
            urls = [row[0] for row in self._conn.execute(sql, params)]
            more = len(urls) > page_size
            urls = urls[:page_size]
            total = self._count(query, None)
            remaining = total - self._count(query, urls[-1]) if more else 0
            edges = self._row_edges(center, direction, rels, urls)
        rows = []
        for neighbour in urls:
            found = sorted(edges.get(neighbour, []), key=lambda e: (e.source, e.target, e.rel))
            rows.append(
                NeighborhoodRow(
                    url=neighbour,
                    edges=tuple(found[:MAX_EDGES_PER_ROW]),
                    omitted_edges=max(0, len(found) - MAX_EDGES_PER_ROW),
                )
            )
        return NeighborhoodPage(
            url=center,
            direction=direction,
            relations=rels,
            rows=tuple(rows),
            total_rows=total,
            remaining_rows=remaining,
            next_cursor=_encode_cursor(center, identity, urls[-1]) if more else None,
        )

    def close(self) -> None:
        """Close the database; the store is unusable afterwards. Safe to call twice."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """One transaction around many writes (seeding a world's graph): one commit instead
        of one per document. Other threads wait until it ends; an exception rolls every
        change back."""
        with self._lock, self._transaction():
            yield

    # --- internals ----------------------------------------------------------------------

    def _replace_outgoing(self, source: str, edges: Iterable[Edge]) -> None:
        """`source`'s outgoing edges become `edges` (repeats of one (target, rel) add their
        counts); inside the caller's transaction."""
        self._conn.execute("DELETE FROM edges WHERE source = ?", (source,))
        self._conn.executemany(
            f"INSERT INTO edges ({_EDGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (source, target, rel) DO UPDATE SET count = count + excluded.count",
            [(e.source, e.target, e.rel, e.label, e.anchor, e.fragment, e.count) for e in edges],
        )

    def _transaction(self) -> _Transaction:
        return _Transaction(self._conn)

    def _edges(self, clause: str, params: tuple[object, ...]) -> list[Edge]:
        with self._lock:
            rows = self._conn.execute(f"SELECT {_EDGE_COLUMNS} FROM edges {clause}", params)
            return [Edge(*row) for row in rows]

    def _count(self, query: _Neighbours, upto: str | None) -> int:
        """Distinct neighbours of `query`, only those up to `upto` (inclusive) when given."""
        return sum(sign * self._conn.execute(sql, params).fetchone()[0] for sign, sql, params in query.counts(upto))

    def _row_edges(
        self, center: str, direction: str, rels: tuple[str, ...] | None, urls: list[str]
    ) -> dict[str, list[Edge]]:
        """Edges between `center` and each neighbour in `urls`, keyed by neighbour."""
        by_neighbour: dict[str, list[Edge]] = {}
        if not urls:
            return by_neighbour
        marks = ", ".join("?" * len(urls))
        rel_sql, rel_params = _rel_clause(rels)
        if direction in ("incoming", "both"):
            for row in self._conn.execute(
                f"SELECT {_EDGE_COLUMNS} FROM edges WHERE target = ? AND source IN ({marks}){rel_sql}",
                (center, *urls, *rel_params),
            ):
                edge = Edge(*row)
                by_neighbour.setdefault(edge.source, []).append(edge)
        if direction in ("outgoing", "both"):
            skip_loop = " AND target != ?" if direction == "both" else ""
            loop_params: tuple[str, ...] = (center,) if direction == "both" else ()
            for row in self._conn.execute(
                f"SELECT {_EDGE_COLUMNS} FROM edges WHERE source = ? AND target IN ({marks}){rel_sql}{skip_loop}",
                (center, *urls, *rel_params, *loop_params),
            ):
                edge = Edge(*row)
                by_neighbour.setdefault(edge.target, []).append(edge)
        return by_neighbour


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any exception. Inside an open transaction
    (`GraphStore.bulk`) it is a savepoint of that one: a failed write is undone alone."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.nested = False

    def __enter__(self) -> None:
        self.nested = self.conn.in_transaction
        self.conn.execute("SAVEPOINT write" if self.nested else "BEGIN IMMEDIATE")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.nested:
            self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
            return
        if exc_type is not None:
            self.conn.execute("ROLLBACK TO write")
        self.conn.execute("RELEASE write")


def _within_clause(column: str, within: str) -> tuple[str, tuple[str, ...]]:
    """SQL keeping `column` at `within` or under it (a range, so the index still serves)."""
    base = within.rstrip("/")
    return f" AND ({column} = ? OR ({column} > ? AND {column} < ?))", (base, base + "/", base + "0")


def _query_url(url: str) -> str:
    """Canonical node URL for a query; a malformed mark:// URL is queried as written."""
    try:
        return node_url(url)
    except BadRequestError:
        return url


def _timestamp(when: datetime) -> str:
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError("observed_at must be timezone-aware (use datetime.now(UTC))")
    return when.astimezone(UTC).isoformat()


def _relations_filter(relations: Sequence[str] | None) -> tuple[str, ...] | None:
    if relations is None:
        return None
    if isinstance(relations, str) or not all(isinstance(r, str) for r in relations):
        raise BadRequestError(
            'relations must be a list of predicates such as ["supersedes", ""]; '
            "call again with a list, or without relations for every edge"
        )
    if len(relations) > MAX_RELATIONS:
        raise BadRequestError(
            f"relations lists {len(relations)} predicates, at most {MAX_RELATIONS} are allowed; "
            "call again with fewer, or without relations for every edge"
        )
    return tuple(sorted(set(relations)))


def _rel_clause(rels: tuple[str, ...] | None, alias: str = "") -> tuple[str, tuple[str, ...]]:
    if rels is None:
        return "", ()
    return f" AND {alias}rel IN ({', '.join('?' * len(rels))})", rels


class _Neighbours:
    """SQL for the distinct neighbours of one query, one side (incoming, outgoing) at a time.

    Each side walks its own index in URL order: a page reads about `limit` index entries
    per side. Counting the UNION would sort every neighbour in a temporary B-tree; counting
    each side and subtracting the overlap (neighbours on both sides) is several times faster.
    """

    def __init__(self, center: str, direction: str, rels: tuple[str, ...] | None, within: str | None = None) -> None:
        self.center = center
        self.direction = direction
        self.rels = rels
        self.within = within

    def _inside(self, column: str) -> tuple[str, tuple[str, ...]]:
        return _within_clause(column, self.within) if self.within is not None else ("", ())

    def _sides(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(neighbour column, WHERE clause, parameters) per side of the query."""
        rel_sql, rel_params = _rel_clause(self.rels)
        sides = []
        if self.direction in ("incoming", "both"):
            inside, inside_params = self._inside("source")
            sides.append(("source", f"target = ?{rel_sql}{inside}", (self.center, *rel_params, *inside_params)))
        if self.direction in ("outgoing", "both"):
            inside, inside_params = self._inside("target")
            where, params = f"source = ?{rel_sql}{inside}", (self.center, *rel_params, *inside_params)
            if self.direction == "both":  # the self-loop was met on the incoming side
                where, params = where + " AND target != ?", (*params, self.center)
            sides.append(("target", where, params))
        return sides

    def page(self, after: str | None, limit: int) -> tuple[str, tuple[object, ...]]:
        """The first `limit` neighbours after `after`, by URL."""
        parts: list[str] = []
        params: list[object] = []
        for column, where, side_params in self._sides():
            bound = f" AND {column} > ?" if after is not None else ""
            parts.append(
                f"SELECT * FROM (SELECT DISTINCT {column} AS nb FROM edges WHERE {where}{bound} ORDER BY nb LIMIT ?)"
            )
            params += [*side_params, *([after] if after is not None else []), limit]
        return f"SELECT nb FROM ({' UNION '.join(parts)}) ORDER BY nb LIMIT ?", (*params, limit)

    def counts(self, upto: str | None) -> list[tuple[int, str, tuple[object, ...]]]:
        """(sign, SQL, parameters) whose signed counts add up to the distinct neighbours."""

        def bound(column: str) -> str:
            return f" AND {column} <= ?" if upto is not None else ""

        upto_params: tuple[str, ...] = (upto,) if upto is not None else ()
        queries: list[tuple[int, str, tuple[object, ...]]] = [
            (
                1,
                f"SELECT COUNT(DISTINCT {col}) FROM edges WHERE {where}{bound(col)}",
                (*params, *upto_params),
            )
            for col, where, params in self._sides()
        ]
        if self.direction == "both":
            rel_o, rel_params = _rel_clause(self.rels, "o.")
            rel_i, _ = _rel_clause(self.rels, "i.")
            inside, inside_params = self._inside("o.target")
            overlap = (
                f"SELECT COUNT(DISTINCT o.target) FROM edges o "
                f"WHERE o.source = ?{rel_o}{inside} AND o.target != ?{bound('o.target')} "
                f"AND EXISTS (SELECT 1 FROM edges i WHERE i.target = ? AND i.source = o.target"
                f"{rel_i})"
            )
            params = (
                self.center,
                *rel_params,
                *inside_params,
                self.center,
                *upto_params,
                self.center,
                *rel_params,
            )
            queries.append((-1, overlap, params))
        return queries


# --- cursors ------------------------------------------------------------------------------

_CURSOR = re.compile(r"([0-9a-f]{12}):(.+)", re.DOTALL)
_CURSOR_HINT = "call again without a cursor to start from the first page"


def _query_identity(url: str, direction: str, relations: tuple[str, ...] | None) -> str:
    """12 hex digits of the SHA-256 of JSON {"url", "direction", "relations" (sorted,
    de-duplicated, or null)}, the url without its authority: a cursor reads the same
    whichever port a server listens on (a guard against passing one query's cursor to
    another, not a secret)."""
    listed = list(relations) if relations is not None else None
    query = {"url": _path_of(url), "direction": direction, "relations": listed}
    text = json.dumps(query, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _origin(url: str) -> str:
    """`scheme://authority` of a URL ("" when it has none)."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}" if sep else ""


def _path_of(url: str) -> str:
    origin = _origin(url)
    return url[len(origin) :] if origin else url


def _encode_cursor(center: str, identity: str, after: str) -> str:
    """`<identity>:<last neighbour>`, the neighbour by path when it is on the center's
    authority: short (a model replays it in every later turn; base64 of JSON cost a
    hundred tokens) and the same from run to run."""
    origin = _origin(center)
    if origin and after.startswith(origin + "/"):
        after = after[len(origin) :]
    return f"{identity}:{after}"


def _decode_cursor(cursor: str, center: str, identity: str) -> str:
    """The last URL of the previous page.

    Raises:
        BadRequestError: the cursor is too long, malformed, or belongs to another query.
    """
    if len(cursor) > MAX_CURSOR_LENGTH:
        raise BadRequestError(
            f"cursor is {len(cursor)} characters, longer than any this store hands out "
            f"({MAX_CURSOR_LENGTH}); {_CURSOR_HINT}"
        )
    match = _CURSOR.fullmatch(cursor)
    if match is None:
        raise BadRequestError(f"cursor is malformed; {_CURSOR_HINT}")
    if match.group(1) != identity:
        raise BadRequestError(
            f"cursor belongs to another query (a different url, direction or relations); {_CURSOR_HINT}"
        )
    after = match.group(2)
    return _origin(center) + after if after.startswith("/") else after


def default_graph_path(root: Path | None, authority: str, token: str | None = None) -> Path:
    """Embedded stores keep their graph beside the index; remote authorities under
    DEMARKUS_HOME, one graph per token: what one token's reads taught the graph (titles
    and links of documents only it may read) is never shown to a session with another."""
    from ..tls import demarkus_home

    if root is not None:
        return root / ".demarkus" / "graph.sqlite"
    safe = authority.replace("mark://", "").replace(":", "_").replace("/", "_").replace("[", "").replace("]", "")
    if token:
        safe += "-" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:16]
    return demarkus_home() / "graph" / f"{safe}.sqlite"
