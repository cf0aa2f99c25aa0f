"""The section index on SQLite FTS5 (stdlib `sqlite3`): the embedded default backend.

One file, WAL, schema versioned with `PRAGMA user_version` (a file of another version is
emptied and refilled by `reconcile`)::

    documents(path PK, version, title, tags JSON, importance, modified, metadata JSON)
    sections(id PK, path, anchor, heading, importance)   one row per section + anchor ""
    fts(meta, trail, body)  rowid = sections.id     porter unicode61 remove_diacritics 2
        meta   document title and tags (the same for every row of a document)
        trail  ancestor headings and the section's own heading
        body   the section's own text after its heading line (to the next heading of
               any level), or for anchor "" the preamble / a body without headings
    catalog(meta)           rowid = the "" row      title and tags, one row per document

A heading with no text of its own (a title straight above its first sub-section) gets no
row: it cannot answer anything itself, and its sub-sections carry it in their trails.
Every document keeps its bare-path row, even when empty, for the catalog answer.

A search takes the question's content words (`query.content_words`), keeps one per
stemmed form, and asks FTS5 for `(t1 OR t2 ...) AND {trail body}: (t1 OR t2 ...)` over
the rarest of them (see `_selective`): any term anywhere, at least one in the section's
own text or headings, so a title-only match does not make every section of a document a
row. The best `Ranking.candidates` rows by BM25 (title/tags, trail and body weighted) are
re-ranked in Python by term coverage and the importance prior (see `query.py`).
Documents whose title and tags hold every term add their bare-path row (the catalog
answer), ranked with the rest. One connection, guarded by a lock, serves every thread.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from ..catalog import CatalogEntry, Filter, derive_title, parse_importance, parse_tags
from ..markdown.sections import parse_outline
from ..protocol import normalize_scope
from .base import SectionHit
from .query import (
    DEFAULT_RANKING,
    Candidate,
    Ranking,
    content_words,
    match_all,
    match_any,
    quote,
    rank,
    snippet,
    term_weights,
    words,
)

log = logging.getLogger("demarkus.index")

SCHEMA_VERSION = 2
"""Bumped whenever the tables change; 1 lacked `sections.importance`."""
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


class SectionIndex:
    """Section search over SQLite FTS5; see the module docstring for the layout.

    Raises (from the constructor):
        sqlite3.DatabaseError: the file exists but is not a SQLite database.
    """

    def __init__(self, path: Path, *, ranking: Ranking = DEFAULT_RANKING) -> None:
        self.path = Path(path)
        self.ranking = ranking
        self._lock = threading.RLock()
        self._depth = 0
        self._rows: int | None = None
        self._documents: int | None = None
        self._vocab: dict[str, int] = {}
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute("PRAGMA temp_store = MEMORY")
        self._ensure_schema()
        self._db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, fts, row)"
        )
        self._stemmer = _Stemmer()

    # --- lifecycle ------------------------------------------------------------------------

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
        with self._transaction():
            for name in _TABLES:
                self._db.execute(f"DROP TABLE IF EXISTS {name}")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)

    def close(self) -> None:
        """Close the connection; the object is unusable afterwards."""
        with self._lock:
            try:
                self._db.execute("PRAGMA optimize")
            except sqlite3.Error:
                pass
            self._db.close()
            self._stemmer.close()

    def __enter__(self) -> SectionIndex:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """One transaction around many updates (a world load, a rebuild). Other threads
        wait until it ends; an exception rolls every change back."""
        with self._lock, self._transaction():
            yield

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._lock:
            outer = self._depth == 0
            if outer:
                self._db.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer:
                    self._db.execute("ROLLBACK")
                    self._forget()
                raise
            self._depth -= 1
            if outer:
                self._db.execute("COMMIT")

    # --- writes ---------------------------------------------------------------------------

    def update(
        self,
        path: str,
        version: int,
        metadata: Mapping[str, str],
        body: bytes,
        modified: datetime,
    ) -> int:
        """Replace every row of `path`; returns the rows written (its sections plus the
        bare-path row).

        Raises:
            BadRequestError: `body` is not UTF-8.
        """
        title = derive_title(path, metadata, body)
        tags = parse_tags(metadata.get("tags"))
        meta_text = "\n".join((title, *tags))
        outline = parse_outline(body)
        rows: list[tuple[str, str, str, str]] = []  # anchor, heading, trail, text
        rows.append(("", "", "", _text(outline.preamble)))
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
                rows.append((section.anchor, section.title, "\n".join(reversed(trail)), text))
        importance = parse_importance(metadata.get("importance"))
        with self._transaction():
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
                    (cursor.lastrowid, meta_text, trail_text, text),
                )
                if not anchor:
                    self._db.execute(
                        "INSERT INTO catalog (rowid, meta) VALUES (?, ?)",
                        (cursor.lastrowid, meta_text),
                    )
            self._forget()
        return len(rows)

    def remove(self, path: str) -> None:
        """Drop every row of `path`; a path not indexed is a no-op."""
        with self._transaction():
            self._delete(path)
            self._forget()

    def _forget(self) -> None:
        """Drop the statistics cached between writes (row counts, term counts)."""
        self._rows = self._documents = None
        self._vocab.clear()

    def _delete(self, path: str) -> None:
        for table in ("fts", "catalog"):
            self._db.execute(
                f"DELETE FROM {table} WHERE rowid IN (SELECT id FROM sections WHERE path = ?)",
                (path,),
            )
        self._db.execute("DELETE FROM sections WHERE path = ?", (path,))
        self._db.execute("DELETE FROM documents WHERE path = ?", (path,))

    def optimize(self) -> None:
        """Merge the FTS5 b-trees into one: slower now, faster searches later."""
        with self._transaction():
            self._db.execute("INSERT INTO fts (fts) VALUES ('optimize')")

    # --- reads ----------------------------------------------------------------------------

    def indexed_versions(self) -> dict[str, int]:
        with self._lock:
            return dict(self._db.execute("SELECT path, version FROM documents"))

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
        `flt` and `visible` drop rows before the limit applies.
        """
        if limit < 1:
            return []
        scope = normalize_scope(scope)
        with self._lock:
            terms = self._terms(content_words(query))
            if not terms:
                return []
            rows = self._row_count()
            counts = self._counts(terms)
            weights = term_weights(rows, counts, len(terms))
            selective = _selective(terms, counts, rows, self.ranking)
            judge = _Judge(flt, visible, self._documents_for)
            found: dict[int, _Row] = {}
            any_expr = match_any(selective)
            candidate_expr = f"({any_expr}) AND {match_any(selective, ('trail', 'body'))}"
            for row in self._candidates(candidate_expr, scope, judge, catalog=False, limit=limit):
                found[row.key] = row
            for row in self._candidates(match_all(terms), scope, judge, catalog=True, limit=limit):
                if row.key not in found or found[row.key].relevance < row.relevance:
                    found[row.key] = row
            if not found:
                return []
            matched = self._matched(terms, list(found))
            ranked = rank(
                (
                    Candidate(
                        key=row.key,
                        path=row.path,
                        anchor=row.anchor,
                        relevance=row.relevance,
                        importance=row.importance,
                        matched=frozenset(matched.get(row.key, ())),
                    )
                    for row in found.values()
                ),
                weights,
                self.ranking,
            )[:limit]
            snippets = self._snippets(terms, [c.key for _, c in ranked])
            documents = self._documents_for({c.path for _, c in ranked})
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

    def _candidates(
        self, expr: str, scope: str, judge: _Judge, *, catalog: bool, limit: int
    ) -> list[_Row]:
        """Up to `ranking.candidates` (at least `limit`) rows matching `expr`, best BM25
        first, that are in scope and pass the filter and the visibility check. `catalog`
        searches the one-row-per-document title/tags table (its BM25 scaled by the title
        weight) instead of the sections."""
        r = self.ranking
        if catalog:
            inner = (
                "SELECT rowid AS id, -bm25(catalog) * ? AS relevance"
                " FROM catalog WHERE catalog MATCH ?"
            )
            params: list[object] = [r.title_weight, expr]
        else:
            inner = (
                "SELECT rowid AS id, -bm25(fts, ?, ?, ?) AS relevance FROM fts WHERE fts MATCH ?"
            )
            params = [r.title_weight, r.trail_weight, r.body_weight, expr]
        if scope != "/" and self._narrow(scope):
            # unary + keeps SQLite from probing FTS5 once per id: one scan, then a set test
            inner += (
                " AND +rowid IN (SELECT id FROM sections WHERE path = ? OR (path > ? AND path < ?))"
            )
            params += [scope, scope + "/", scope + "0"]  # "0" sorts right after "/"
        sql = (
            "SELECT t.id, t.relevance, s.path, s.anchor, s.heading, s.importance"
            f" FROM ({inner} ORDER BY relevance DESC, rowid LIMIT ?) AS t"
            " JOIN sections s ON s.id = t.id"
        )
        want = max(r.candidates, limit)
        fetch = want
        while True:
            rows = list(map(_Row._make, self._db.execute(sql, [*params, fetch])))
            inside = [row for row in rows if _inside(row.path, scope)]
            judge.prepare({row.path for row in inside})
            kept = [row for row in inside if judge(row.path)]
            if len(kept) >= want or len(rows) < fetch:
                return kept[:want]
            fetch *= 4

    def _narrow(self, scope: str) -> bool:
        """True when the scope holds under half the documents: then SQL restricts the rows
        before ranking; a wide scope is cheaper to filter afterwards (fetching more if
        too many rows fall outside it)."""
        inside: int = self._db.execute(
            "SELECT count(*) FROM documents WHERE path = ? OR (path > ? AND path < ?)",
            (scope, scope + "/", scope + "0"),
        ).fetchone()[0]
        if self._documents is None:
            self._documents = self._db.execute("SELECT count(*) FROM documents").fetchone()[0]
        return inside * 2 < (self._documents or 0)

    def _documents_for(self, paths: Collection[str]) -> dict[str, _Document]:
        """The stored fields of each document named."""
        out: dict[str, _Document] = {}
        ordered = sorted(paths)
        for start in range(0, len(ordered), 500):
            chunk = ordered[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for raw in self._db.execute(
                "SELECT path, title, tags, importance, modified, metadata FROM documents"
                f" WHERE path IN ({marks})",
                chunk,
            ):
                out[raw[0]] = _Document._make(raw)
        return out

    def _matched(self, terms: Sequence[str], keys: Sequence[int]) -> dict[int, set[int]]:
        """Row id -> indexes of the terms found anywhere in that row."""
        ids = ",".join(str(int(k)) for k in keys)
        sql = " UNION ALL ".join(
            f"SELECT {i}, rowid FROM fts WHERE fts MATCH ? AND +rowid IN ({ids})"
            for i in range(len(terms))
        )
        out: dict[int, set[int]] = {}
        for index, key in self._db.execute(sql, [quote(t) for t in terms]):
            out.setdefault(key, set()).add(index)
        return out

    def _counts(self, terms: Sequence[str]) -> dict[int, int]:
        """Term index -> rows containing it in any column, from the FTS5 vocabulary (a
        word that splits into several tokens counts as its rarest token)."""
        out: dict[int, int] = {}
        for i, forms in enumerate(self._stemmer.stems(terms)):
            counts = []
            for form in forms:
                if form not in self._vocab:
                    got = self._db.execute("SELECT doc FROM temp.vocab WHERE term = ?", (form,))
                    row = got.fetchone()
                    self._vocab[form] = row[0] if row else 0
                counts.append(self._vocab[form])
            out[i] = min(counts, default=0)
        return out

    def _row_count(self) -> int:
        if self._rows is None:
            self._rows = self._db.execute("SELECT count(*) FROM sections").fetchone()[0]
        return self._rows

    def _snippets(self, terms: Sequence[str], keys: Sequence[int]) -> dict[int, str]:
        """Row id -> snippet of its text around the query's words (matched through the
        index's own tokenizer, so `releases` lights up for `release`)."""
        if not keys:
            return {}
        wanted = {stem for stems in self._stemmer.stems(terms) for stem in stems}
        ids = ",".join(str(int(k)) for k in keys)
        out: dict[int, str] = {}
        for key, text in self._db.execute(f"SELECT rowid, body FROM fts WHERE rowid IN ({ids})"):
            found = sorted({w for w in words(text)})
            hit_words = {
                w
                for w, stems in zip(found, self._stemmer.stems(found), strict=True)
                if wanted.intersection(stems)
            }
            out[key] = snippet(text, hit_words)
        return out


def _inside(path: str, scope: str) -> bool:
    """`protocol.in_scope` for a scope already normalised."""
    return scope == "/" or path == scope or path.startswith(scope + "/")


def _selective(
    terms: Sequence[str], counts: Mapping[int, int], rows: int, ranking: Ranking
) -> list[str]:
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
        self._flt = flt
        self._visible = visible
        self._load = load
        self._verdicts: dict[str, bool] = {}

    def prepare(self, paths: Collection[str]) -> None:
        """Judge every path not judged yet (one query for the filter's documents)."""
        fresh = [p for p in paths if p not in self._verdicts]
        if not fresh:
            return
        documents = self._load(fresh) if self._flt is not None else {}
        for path in fresh:
            verdict = True
            if self._flt is not None:
                doc = documents.get(path)
                verdict = doc is not None and self._flt.accepts(doc.entry())
            self._verdicts[path] = verdict and bool(self._visible(path))

    def __call__(self, path: str) -> bool:
        if path not in self._verdicts:
            self.prepare([path])
        return self._verdicts[path]


class _Stemmer:
    """The index's own tokenizer applied to query words (a scratch in-memory FTS5 table
    read back through fts5vocab), so de-duplication and term statistics see exactly the
    tokens the index holds. Results are cached."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute(f"CREATE VIRTUAL TABLE scratch USING fts5 (x, tokenize = '{TOKENIZE}')")
        self._db.execute("CREATE VIRTUAL TABLE tokens USING fts5vocab (scratch, instance)")
        self._cache: dict[str, tuple[str, ...]] = {}

    def stems(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        if len(self._cache) > 200_000:
            self._cache.clear()
        missing = sorted({w for w in words if w not in self._cache})
        if missing:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO scratch (rowid, x) VALUES (?, ?)", enumerate(missing, start=1)
            )
            found: dict[int, list[str]] = {}
            for doc, term in self._db.execute("SELECT doc, term FROM tokens ORDER BY doc, offset"):
                found.setdefault(doc, []).append(term)
            self._db.execute("ROLLBACK")
            for i, word in enumerate(missing, start=1):
                self._cache[word] = tuple(found.get(i, ()))
        return [self._cache[w] for w in words]

    def close(self) -> None:
        self._db.close()


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
