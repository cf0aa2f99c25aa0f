"""The catalog: tags, title and importance of every current document, for LOOKUP. Pure.

A query term matches a document when it equals one of its tags (case-insensitive) or is a
substring of its title or of one of its aliases (its other names: `aliases` or `alias`
metadata, as Obsidian's frontmatter gives them). A nested tag (`inbox/to-read`, as Obsidian
and Logseq write a tag's place in a hierarchy) also counts as each tag above it (`inbox`),
for a term and for a `tag=` filter alike, as those editors' tag search reads it. A tag's
leading `#` is how a note writes it, not part of it: `tag=#inbox`, `tag=inbox` and the
term `#inbox` all find the tag `inbox` (or `#inbox` in a frontmatter). Score =
number of distinct matching terms. Order: score desc, importance desc, modified desc, path
asc.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .errors import BadRequestError
from .markdown.sections import shown_title
from .protocol import in_scope, parse_count

ALIAS_KEYS = ("aliases", "alias")
"""Metadata keys that give a document other names, comma-separated."""
DEFAULT_LIMIT = 10
MAX_LIMIT = 1000
DEFAULT_IMPORTANCE = 0.5
MIN_TERM = 2


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    path: str
    title: str
    tags: tuple[str, ...]
    importance: float
    modified: datetime
    metadata: Mapping[str, str] = field(default_factory=dict)
    folded_tags: frozenset[str] = field(init=False, repr=False, compare=False)
    """`tags` and the tags above nested ones, lower-cased once, not on every query."""
    folded_names: str = field(init=False, repr=False, compare=False)
    """The title and the aliases, lower-cased, one per line."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded_tags", frozenset(_with_parents(_fold_tag(t) for t in self.tags)))
        object.__setattr__(self, "folded_names", "\n".join((self.title, *parse_aliases(self.metadata))).lower())


def _fold_tag(tag: str) -> str:
    """A tag as tags are compared: lower-cased, without the `#` a note writes it with."""
    return tag.lower().removeprefix("#")


def _with_parents(tags: Iterable[str]) -> Iterator[str]:
    """Each tag, then each tag above it: `a/b/c` gives `a/b/c`, `a/b` and `a`."""
    for tag in tags:
        yield tag
        parts = tag.split("/")
        for end in range(1, len(parts)):
            parent = "/".join(parts[:end])
            if parent.strip():
                yield parent


def parse_importance(value: str | None) -> float:
    try:
        number = float(value) if value is not None else DEFAULT_IMPORTANCE
    except ValueError:
        return DEFAULT_IMPORTANCE
    return number if 0.0 <= number <= 1.0 else DEFAULT_IMPORTANCE


def parse_tags(value: str | None) -> tuple[str, ...]:
    return tuple(t.strip() for t in (value or "").split(",") if t.strip())


def parse_aliases(metadata: Mapping[str, str]) -> tuple[str, ...]:
    """A document's other names, each once, from its `ALIAS_KEYS` metadata."""
    names = (name.strip() for key in ALIAS_KEYS for name in metadata.get(key, "").split(","))
    return tuple(dict.fromkeys(name for name in names if name))


_H1 = re.compile(rb"^# +(.+?)[ #]*$", re.MULTILINE)


def derive_title(path: str, metadata: Mapping[str, str], body: bytes) -> str:
    """Publisher `title`, else the first `# ` line of the body (without the id it may give
    itself, `# Guide {#guide}`), else the file name."""
    if metadata.get("title", "").strip():
        return metadata["title"].strip()
    found = _H1.search(body)
    if found:
        return shown_title(found.group(1).decode("utf-8", errors="replace"))
    return path.rsplit("/", 1)[-1]


def make_entry(path: str, metadata: Mapping[str, str], body: bytes, modified: datetime) -> CatalogEntry:
    return CatalogEntry(
        path=path,
        title=derive_title(path, metadata, body),
        tags=parse_tags(metadata.get("tags")),
        importance=parse_importance(metadata.get("importance")),
        modified=modified,
        metadata=dict(metadata),
    )


def query_terms(query: str) -> list[str]:
    """Lowercase, whitespace-split, de-duplicated terms.

    Raises:
        BadRequestError: an empty query or one with no term of at least two characters.
    """
    terms = list(dict.fromkeys(query.lower().split()))
    if not terms:
        raise BadRequestError("the query is empty; give at least one word of two or more characters, or `*`")
    if terms != ["*"] and all(len(t) < MIN_TERM for t in terms):
        raise BadRequestError(
            f"the query `{query}` has no term of at least {MIN_TERM} characters; "
            "use descriptive words, or `*` to list every document"
        )
    return terms


def parse_limit(value: str | None) -> int:
    if value is None or value == "":
        return DEFAULT_LIMIT
    limit = parse_count("limit", value, f"use 1 to {MAX_LIMIT}")
    if limit < 1:
        raise BadRequestError(f"limit {limit} is below 1; use 1 to {MAX_LIMIT}, or omit it for {DEFAULT_LIMIT}")
    return min(limit, MAX_LIMIT)


@dataclass(frozen=True, slots=True)
class Filter:
    """All clauses must hold: `tag=`, `modified-after=`, `modified-before=`, else metadata equality."""

    tags: tuple[str, ...] = ()
    after: datetime | None = None
    before: datetime | None = None
    equals: tuple[tuple[str, str], ...] = ()

    def accepts(self, entry: CatalogEntry) -> bool:
        if any(t not in entry.folded_tags for t in self.tags):
            return False
        if self.after is not None and not entry.modified > self.after:
            return False
        if self.before is not None and not entry.modified < self.before:
            return False
        return all(entry.metadata.get(k) == v for k, v in self.equals)


def _parse_date(key: str, value: str) -> datetime:
    text = value.strip()
    try:
        if len(text) == 10:
            return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequestError(
            f"filter `{key}={value}` needs a date: YYYY-MM-DD or RFC 3339 like 2026-01-31T12:00:00Z"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_filter(text: str | None) -> Filter:
    """Parse `key=value,key=value`.

    Raises:
        BadRequestError: a clause without `=` or with an empty key or value.
    """
    if not text or not text.strip():
        return Filter()
    tags: list[str] = []
    equals: list[tuple[str, str]] = []
    after = before = None
    for clause in text.split(","):
        clause = clause.strip()
        if not clause:
            continue
        key, sep, value = clause.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise BadRequestError(
                f"filter clause `{clause}` is malformed; write key=value pairs separated by commas, "
                "e.g. tag=adr,modified-after=2026-01-01"
            )
        if key == "tag":
            tags.append(_fold_tag(value))
        elif key == "modified-after":
            after = _parse_date(key, value)
        elif key == "modified-before":
            before = _parse_date(key, value)
        else:
            equals.append((key, value))
    return Filter(tuple(tags), after, before, tuple(equals))


def score(entry: CatalogEntry, terms: Iterable[str]) -> int:
    return _score(entry, _forms(terms))


def _forms(terms: Iterable[str]) -> list[tuple[str, str]]:
    """Each term as a title matches it and as a tag does: folded once per search, not once
    per entry."""
    return [(term, _fold_tag(term)) for term in terms]


def _score(entry: CatalogEntry, forms: Sequence[tuple[str, str]]) -> int:
    return sum(1 for term, tag in forms if tag in entry.folded_tags or term in entry.folded_names)


class Catalog:
    """Current, non-archived documents by path; updated on every write.

    Safe from several threads: a query works on a snapshot of the entries taken under the
    lock, so a write landing meanwhile never breaks its iteration."""

    def __init__(self) -> None:
        self._entries: dict[str, CatalogEntry] = {}
        self._lock = threading.Lock()
        self.generation = 0
        """Counts the changes: what was worked out from the entries at one generation
        holds until the next (a read of it before `entries` never sees a later state as
        an earlier one)."""

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, entry: CatalogEntry) -> None:
        with self._lock:
            self._entries[entry.path] = entry
            self.generation += 1

    def remove(self, path: str) -> None:
        with self._lock:
            if self._entries.pop(path, None) is not None:
                self.generation += 1

    def get(self, path: str) -> CatalogEntry | None:
        return self._entries.get(path)

    def entries(self) -> list[CatalogEntry]:
        """Every entry, by path."""
        return sorted(self._snapshot(), key=lambda entry: entry.path)

    def _snapshot(self) -> list[CatalogEntry]:
        with self._lock:
            return list(self._entries.values())

    def active_folders(self, directory: str) -> set[str]:
        """Names of the folders right under `directory` that hold a current, non-archived
        document at some depth (one pass over the catalog)."""
        prefix = directory.rstrip("/") + "/"
        return {
            e.path[len(prefix) :].split("/", 1)[0]
            for e in self._snapshot()
            if e.path.startswith(prefix) and "/" in e.path[len(prefix) :]
        }

    def count(self, scope: str, where: Callable[[str], bool]) -> int:
        """Entries in ``scope`` whose path ``where`` holds for."""
        return sum(1 for entry in self._snapshot() if in_scope(entry.path, scope) and where(entry.path))

    def search(
        self,
        terms: list[str],
        scope: str,
        flt: Filter,
        limit: int,
        visible: Callable[[str], bool] = lambda _path: True,
    ) -> list[CatalogEntry]:
        """Matching entries in rank order; `visible` drops rows the caller may not read."""
        every = terms == ["*"]
        forms = _forms(terms)
        scored: list[tuple[int, CatalogEntry]] = []
        for entry in self._snapshot():
            if not in_scope(entry.path, scope) or not flt.accepts(entry):
                continue
            points = 1 if every else _score(entry, forms)
            if points > 0 and visible(entry.path):
                scored.append((points, entry))
        scored.sort(key=lambda pe: (-pe[0], -pe[1].importance, -pe[1].modified.timestamp(), pe[1].path))
        return [entry for _, entry in scored[:limit]]
