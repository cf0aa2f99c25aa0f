"""Query analysis and re-ranking for section search. Pure: no SQLite, no clock.

A question becomes content words (lowercase letters/digits, stop words and 1-character
words dropped, de-duplicated); the backend asks its engine for an OR of them, then
`rank` re-orders the candidates::

    score = relevance * coordination ** coord_power * (0.7 + 0.3 * importance)

`relevance` is the engine's BM25 (higher is better), `coordination` the IDF-weighted
share of the query's terms found anywhere in the row (text, heading trail, title/tags),
the coordination factor of classic Lucene scoring, so a section holding more of a
question's terms beats one repeating a single term. Ties go by path, then anchor.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "STOP_WORDS",
    "SNIPPET_MAX_BYTES",
    "Candidate",
    "Ranking",
    "content_words",
    "coordination",
    "idf",
    "match_all",
    "match_any",
    "prior",
    "quote",
    "rank",
    "shape_snippet",
    "term_weights",
    "words",
]

SNIPPET_MAX_BYTES = 240
ELLIPSIS = "…"

# NLTK's English stop-word list (itself the Snowball list), with contractions reduced to
# the pieces a letters/digits split leaves, plus the modal auxiliaries and quantity
# question words it lacks (would, could, might, must, shall, many, much). Generic English
# only; "may" stays searchable because it is also a month.
STOP_WORDS: frozenset[str] = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what
    which who whom this that these those am is are was were be been being have has had
    having do does did doing a an the and but if or because as until while of at by for
    with about against between into through during before after above below to from up
    down in out on off over under again further then once here there when where why how
    all any both each few more most other some such no nor not only own same so than too
    very s t can will just don should now d ll m o re ve y ain aren couldn didn doesn
    hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn
    would could might must shall many much
    """.split()
)

MIN_WORD = 2
_WORD = re.compile(r"[^\W_]+")
_SPACE = re.compile(r"\s+")


def words(text: str) -> list[str]:
    """Lowercase runs of letters and digits, in order (`_` and punctuation separate)."""
    return _WORD.findall(text.lower())


def content_words(query: str) -> list[str]:
    """The words a search looks for: stop words and 1-character words dropped, first
    occurrence kept. A query made only of stop words keeps them, so it still finds
    something.

    >>> content_words("How many beta releases does each version get?")
    ['beta', 'releases', 'version', 'get']
    """
    every = [w for w in _unique(words(query)) if len(w) >= MIN_WORD]
    kept = [w for w in every if w not in STOP_WORDS]
    return kept or every


def _unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


# --- FTS5 expressions ------------------------------------------------------------------------


def quote(term: str) -> str:
    """One FTS5 string (a phrase): user text can never become syntax (`"`, `*`, `NEAR`,
    `AND`, `-`, `:` are all plain characters inside it)."""
    return '"' + term.replace('"', '""') + '"'


def match_any(terms: Sequence[str], columns: Sequence[str] = ()) -> str:
    """`"a" OR "b"`, optionally limited to columns: `{c1 c2} : ("a" OR "b")`."""
    expr = " OR ".join(quote(t) for t in terms)
    if columns:
        return "{" + " ".join(columns) + "} : (" + expr + ")"
    return expr


def match_all(terms: Sequence[str]) -> str:
    """Every term: `"a" AND "b"`."""
    return " AND ".join(quote(t) for t in terms)


# --- snippets --------------------------------------------------------------------------------


def shape_snippet(raw: str, max_bytes: int = SNIPPET_MAX_BYTES) -> str:
    """One line of at most `max_bytes` UTF-8 bytes: whitespace runs become one space, and a
    cut lands on a character boundary and ends in `…`. Markup is kept as text."""
    text = _SPACE.sub(" ", raw).strip()
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    room = max_bytes - len(ELLIPSIS.encode("utf-8"))
    cut = data[:room].decode("utf-8", errors="ignore").rstrip()
    if cut.endswith(ELLIPSIS):
        cut = cut[: -len(ELLIPSIS)].rstrip()
    return cut + ELLIPSIS


# --- ranking ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ranking:
    """The knobs of section ranking. The defaults were chosen on generated data (see
    `bench/index_build.py --tune` in the report), never on an evaluation question set."""

    title_weight: float = 4.0
    """BM25 weight of the document title and tags column."""
    trail_weight: float = 3.0
    """BM25 weight of the heading trail (ancestor headings and the section's own)."""
    body_weight: float = 1.0
    """BM25 weight of the section's own text."""
    coord_power: float = 2.0
    """Exponent of the coordination factor; 0 ranks by BM25 alone."""
    idf_coord: bool = True
    """Weight each term's share of the coordination factor by its IDF (else count terms)."""
    candidates: int = 200
    """How many rows, best BM25 first, are re-ranked."""
    common_share: float = 0.5
    """Terms found in more than this share of all rows are left out of the engine query
    (they still count toward coverage); above one half FTS5's BM25 IDF is ~0 anyway."""


DEFAULT_RANKING = Ranking()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A row the engine matched, before re-ranking."""

    key: int
    """The engine's row id."""
    path: str
    anchor: str
    relevance: float
    """BM25, higher is better (SQLite's `bm25()` negated)."""
    importance: float
    matched: frozenset[int]
    """Indexes into the query's terms of those found anywhere in the row."""


def idf(rows: int, containing: int) -> float:
    """Inverse document frequency that is never negative: ln(1 + (N - n + 0.5) / (n + 0.5))."""
    containing = min(max(containing, 0), rows)
    return math.log(1.0 + (rows - containing + 0.5) / (containing + 0.5))


def coordination(matched: Iterable[int], weights: Sequence[float]) -> float:
    """Share of the query's term weight found in the row, in [0, 1]."""
    total = sum(weights)
    if total <= 0:
        return 0.0
    return sum(weights[i] for i in set(matched)) / total


def prior(importance: float) -> float:
    """The importance prior: 0.7 for importance 0, 1.0 for importance 1."""
    return 0.7 + 0.3 * importance


def rank(
    candidates: Iterable[Candidate],
    term_weights: Sequence[float],
    ranking: Ranking = DEFAULT_RANKING,
) -> list[tuple[float, Candidate]]:
    """Score every candidate and order best first; equal scores go by path, then anchor.

    Scores are rounded to 12 significant digits before comparing, so rows whose BM25
    differs only by floating-point noise tie and fall back to the path order.
    """
    weights = term_weights if ranking.idf_coord else [1.0] * len(term_weights)
    scored: list[tuple[float, Candidate]] = []
    for c in candidates:
        share = coordination(c.matched, weights)
        value = max(c.relevance, 0.0) * share**ranking.coord_power * prior(c.importance)
        scored.append((float(f"{value:.12g}"), c))
    scored.sort(key=lambda sc: (-sc[0], sc[1].path, sc[1].anchor))
    return scored


def term_weights(rows: int, counts: Mapping[int, int], terms: int) -> list[float]:
    """IDF of each query term from the number of rows containing it."""
    return [idf(rows, counts.get(i, 0)) for i in range(terms)]
