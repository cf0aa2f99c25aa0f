"""The section index on SQLite FTS5 (stdlib `sqlite3`): the embedded default backend.

One file, WAL, schema versioned with `PRAGMA user_version` (a file of another version is
emptied and refilled by `reconcile`)::

    documents(path PK, version, title, tags JSON, importance, modified, metadata JSON)
    sections(id PK, path, anchor, heading)          one row per section, plus anchor ""
    fts(meta, trail, body)  rowid = sections.id     porter unicode61 remove_diacritics 2
        meta   document title and tags (the same for every row of a document)
        trail  ancestor headings and the section's own heading
        body   the section's own text after its heading line (to the next heading of
               any level), or for anchor "" the preamble / a body without headings

A heading with no text of its own (a title straight above its first sub-section) gets no
row: it cannot answer anything itself, and its sub-sections carry it in their trails.
Every document keeps its bare-path row, even when empty, for the catalog answer.

A search asks FTS5 for `(t1 OR t2 ...) AND {trail body}: (t1 OR t2 ...)`: any term
anywhere, at least one in the section's own text or headings (a title-only match makes a
section no better than its siblings). The best `Ranking.candidates` rows by BM25 are
re-ranked in Python with term coverage and the importance prior (see `query.py`).
Documents whose title and tags hold every term add their bare-path row (the catalog
answer). One connection, guarded by a lock, serves every thread.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..catalog import CatalogEntry, Filter, derive_title, parse_importance, parse_tags
from ..markdown.sections import parse_outline
from ..protocol import in_scope, normalize_scope
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
    shape_snippet,
    term_weights,
)

log = logging.getLogger("demarkus.index")

SCHEMA_VERSION = 1
TOKENIZE = "porter unicode61 remove_diacritics 2"
SNIPPET_TOKENS = 40
"""Tokens in the FTS5 snippet window before it is cut to 240 bytes."""

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
    heading TEXT NOT NULL
);
CREATE INDEX sections_path ON sections (path, anchor);
CREATE VIRTUAL TABLE fts USING fts5 (meta, trail, body, tokenize = '{TOKENIZE}');
CREATE VIRTUAL TABLE catalog USING fts5 (meta, tokenize = '{TOKENIZE}');
PRAGMA user_version = {SCHEMA_VERSION};
"""
_TABLES = ("fts", "catalog", "sections", "documents")


@dataclass(frozen=True, slots=True)
class _Row:
    """A candidate row as read from SQLite."""

    key: int
    relevance: float
    path: str
    anchor: str
    heading: str
    title: str
    tags: str
    importance: float
    modified: str
    metadata: str


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
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute("PRAGMA temp_store = MEMORY")
        self._ensure_schema()
        self._db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, fts, row)")
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
                self.path, version, SCHEMA_VERSION,
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
                    self._rows = None
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
        with self._transaction():
            self._delete(path)
            self._db.execute(
                "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    path,
                    version,
                    title,
                    json.dumps(list(tags)),
                    parse_importance(metadata.get("importance")),
                    modified.isoformat(),
                    json.dumps(dict(metadata), sort_keys=True),
                ),
            )
            for anchor, heading, trail_text, text in rows:
                cursor = self._db.execute(
                    "INSERT INTO sections (path, anchor, heading) VALUES (?, ?, ?)",
                    (path, anchor, heading),
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
            self._rows = None
        return len(rows)

    def remove(self, path: str) -> None:
        """Drop every row of `path`; a path not indexed is a no-op."""
        with self._transaction():
            self._delete(path)
            self._rows = None

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
            # Terms in more than `common_share` of all rows tell rows apart hardly at all
            # (FTS5's BM25 gives them an IDF of ~0) but cost the most to score: they only
            # count toward coverage, unless every term is that common.
            selective = [
                t for i, t in enumerate(terms) if counts[i] <= self.ranking.common_share * rows
            ] or terms
            judge = _Judge(flt, visible)
            found: dict[int, _Row] = {}
            any_expr = match_any(selective)
            candidate_expr = f"({any_expr}) AND {match_any(selective, ('trail', 'body'))}"
            for row in self._candidates(candidate_expr, scope, judge, catalog=False):
                found[row.key] = row
            for row in self._candidates(match_all(terms), scope, judge, catalog=True):
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
            snippets = self._snippets(any_expr, [c.key for _, c in ranked])
        hits = []
        for value, candidate in ranked:
            row = found[candidate.key]
            hits.append(
                SectionHit(
                    path=row.path,
                    anchor=row.anchor,
                    heading=row.heading,
                    title=row.title,
                    tags=tuple(json.loads(row.tags)),
                    importance=row.importance,
                    snippet=shape_snippet(snippets.get(row.key, "")),
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

    def _candidates(self, expr: str, scope: str, judge: _Judge, *, catalog: bool) -> list[_Row]:
        """Up to `ranking.candidates` rows matching `expr`, best BM25 first, that are in
        scope and pass the filter and the visibility check. `catalog` searches the
        one-row-per-document title/tags table instead of the sections."""
        r = self.ranking
        if catalog:
            inner = "SELECT rowid AS id, -bm25(catalog) * ? AS relevance FROM catalog WHERE catalog MATCH ?"
            params: list[object] = [r.title_weight, expr]
        else:
            inner = "SELECT rowid AS id, -bm25(fts, ?, ?, ?) AS relevance FROM fts WHERE fts MATCH ?"
            params = [r.title_weight, r.trail_weight, r.body_weight, expr]
        if scope != "/":
            # unary + keeps SQLite from probing FTS5 once per id: one scan, then a set test
            inner += (
                " AND +rowid IN (SELECT id FROM sections"
                " WHERE path = ? OR (path > ? AND path < ?))"
            )
            params += [scope, scope + "/", scope + "0"]  # "0" sorts right after "/"
        sql = (
            "SELECT t.id, t.relevance, s.path, s.anchor, s.heading,"
            " d.title, d.tags, d.importance, d.modified, d.metadata"
            f" FROM ({inner} ORDER BY relevance DESC, rowid LIMIT ?) AS t"
            " JOIN sections s ON s.id = t.id JOIN documents d ON d.path = s.path"
            " ORDER BY t.relevance DESC, s.path, s.anchor"
        )
        want = r.candidates
        fetch = want
        while True:
            rows = [_Row(*raw) for raw in self._db.execute(sql, [*params, fetch])]
            kept = [row for row in rows if in_scope(row.path, scope) and judge(row)]
            if len(kept) >= want or len(rows) < fetch:
                return kept[:want]
            fetch *= 4

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
                got = self._db.execute("SELECT doc FROM temp.vocab WHERE term = ?", (form,))
                row = got.fetchone()
                counts.append(row[0] if row else 0)
            out[i] = min(counts, default=0)
        return out

    def _row_count(self) -> int:
        if self._rows is None:
            self._rows = self._db.execute("SELECT count(*) FROM sections").fetchone()[0]
        return self._rows

    def _snippets(self, expr: str, keys: Sequence[int]) -> dict[int, str]:
        if not keys:
            return {}
        ids = ",".join(str(int(k)) for k in keys)
        sql = (
            f"SELECT rowid, snippet(fts, 2, '', '', '…', {SNIPPET_TOKENS}) FROM fts"
            f" WHERE fts MATCH ? AND rowid IN ({ids})"
        )
        return dict(self._db.execute(sql, (expr,)))


class _Judge:
    """Filter and visibility, judged once per document."""

    def __init__(self, flt: Filter | None, visible: Callable[[str], bool]) -> None:
        self._flt = flt
        self._visible = visible
        self._verdicts: dict[str, bool] = {}

    def __call__(self, row: _Row) -> bool:
        verdict = self._verdicts.get(row.path)
        if verdict is None:
            verdict = self._judge(row)
            self._verdicts[row.path] = verdict
        return verdict

    def _judge(self, row: _Row) -> bool:
        if self._flt is not None:
            entry = CatalogEntry(
                path=row.path,
                title=row.title,
                tags=tuple(json.loads(row.tags)),
                importance=row.importance,
                modified=datetime.fromisoformat(row.modified),
                metadata=json.loads(row.metadata),
            )
            if not self._flt.accepts(entry):
                return False
        return bool(self._visible(row.path))


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
        missing = sorted({w for w in words if w not in self._cache})
        if missing:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO scratch (rowid, x) VALUES (?, ?)", enumerate(missing, start=1)
            )
            found: dict[int, list[str]] = {}
            for doc, term in self._db.execute(
                "SELECT doc, term FROM tokens ORDER BY doc, offset"
            ):
                found.setdefault(doc, []).append(term)
            self._db.execute("ROLLBACK")
            if len(self._cache) > 100_000:
                self._cache.clear()
            for i, word in enumerate(missing, start=1):
                self._cache[word] = tuple(found.get(i, ()))
        return [self._cache[w] for w in words]

    def close(self) -> None:
        self._db.close()


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
