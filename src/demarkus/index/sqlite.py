"""The section index on SQLite FTS5 (stdlib `sqlite3`): the embedded default backend.

One file, WAL, schema versioned with `PRAGMA user_version` (a file of another version is
emptied and refilled by `reconcile`)::

    documents(path PK, version, title, tags JSON, importance, modified, metadata JSON)
    sections(id PK, path, anchor, heading, importance)   one row per section + anchor ""
    fts(meta, trail, body)  rowid = sections.id     porter unicode61 remove_diacritics 2
        meta   document title, aliases and tags (the same for every row of a document)
        trail  ancestor headings and the section's own heading
        body   the section's own text after its heading line (to the next heading of
               any level), or for anchor "" the preamble / a body without headings
    catalog(meta)           rowid = the "" row      title, aliases and tags, one per document

Text goes into `fts` and `catalog` with each Chinese, Japanese and Korean character set
apart (`scripts.spaced`), so a word inside such text can be searched for.

A heading with no text of its own (a title straight above its first sub-section) gets no
row: it cannot answer anything itself, and its sub-sections carry it in their trails.
Every document keeps its bare-path row, even when empty, for the catalog answer.

A search takes the question's content words (`query.content_words`), keeps one per
stemmed form, and asks FTS5 for `(t1 OR t2 ...) AND {trail body}: (t1 OR t2 ...)` over
the rarest of them (see `_selective`): any term anywhere, at least one in the section's
own text or headings, so a title-only match does not make every section of a document a
row. The best `Ranking.candidates` rows by BM25 (title/tags, trail and body weighted) are
re-ranked in Python by term coverage and the importance prior (see `query.py`).
Documents whose title, aliases and tags hold every term add their bare-path row (the
catalog answer), ranked with the rest.

Writes go through one connection under a lock; searches read on connections of their own
(`pool.ReaderPool`), each inside one read transaction, so they run in parallel with each
other and with a writer. Every statement's SQL text is one of a small fixed set: row ids
and paths travel as a JSON array parameter read back with `json_each(?)`, so SQLite's
statement cache cannot grow with the queries asked. A damaged file is reported as
`IndexDamagedError`, and `SectionIndex.recreate` replaces it with an empty index.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from ..catalog import CatalogEntry, Filter, derive_title, parse_aliases, parse_importance, parse_tags
from ..errors import BadRequestError, IndexDamagedError
from ..markdown.sections import Outline, parse_outline, shown_title
from ..protocol import MAX_QUERY_TERMS, normalize_scope
from ..textcache import TextCache
from .base import SectionHit
from .counts import MAX_CACHED_KEY, CountCache
from .pool import ReaderPool
from .query import (
    DEFAULT_RANKING,
    Candidate,
    Ranking,
    WordBounds,
    content_words,
    informative,
    match_all,
    match_any,
    quote,
    rank,
    snippet,
    term_weights,
    tokens,
    word_bounds,
    words,
)
from .scripts import spaced

log = logging.getLogger("demarkus.index")

SCHEMA_VERSION = 7
"""Bumped whenever what a file holds changes: its tables, or the rows a body is cut into,
so an index built before is refilled on open rather than kept with rows the parser no
longer makes. 1 lacked `sections.importance`; 2 read a heading after a byte-order mark as
text, and YAML front matter as a heading made of its keys; 3 left a document's aliases
out of its `meta` column; 4 read a heading inside a list item as text; 5 held a run of
Chinese, Japanese or Korean characters as one token (`scripts`); 6 showed the id a
heading gives itself (`## Aims {#goals}`) in its row's heading."""
TOKENIZE = "porter unicode61 remove_diacritics 2"

_SCHEMA = f"""
CREATE TABLE documents (
    path TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    title TEXT NOT NULL,
    tags TEXT NOT NULL,
    importance REAL NOT NULL,
    modified TEXT NOT NULL,
    metadata TEXT NOT NULL
);
CREATE TABLE sections (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    anchor TEXT NOT NULL,
    heading TEXT NOT NULL,
    importance REAL NOT NULL
);
CREATE INDEX sections_path ON sections (path, anchor);
CREATE VIRTUAL TABLE fts USING fts5 (meta, trail, body, tokenize = '{TOKENIZE}');
CREATE VIRTUAL TABLE catalog USING fts5 (meta, tokenize = '{TOKENIZE}');
PRAGMA user_version = {SCHEMA_VERSION};
"""
_TABLES = ("fts", "catalog", "sections", "documents")
_VOCAB = "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, fts, row)"
"""Per connection: term -> rows holding it, for IDF and for choosing the engine's terms."""
_COUNT_ROWS = {table: f"SELECT count(*) FROM {table}" for table in ("sections", "documents")}
_COMPANIONS = ("-wal", "-shm", "-journal")
"""Files SQLite keeps beside the index file; a damaged index goes with them."""
_DAMAGE_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
"""Primary SQLite result codes meaning the file itself is damaged (not busy, not full)."""

FETCH_GROWTH = 4
"""How much more an engine query fetches each time the rows in scope and passing the filter
and visibility check fall short of the rows wanted."""
MAX_FETCH_FACTOR = 64
"""An engine query fetches at most this many times the rows wanted (`Ranking.candidates`,
or the limit when larger): at the defaults, four fetches of 200 to 12,800 rows. FTS5 scores
every matching row on each fetch, so a filter or visibility check that rejects nearly every
row would otherwise rank the whole index again and again and hold every match in memory;
past the bound the search answers with the rows it kept."""


_NONE: frozenset[int] = frozenset()


class _Row(NamedTuple):
    """A candidate row as read from SQLite (a tuple: hundreds are built per search)."""

    key: int
    relevance: float
    path: str
    anchor: str
    heading: str
    importance: float


class _Document(NamedTuple):
    path: str
    title: str
    tags: str
    """JSON list."""
    importance: float
    modified: str
    """ISO 8601."""
    metadata: str
    """JSON object."""

    def entry(self) -> CatalogEntry:
        return CatalogEntry(
            path=self.path,
            title=self.title,
            tags=tuple(json.loads(self.tags)),
            importance=self.importance,
            modified=datetime.fromisoformat(self.modified),
            metadata=json.loads(self.metadata),
        )


class _Snapshot(NamedTuple):
    """Where one search reads: a connection inside a read transaction, and the generation
    of cached counts that describe what it sees (None: count afresh, cache nothing)."""

    db: sqlite3.Connection
    generation: int | None


class SectionIndex:
    """Section search over SQLite FTS5; see the module docstring for the layout.

    Raises (from the constructor, and from any method later):
        IndexDamagedError: the file is not a SQLite database or is damaged; `recreate`
            replaces it with an empty index.
    """

    def __init__(self, path: Path, *, ranking: Ranking = DEFAULT_RANKING) -> None:
        self.path = Path(path)
        self.ranking = ranking
        self._lock = threading.RLock()
        self._depth = 0
        self._writer: int | None = None
        """The thread inside the write transaction: its searches read its own rows."""
        self._counts = CountCache()
        self._views = _Views()
        self._db = self._connect()
        try:
            with self._reported():
                self._check_whole_pages()
                self._db.execute("PRAGMA synchronous = NORMAL")
                self._ensure_schema()
                self._db.execute(_VOCAB)
                # reading a table now reports a damaged file at start-up, not mid-request
                self._db.execute("SELECT count(*) FROM documents").fetchone()
        except BaseException:
            self._db.close()
            raise
        self._readers = ReaderPool(self._open_reader)
        self._stemmer = _Stemmer()

    @classmethod
    def recreate(cls, path: Path, *, ranking: Ranking = DEFAULT_RANKING) -> SectionIndex:
        """Delete the index file at `path` (damaged or not) with the `-wal`, `-shm` and
        `-journal` files SQLite keeps beside it, and open a fresh, empty index there;
        `rebuild` refills it from the store. Every index open on the file, in any process,
        must be closed first: one left open goes on using the deleted file."""
        path = Path(path)
        for name in (path.name, *(path.name + suffix for suffix in _COMPANIONS)):
            path.with_name(name).unlink(missing_ok=True)
        return cls(path, ranking=ranking)

    # --- lifecycle ------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        try:
            with self._reported():
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA temp_store = MEMORY")
        except BaseException:
            db.close()
            raise
        return db

    def _open_reader(self) -> sqlite3.Connection:
        db = self._connect()
        try:
            with self._reported():
                db.execute(_VOCAB)
                db.execute("PRAGMA query_only = ON")
        except BaseException:
            db.close()
            raise
        return db

    def _check_whole_pages(self) -> None:
        """SQLite writes whole pages, so a file ending inside one was cut short (a copy
        stopped midway, a full disk), and SQLite would read the missing bytes as zeros.
        A write-ahead log with frames in it may still complete the file: then SQLite judges."""
        wal = self.path.with_name(self.path.name + "-wal")
        if wal.exists() and wal.stat().st_size:
            return
        size = self.path.stat().st_size
        (page,) = self._db.execute("PRAGMA page_size").fetchone()
        if size % page:
            raise self._damaged(f"its {size} bytes end inside a page of {page}")

    @contextmanager
    def _reported(self) -> Iterator[None]:
        """Let SQLite's word that the file is damaged out as `IndexDamagedError`."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if exc.sqlite_errorcode & 0xFF not in _DAMAGE_CODES:
                raise
            raise self._damaged(str(exc)) from exc

    def _damaged(self, detail: str) -> IndexDamagedError:
        return IndexDamagedError(
            f"the section index {self.path} is damaged ({detail}). It holds only data "
            "derived from the store, so nothing is lost: with no server running on the store, "
            "run `demarkus index rebuild --root STORE` (STORE: the store directory) to "
            "recreate it; until then LOOKUP match=body cannot answer"
        )

    def _ensure_schema(self) -> None:
        """Create the tables; a file of another schema version is emptied first (the index
        is derived data: `reconcile` refills it from the store)."""
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        if version:
            log.warning(
                "section index %s has schema %d, this version uses %d; rebuilding it",
                self.path,
                version,
                SCHEMA_VERSION,
            )
        with self._transaction():  # the constructor reports damage
            for name in _TABLES:
                self._db.execute(f"DROP TABLE IF EXISTS {name}")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)

    def close(self) -> None:
        """Close every connection; the object is unusable afterwards. A search still
        running keeps its connection until it ends."""
        with self._lock:
            with suppress(sqlite3.Error):
                self._db.execute("PRAGMA optimize")
            self._db.close()
            self._readers.close()
            self._stemmer.close()

    def __enter__(self) -> SectionIndex:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """One transaction around many updates (a world load, a rebuild). Other writers
        wait until it ends, searches meanwhile see the index as it was before it; an
        exception rolls every change back."""
        with self._lock, self._transaction():
            yield

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """The write transaction; nested ones join the outermost. Its body reports damage
        itself (`_reported`), so an error of the caller's own inside `bulk` stays as it is."""
        with self._lock:
            outer = self._depth == 0
            if outer:
                with self._reported():
                    self._db.execute("BEGIN IMMEDIATE")
                self._writer = threading.get_ident()
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer:
                    self._writer = None
                    with self._reported():
                        self._db.execute("ROLLBACK")
                raise
            self._depth -= 1
            if outer:
                self._writer = None
                with self._reported():
                    try:
                        with self._counts.committing():
                            self._db.execute("COMMIT")
                    except BaseException:
                        if self._db.in_transaction:  # a failed COMMIT leaves it open
                            self._db.execute("ROLLBACK")
                        raise

    @contextmanager
    def _reading(self) -> Iterator[_Snapshot]:
        """One consistent view for a search. A thread inside its own write transaction
        reads through the write connection (and sees its own rows); any other borrows a
        read connection and holds one read transaction, so a commit landing meanwhile
        changes nothing it reads."""
        with self._reported():
            if self._writer == threading.get_ident():
                yield _Snapshot(self._db, None)
                return
            with self._readers.borrow() as db:
                before = self._counts.generation()
                db.execute("BEGIN")
                try:
                    db.execute("PRAGMA user_version")  # opens the read transaction's snapshot
                    yield _Snapshot(db, self._counts.stable(before))
                finally:
                    with suppress(sqlite3.Error):  # failing, it leaves the pool
                        db.execute("ROLLBACK")

    # --- writes ---------------------------------------------------------------------------

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
        """Replace every row of `path`; returns the rows written (its sections plus the
        bare-path row). `outline`: the body's outline when the caller parsed it already.

        Raises:
            BadRequestError: `body` is not UTF-8.
        """
        title = derive_title(path, metadata, body)
        tags = parse_tags(metadata.get("tags"))
        meta_text = spaced("\n".join((title, *parse_aliases(metadata), *tags)))
        rows = section_rows(body, outline)
        importance = parse_importance(metadata.get("importance"))
        with self._transaction(), self._reported():
            self._delete(path)
            self._db.execute(
                "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    path,
                    version,
                    title,
                    json.dumps(list(tags)),
                    importance,
                    modified.isoformat(),
                    json.dumps(dict(metadata), sort_keys=True),
                ),
            )
            for anchor, heading, trail_text, text in rows:
                cursor = self._db.execute(
                    "INSERT INTO sections (path, anchor, heading, importance) VALUES (?, ?, ?, ?)",
                    (path, anchor, heading, importance),
                )
                self._db.execute(
                    "INSERT INTO fts (rowid, meta, trail, body) VALUES (?, ?, ?, ?)",
                    (cursor.lastrowid, meta_text, spaced(trail_text), spaced(text)),
                )
                if not anchor:
                    self._db.execute(
                        "INSERT INTO catalog (rowid, meta) VALUES (?, ?)",
                        (cursor.lastrowid, meta_text),
                    )
        return len(rows)

    def remove(self, path: str) -> None:
        """Drop every row of `path`; a path not indexed is a no-op."""
        with self._transaction(), self._reported():
            self._delete(path)

    def _delete(self, path: str) -> None:
        # a path with no rows (every path of a fresh index) asks FTS5 nothing: a query on
        # an FTS5 table first writes out the rows inserted in this transaction, so asking
        # would cut a bulk load's segments into one per document
        if self._db.execute("SELECT 1 FROM sections WHERE path = ? LIMIT 1", (path,)).fetchone() is None:
            self._db.execute("DELETE FROM documents WHERE path = ?", (path,))
            return
        for table in ("fts", "catalog"):
            self._db.execute(
                f"DELETE FROM {table} WHERE rowid IN (SELECT id FROM sections WHERE path = ?)",
                (path,),
            )
        self._db.execute("DELETE FROM sections WHERE path = ?", (path,))
        self._db.execute("DELETE FROM documents WHERE path = ?", (path,))

    def optimize(self) -> None:
        """Merge the FTS5 b-trees into one: slower now, faster searches later (on peps 0.1 s,
        then about 5 % off a search)."""
        with self._transaction(), self._reported():
            self._db.execute("INSERT INTO fts (fts) VALUES ('optimize')")

    # --- reads ----------------------------------------------------------------------------

    def indexed_versions(self) -> dict[str, int]:
        with self._reading() as snap:
            return dict(snap.db.execute("SELECT path, version FROM documents"))

    def search(
        self,
        query: str,
        scope: str,
        *,
        limit: int,
        flt: Filter | None = None,
        visible: Callable[[str], bool] = lambda _path: True,
    ) -> list[SectionHit]:
        """The best rows for `query` under `scope`, best first, at most `limit`.

        `query` is natural language: stop words and 1-character words are dropped, any
        other text (quotes, `*`, `NEAR`, `-`, `:`) is only ever searched for as words.
        `flt` and `visible` drop rows before the limit applies; when they reject nearly
        every matching row, fewer than `limit` rows may come back (see `MAX_FETCH_FACTOR`).

        Raises:
            BadRequestError: the query has more than `MAX_QUERY_TERMS` distinct words.
        """
        asked = content_words(query)
        if len(asked) > MAX_QUERY_TERMS:
            raise BadRequestError(
                f"the query has {len(asked)} distinct words (stop words aside); body search "
                f"takes at most {MAX_QUERY_TERMS}: keep the words that name what you are "
                "looking for and ask again"
            )
        if limit < 1:
            return []
        scope = normalize_scope(scope)
        terms = self._terms(asked)
        if not terms:
            return []
        with self._reading() as snap:
            rows = self._row_count(snap)
            counts = self._term_counts(snap, terms)
            weights = term_weights(rows, counts, len(terms))
            selective = _selective(terms, counts, rows, self.ranking)
            judge = _Judge(flt, visible, lambda paths: self._documents_for(snap, paths))
            found: dict[int, _Row] = {}
            any_expr = match_any(selective)
            candidate_expr = f"({any_expr}) AND {match_any(selective, ('trail', 'body'))}"
            narrow = scope != "/" and self._narrow(snap, scope)
            for row in self._candidates(snap, candidate_expr, scope, narrow, judge, catalog=False, limit=limit):
                found[row.key] = row
            for row in self._candidates(snap, match_all(terms), scope, narrow, judge, catalog=True, limit=limit):
                if row.key not in found or found[row.key].relevance < row.relevance:
                    found[row.key] = row
            if not found:
                return []
            matched = self._matched(snap, terms, selective, counts, rows, list(found))
            ranked = rank(
                [  # positional: a few hundred are built per search
                    Candidate(row.key, row.path, row.anchor, row.relevance, row.importance, matched.get(row.key, _NONE))
                    for row in found.values()
                ],
                weights,
                self.ranking,
                limit=limit,
            )
            telling = informative(rows, counts, len(terms), self.ranking)
            spelled = self._spellings(asked, terms, telling)
            snippets = self._snippets(snap, terms, [c.key for _, c in ranked])
            documents = self._documents_for(snap, {c.path for _, c in ranked})
        hits = []
        for value, candidate in ranked:
            row = found[candidate.key]
            doc = documents[row.path]
            hits.append(
                SectionHit(
                    path=row.path,
                    anchor=row.anchor,
                    heading=row.heading,
                    title=doc.title,
                    tags=tuple(json.loads(doc.tags)),
                    importance=doc.importance,
                    snippet=snippets.get(row.key, ""),
                    score=value,
                    informative=(len(candidate.matched & telling), len(telling)),
                    telling=spelled,
                )
            )
        return hits

    def _terms(self, words: Sequence[str]) -> list[str]:
        """Words that index to at least one token, one per distinct stemmed form."""
        out: list[str] = []
        seen: set[tuple[str, ...]] = set()
        for word, stems in zip(words, self._stemmer.stems(words), strict=True):
            if stems and stems not in seen:
                seen.add(stems)
                out.append(word)
        return out

    def _spellings(self, asked: Sequence[str], terms: Sequence[str], telling: AbstractSet[int]) -> tuple[str, ...]:
        """The asked words whose term (`terms`: one word per stemmed form) is in `telling`:
        `transactions` with `transaction`, as the index matches them."""
        index_of = {stems: i for i, stems in enumerate(self._stemmer.stems(terms))}
        return tuple(
            word
            for word, stems in zip(asked, self._stemmer.stems(asked), strict=True)
            if index_of.get(stems) in telling
        )

    def _candidates(
        self, snap: _Snapshot, expr: str, scope: str, narrow: bool, judge: _Judge, *, catalog: bool, limit: int
    ) -> list[_Row]:
        """Up to `ranking.candidates` (at least `limit`) rows matching `expr`, best BM25
        first, that are in scope and pass the filter and the visibility check (`narrow`:
        restrict to the scope in SQL, see `_narrow`). `catalog`
        searches the one-row-per-document title/tags table (its BM25 scaled by the title
        weight) instead of the sections."""
        r = self.ranking
        if catalog:
            inner = "SELECT rowid AS id, -bm25(catalog) * ? AS relevance FROM catalog WHERE catalog MATCH ?"
            params: list[object] = [r.title_weight, expr]
        else:
            inner = "SELECT rowid AS id, -bm25(fts, ?, ?, ?) AS relevance FROM fts WHERE fts MATCH ?"
            params = [r.title_weight, r.trail_weight, r.body_weight, expr]
        if narrow:
            # unary + keeps SQLite from probing FTS5 once per id: one scan, then a set test
            inner += " AND +rowid IN (SELECT id FROM sections WHERE path = ? OR (path > ? AND path < ?))"
            params += [scope, scope + "/", scope + "0"]  # "0" sorts right after "/"
        sql = f"{inner} ORDER BY relevance DESC, rowid LIMIT ?"
        want = max(r.candidates, limit)
        most = want * MAX_FETCH_FACTOR
        fetch = want
        while True:
            rows = self._rows(snap, snap.db.execute(sql, [*params, fetch]).fetchall())
            inside = rows if scope == "/" else [row for row in rows if _inside(row.path, scope)]
            verdicts = judge.prepare({row.path for row in inside})
            kept = [row for row in inside if verdicts[row.path]]
            if len(kept) >= want or len(rows) < fetch or fetch >= most:
                return kept[:want]
            fetch = min(fetch * FETCH_GROWTH, most)

    def _rows(self, snap: _Snapshot, ranked: Sequence[tuple[int, float]]) -> list[_Row]:
        """The engine's (id, relevance) pairs, in their order, with their sections' fields:
        those not cached for this snapshot's generation in one lookup (joining inside the
        engine query cost more)."""
        fields = self._counts.rows(snap.generation, (key for key, _ in ranked))
        missing = [key for key, _ in ranked if key not in fields]
        if missing:
            fresh = {
                raw[0]: raw[1:]
                for raw in snap.db.execute(
                    "SELECT id, path, anchor, heading, importance FROM sections"
                    " WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps(missing),),
                )
            }
            self._counts.put_rows(snap.generation, fresh)
            fields.update(fresh)
        return [_Row(key, relevance, *fields[key]) for key, relevance in ranked if key in fields]

    def _narrow(self, snap: _Snapshot, scope: str) -> bool:
        """True when the scope holds under half the documents: then SQL restricts the rows
        before ranking; a wide scope is cheaper to filter afterwards (fetching more if
        too many rows fall outside it)."""
        inside = self._counts.get(snap.generation, ("scope", scope))
        if inside is None:
            inside = snap.db.execute(
                "SELECT count(*) FROM documents WHERE path = ? OR (path > ? AND path < ?)",
                (scope, scope + "/", scope + "0"),
            ).fetchone()[0]
            self._counts.put(snap.generation, ("scope", scope), inside)
        return inside * 2 < self._count(snap, "documents")

    def _documents_for(self, snap: _Snapshot, paths: Collection[str]) -> dict[str, _Document]:
        """The stored fields of each document named."""
        return {
            raw[0]: _Document._make(raw)
            for raw in snap.db.execute(
                "SELECT path, title, tags, importance, modified, metadata FROM documents"
                " WHERE path IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(paths)),),
            )
        }

    def _matched(
        self,
        snap: _Snapshot,
        terms: Sequence[str],
        selective: Sequence[str],
        counts: Mapping[int, int],
        rows: int,
        keys: Sequence[int],
    ) -> dict[int, frozenset[int]]:
        """Row id -> indexes of the terms found anywhere in that row: one FTS5 match per
        term, each kept to the candidate rows. A term of one token that every one of the
        index's `rows` holds (`counts`: a tag's key such as `status`, or a world's own
        name in every title) is in every candidate: reading its list, the longest there
        is, would only say so.

        Every candidate holds one of the `selective` terms somewhere (a catalog row holds
        them all in its title), so a term left out of the engine query may be matched
        together with them: FTS5 then walks the rows those hold and skips through the
        term's own list instead of reading all of it. FTS5 advances an OR of k terms by
        comparing all k at each of their rows, so that walk costs about k times their rows
        (`counts`: rows per term); it is taken only for a term whose own list is longer
        than that. The rows kept are the same either way. (Taken for every term, a
        question of a dozen words cost a quarter more than reading the lists.)"""
        either = match_any(selective)
        asked = set(selective)
        walk = sum(counts[i] for i, term in enumerate(terms) if term in asked)
        everywhere = [i for i, forms in enumerate(self._stemmer.stems(terms)) if len(forms) == 1 and counts[i] >= rows]
        read = [i for i in range(len(terms)) if i not in everywhere]
        exprs = [
            f"{quote(terms[i])} AND ({either})"
            if terms[i] not in asked and counts[i] > walk * len(asked)
            else quote(terms[i])
            for i in read
        ]
        out: dict[int, list[int]] = {key: list(everywhere) for key in keys} if everywhere else {}
        if exprs:
            for position, key in snap.db.execute(
                "SELECT terms.key, fts.rowid FROM json_each(?) AS terms CROSS JOIN fts"
                " WHERE fts MATCH terms.value AND +fts.rowid IN (SELECT value FROM json_each(?))",
                (json.dumps(exprs), json.dumps(list(keys))),
            ):
                out.setdefault(key, []).append(read[position])
        return {key: frozenset(indexes) for key, indexes in out.items()}

    def _term_counts(self, snap: _Snapshot, terms: Sequence[str]) -> dict[int, int]:
        """Term index -> rows containing it in any column, from the FTS5 vocabulary (a
        word that splits into several tokens counts as its rarest token)."""
        out: dict[int, int] = {}
        for i, forms in enumerate(self._stemmer.stems(terms)):
            counts = []
            for form in forms:
                held = self._counts.get(snap.generation, ("term", form))
                if held is None:
                    got = snap.db.execute("SELECT doc FROM temp.vocab WHERE term = ?", (form,))
                    row = got.fetchone()
                    held = row[0] if row else 0
                    self._counts.put(snap.generation, ("term", form), held)
                counts.append(held)
            out[i] = min(counts, default=0)
        return out

    def _row_count(self, snap: _Snapshot) -> int:
        return self._count(snap, "sections")

    def _count(self, snap: _Snapshot, table: str) -> int:
        """Rows of `sections` or `documents`, cached between commits."""
        held = self._counts.get(snap.generation, ("rows", table))
        if held is None:
            held = snap.db.execute(_COUNT_ROWS[table]).fetchone()[0]
            self._counts.put(snap.generation, ("rows", table), held)
        return held

    def _snippets(self, snap: _Snapshot, terms: Sequence[str], keys: Sequence[int]) -> dict[int, str]:
        """Row id -> snippet of its text around the query's words (matched through the
        index's own tokenizer, so `releases` lights up for `release`)."""
        if not keys:
            return {}
        wanted = {stem for stems in self._stemmer.stems(terms) for stem in stems}
        shown = [
            (key, text, self._views.get(text))
            for key, text in snap.db.execute(
                "SELECT fts.rowid, fts.body FROM json_each(?) AS keys CROSS JOIN fts ON fts.rowid = keys.value",
                (json.dumps(list(keys)),),
            )
        ]
        hits = self._stemmer.matching([view.distinct for _, _, view in shown], wanted)
        return {
            key: snippet(text, hit, split=view.split, bounds=view.bounds)
            for (key, text, view), hit in zip(shown, hits, strict=True)
        }


def section_rows(body: bytes, outline: Outline | None = None) -> list[tuple[str, str, str, str]]:
    """The rows one document gets, as (anchor, heading, trail, text): the bare-path row
    (anchor "", the preamble), then each section with text of its own (see the module
    docstring). The heading is shown as a site shows it (`sections.shown_title`); the
    trail, which is searched, keeps the id a heading gives itself. `outline` is
    `parse_outline(body)`, parsed now when not given."""
    if outline is None:
        outline = parse_outline(body)
    rows: list[tuple[str, str, str, str]] = [("", "", "", _text(outline.preamble))]
    titles: dict[str, str] = {}
    parents: dict[str, str | None] = {}
    for section in outline.sections:
        titles[section.anchor] = section.title
        parents[section.anchor] = section.parent
        trail: list[str] = [section.title]
        up = section.parent
        while up is not None:
            trail.append(titles[up])
            up = parents[up]
        text = _text(body[section.heading_end : section.own_end])
        if text.strip():
            rows.append((section.anchor, shown_title(section.title), "\n".join(reversed(trail)), text))
    return rows


def _inside(path: str, scope: str) -> bool:
    """`protocol.in_scope` for a scope already normalised."""
    return scope == "/" or path == scope or path.startswith(scope + "/")


def _selective(terms: Sequence[str], counts: Mapping[int, int], rows: int, ranking: Ranking) -> list[str]:
    """The terms worth asking the engine for, taken rarest first. FTS5 scores every row a
    query matches, so common terms (in more than `common_share` of the rows) and terms
    beyond the first `engine_rows` matched rows cost the most and tell rows apart the
    least: they only count toward coverage -- as long as the terms taken match
    `candidates` rows. Terms the index does not hold are left out."""
    present = sorted((i for i in range(len(terms)) if counts[i] > 0), key=lambda i: (counts[i], i))
    taken: list[int] = []
    matched = 0
    for i in present:
        if matched >= ranking.candidates and (
            counts[i] > ranking.common_share * rows or matched >= ranking.engine_rows
        ):
            break
        taken.append(i)
        matched += counts[i]
    return [terms[i] for i in sorted(taken)] or list(terms)


class _Judge:
    """Filter and visibility, judged once per document; the filter needs the stored
    document fields, loaded in batches only when there is a filter."""

    def __init__(
        self,
        flt: Filter | None,
        visible: Callable[[str], bool],
        load: Callable[[Collection[str]], dict[str, _Document]],
    ) -> None:
        # a filter without clauses accepts every document: skip loading them
        self._flt = flt if flt is not None and flt != Filter() else None
        self._visible = visible
        self._load = load
        self._verdicts: dict[str, bool] = {}

    def prepare(self, paths: Collection[str]) -> Mapping[str, bool]:
        """Judge every path not judged yet (one query for the filter's documents); every
        verdict so far, by path."""
        fresh = [p for p in paths if p not in self._verdicts]
        if not fresh:
            return self._verdicts
        documents = self._load(fresh) if self._flt is not None else {}
        for path in fresh:
            verdict = True
            if self._flt is not None:
                doc = documents.get(path)
                verdict = doc is not None and self._flt.accepts(doc.entry())
            self._verdicts[path] = verdict and bool(self._visible(path))
        return self._verdicts

    def __call__(self, path: str) -> bool:
        if path not in self._verdicts:
            self.prepare([path])
        return self._verdicts[path]


VIEW_CACHE_CHARS = 1 << 20
"""Characters of section text whose words `_Views` keeps (the words and their offsets take
about fifteen times the text's size in memory: some 15 MiB in all): a few hundred
sections, the ones question after question shows."""


class _View(NamedTuple):
    """A section text's words in order and as a set, and (once the text is read again)
    where each word lies, as a snippet reads them."""

    split: tuple[str, ...]
    distinct: frozenset[str]
    bounds: WordBounds | None


class _Views:
    """The `_View` of each section text a search shows: the same rows come back search
    after search, and reading their words for the snippets (splitting them, then walking
    each to its window) was about a seventh of a search. Keyed by the text itself, so
    a text is never read through another's words; the least recently used go first once
    over `VIEW_CACHE_CHARS`, and a text larger than a tenth of that is split every time.
    Offsets are found only for a text read a second time: a text seen once costs what it
    cost before."""

    def __init__(self, max_chars: int = VIEW_CACHE_CHARS) -> None:
        self.max_chars = max_chars
        self._kept: TextCache[_View] = TextCache(max_chars)

    def get(self, text: str) -> _View:
        found = self._kept.get(text)
        if found is not None:
            if found.bounds is None:
                found = found._replace(bounds=word_bounds(text))
                self._kept.update(text, found)
            return found
        split = tuple(tokens(text))
        view = _View(split, frozenset(split if text.isascii() else words(text)), None)  # the same for ASCII
        if len(text) * 10 <= self.max_chars:
            self._kept.put(text, view)
        return view


STEM_CACHE_WORDS = 200_000
"""Words whose tokens the stemmer remembers (about 300 bytes each with the words filed
under each token, 60 MB in all) before it
starts over: a large world's whole vocabulary fits (the PEPs' section texts hold 33,000
distinct words), and queries of ever fresh words cannot grow it further."""


class _Stems:
    """What the stemmer remembers: each word's tokens, and for each token the words
    remembered with it (so a snippet finds a text's matching words by set intersection,
    not by looking up every word of the text)."""

    def __init__(self) -> None:
        self.forms: dict[str, tuple[str, ...]] = {}
        self.words_of: dict[str, set[str]] = {}

    def add(self, fresh: Mapping[str, tuple[str, ...]]) -> None:
        """Remember `fresh`: `words_of` first, so a reader that finds a word in `forms`
        also finds it under each of its tokens."""
        for word, forms in fresh.items():
            for form in forms:
                self.words_of.setdefault(form, set()).add(word)
        self.forms.update(fresh)


class _Stemmer:
    """The index's own tokenizer applied to query words (a scratch in-memory FTS5 table
    read back through fts5vocab), so de-duplication and term statistics see exactly the
    tokens the index holds. Results are cached; any thread may call `stems`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        """Guards the scratch connection and additions; cache hits never take it."""
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute(f"CREATE VIRTUAL TABLE scratch USING fts5 (x, tokenize = '{TOKENIZE}')")
        self._db.execute("CREATE VIRTUAL TABLE tokens USING fts5vocab (scratch, instance)")
        self._held = _Stems()
        """Only ever added to (under the lock) or replaced whole, so a lookup needs no lock."""

    def stems(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        cache = self._held.forms
        known = {w: cache[w] for w in words if w in cache}
        missing = sorted({w for w in words if w not in known})
        if missing:
            with self._lock:
                fresh = self._tokenize(missing)
                kept = {w: t for w, t in fresh.items() if len(w) <= MAX_CACHED_KEY}
                if len(self._held.forms) + len(kept) > STEM_CACHE_WORDS:
                    self._held = _Stems()
                self._held.add(kept)
            known.update(fresh)
        return [known[w] for w in words]

    def matching(self, texts: Sequence[frozenset[str] | set[str]], wanted: AbstractSet[str]) -> list[set[str]]:
        """For each text's distinct words, those with a token in `wanted`: `stems` without
        building a list for every word of a long text (most are cached and most do not
        match). The words not remembered yet, of all the texts, are tokenized together in
        one pass of the scratch table (the ten snippet texts of a search shown for the
        first time took ten passes before)."""
        held = self._held
        # the words not remembered first: one remembered after this is already filed
        # under its tokens below
        missing = [distinct.difference(held.forms) for distinct in texts]  # given a dict, one probe per word
        fresh = sorted(set().union(*missing))
        forms = dict(zip(fresh, self.stems(fresh), strict=True)) if fresh else {}
        out: list[set[str]] = []
        for distinct, unknown in zip(texts, missing, strict=True):
            found: set[str] = set()
            for form in wanted:
                with_form = held.words_of.get(form)
                if with_form:
                    found |= with_form & distinct  # walks the smaller set
            found.update(w for w in unknown if not wanted.isdisjoint(forms[w]))
            out.append(found)
        return out

    def _tokenize(self, words: Sequence[str]) -> dict[str, tuple[str, ...]]:
        self._db.execute("BEGIN")
        try:
            self._db.executemany("INSERT INTO scratch (rowid, x) VALUES (?, ?)", enumerate(map(spaced, words), start=1))
            found: dict[int, list[str]] = {}
            for doc, term in self._db.execute("SELECT doc, term FROM tokens ORDER BY doc, offset"):
                found.setdefault(doc, []).append(term)
        finally:
            self._db.execute("ROLLBACK")
        return {word: tuple(found.get(i, ())) for i, word in enumerate(words, start=1)}

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
