"""Query analysis and re-ranking for section search. Pure: no SQLite, no clock.

A question becomes content words (lowercase letters/digits, stop words and 1-character
words dropped, de-duplicated); the backend asks its engine for an OR of them, then
`rank` re-orders the best candidates::

    score = relevance * coverage ** coord_power * (0.5 + 0.5 * importance)

`relevance` is the engine's BM25 (higher is better); `coverage` is the share of the
query's distinct terms found anywhere in the row (text, heading trail, title/tags) -- the
coordination factor of classic Lucene scoring -- so a section holding more of a
question's terms beats one repeating a single term. Ties go by path, then anchor.

The defaults of `Ranking` were chosen on generated data only (`bench/index_build.py
--tune`, 500 questions over 1,500 generated documents; MRR averaged over the grid):
coverage matters (0.86 without it, 0.90 with powers 1-3, 2 best by a hair); counting
terms beats IDF-weighting them (0.91 vs 0.89); title and trail weights from 1 to 8 stay
within 0.005 of each other with no trend, so they sit at 2, above body text on principle.
Leaving terms found in over 20% of rows out of the engine query kept MRR and cut search
time; so did stopping, rarest term first, once the engine query's terms match 5,000 rows
(100,000 sections, 12-word questions: MRR 0.973 either way, p50 43 -> 31 ms; 2,000 rows
cost 0.02 MRR).

The importance prior was re-checked on the four visible worlds (`bench/retrieval.py` and
`bench/evidence_sweep.py`; every variant in `bench/results/evidence_changes.md`): without
it, or weaker (0.85 + 0.15 x), peps loses evidence from its top 10; with a document of
importance 0 at half the score of one of importance 1, no world loses and three gain
(0.4 + 0.6 x gains about as much; 0.1 + 0.9 x loses retrieval on two worlds). Half is the round
value inside that broad optimum: an author's importance (final against withdrawn or draft)
then weighs about as much as one more of ten query terms (coverage squared: 0.81 -> 1.0),
where at 0.7 a withdrawn document outranked the final one as soon as it held one more
term. Documents without an importance all share the default and are not affected.
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
from array import array
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from . import scripts

__all__ = [
    "STOP_WORDS",
    "SNIPPET_MAX_BYTES",
    "WordBounds",
    "Candidate",
    "Ranking",
    "content_words",
    "coordination",
    "idf",
    "informative",
    "match_all",
    "match_any",
    "prior",
    "quote",
    "rank",
    "shape_snippet",
    "snippet",
    "term_weights",
    "tokens",
    "word_bounds",
    "words",
]

SNIPPET_MAX_BYTES = 240
ELLIPSIS = "…"

# NLTK's English stop-word list, with its contractions reduced to
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


def words(text: str) -> list[str]:
    """Lowercase runs of letters and digits, in order (`_` and punctuation separate); a run
    of Chinese, Japanese or Korean characters as its pairs (`scripts.pieces`)."""
    found = _WORD.findall(text.lower())
    if not scripts.holds(text):
        return found
    return [piece for word in found for piece in scripts.pieces(word)]


_NOT_ASCII_WORD = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})
"""Every ASCII character but letters and digits, to a space."""


def tokens(text: str) -> list[str]:
    """The words of `text` split first, then lowercased (what `snippet` walks). For ASCII
    text that is also `words(text)`, found faster: ASCII letters and digits are the only
    ASCII characters `[^\\W_]` takes, so the runs are what is left between the others once
    they are spaces (no regular expression, no match object per word)."""
    if text.isascii():
        return text.lower().translate(_NOT_ASCII_WORD).split()
    return [w.lower() for w in _WORD.findall(text)]


def content_words(query: str) -> list[str]:
    """The words a search looks for: stop words and 1-character words dropped, first
    occurrence kept. A query made only of stop words keeps them, so it still finds
    something.

    >>> content_words("How many beta releases does each version get?")
    ['beta', 'releases', 'version', 'get']
    """
    every = [w for w in _unique(words(query)) if len(w) >= MIN_WORD or scripts.holds(w)]
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
    `AND`, `-`, `:` are all plain characters inside it). Spaced as the index's text is
    (`scripts.spaced`), so a pair of Chinese characters is two adjacent tokens."""
    return '"' + scripts.spaced(term).replace('"', '""') + '"'


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
    text = " ".join(raw.split())  # `\s+` runs to one space, stripped; no regex: the same characters
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    room = max_bytes - len(ELLIPSIS.encode("utf-8"))
    cut = data[:room].decode("utf-8", errors="ignore").rstrip()
    if cut.endswith(ELLIPSIS):
        cut = cut[: -len(ELLIPSIS)].rstrip()
    return cut + ELLIPSIS


WordBounds = tuple[Sequence[int], Sequence[int]]
"""Where each word of a text starts and ends (character offsets), in order."""


def word_bounds(text: str) -> WordBounds:
    """The offsets of `text`'s words, as `tokens` splits them: a snippet of a text read
    again finds its window without walking the text up to it."""
    starts, ends = array("I"), array("I")
    for match in _WORD.finditer(text):
        starts.append(match.start())
        ends.append(match.end())
    return starts, ends


SNIPPET_TOKENS = 30
"""Words in the window a snippet is chosen by (about what 240 bytes hold)."""
SNIPPET_LEAD = 3
"""Words of context kept before the window's first match when no sentence starts near."""
SNIPPET_BACK = 12
"""How many words back from the first match a sentence or line start is looked for."""
_BOUNDARY = re.compile(r"[.!?:;]\s|\n")


def snippet(
    text: str,
    hit_words: Collection[str],
    *,
    size: int = SNIPPET_TOKENS,
    split: Sequence[str] | None = None,
    bounds: WordBounds | None = None,
) -> str:
    """The best one-line window of `text` for a search: the `size`-word window holding the
    most distinct matched words (then the most matches; the earliest on ties). It opens at
    the start of the sentence or line holding its first match when that is at most
    `SNIPPET_BACK` words back, else `SNIPPET_LEAD` words back; it is shaped by
    `shape_snippet`. `hit_words` are the lowercase words of `text` that match the query;
    with none, the text's start is shown. `split`, when given, is `tokens(text)`, and
    `bounds` is `word_bounds(text)`."""
    words_at = tokens(text) if split is None else split
    hits = list(itertools.compress(itertools.count(), map(hit_words.__contains__, words_at)))
    begin = 0
    if hits:
        best: tuple[int, int] = (0, 0)
        first = last = 0
        right = 0
        held: dict[str, int] = {}  # matched word -> its matches in the window hits[left:right]
        for left, at in enumerate(hits):
            while right < len(hits) and hits[right] < at + size:
                word = words_at[hits[right]]
                held[word] = held.get(word, 0) + 1
                right += 1
            key = (len(held), right - left)
            if key > best:
                best, first, last = key, at, hits[right - 1]
            word = words_at[at]  # the window slides past it
            if held[word] == 1:
                del held[word]
            else:
                held[word] -= 1
        low = max(0, first - SNIPPET_BACK)
        if bounds is None:
            found = list(itertools.islice(_WORD.finditer(text), low, last + 1))
            starts: Sequence[int] = [m.start() for m in found]
            ends: Sequence[int] = [m.end() for m in found]
        else:
            starts, ends = bounds[0][low : last + 1], bounds[1][low : last + 1]
        begin = starts[max(0, first - SNIPPET_LEAD - low)]
        for j in range(first - low, -1, -1):
            before = text[ends[j - 1] : starts[j]] if j else text[: starts[0]]
            if j + low == 0 or _BOUNDARY.search(before):
                begin = starts[j] if j + low else 0
                break
        end = ends[-1]
        if begin and end < SNIPPET_MAX_BYTES:  # cheap bound before measuring bytes
            head = " ".join(text[:end].split()).encode("utf-8")
            if len(head) < SNIPPET_MAX_BYTES - len(ELLIPSIS.encode("utf-8")):
                begin = 0  # the window fits from the very start: show the text as written
    # more characters than 240 bytes can hold are never shown: bound the work
    raw = text[begin : begin + SNIPPET_MAX_BYTES * 2]
    shaped = shape_snippet((ELLIPSIS if begin else "") + scripts.plain(raw))
    if begin + len(raw) < len(text) and not shaped.endswith(ELLIPSIS):
        shaped = shape_snippet(shaped + ELLIPSIS)
    return shaped


# --- ranking ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ranking:
    """The knobs of section ranking. The defaults were chosen on generated data (see the
    module docstring), never on an evaluation question set."""

    title_weight: float = 2.0
    """BM25 weight of the document title and tags column."""
    trail_weight: float = 2.0
    """BM25 weight of the heading trail (ancestor headings and the section's own)."""
    body_weight: float = 1.0
    """BM25 weight of the section's own text."""
    coord_power: float = 2.0
    """Exponent of the coordination factor; 0 ranks by BM25 alone."""
    idf_coord: bool = False
    """Weight each term's share of the coordination factor by its IDF (else count terms)."""
    candidates: int = 200
    """How many rows, best BM25 first, are re-ranked."""
    engine_rows: int = 5000
    """Rarest first, terms join the engine query until together they match this many rows
    (or the next is common); the rest only count toward coverage. This bounds the rows
    FTS5 must score for a long question."""
    common_share: float = 0.2
    """Terms found in more than this share of all rows are left out of the engine query
    (unless every term is that common) and only count toward coverage: they tell rows
    apart little but cost the most, since FTS5 scores every row a query matches."""


DEFAULT_RANKING = Ranking()


class Candidate(NamedTuple):
    """A row the engine matched, before re-ranking (a tuple: hundreds are built per search)."""

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
    """The importance prior: 0.5 for importance 0, 1.0 for importance 1 (see the module
    docstring for why half)."""
    return 0.5 + 0.5 * importance


ROUNDING_SLACK = 1e-11
"""Relative distance below the `limit`-th best raw score past which a candidate cannot
reach the top `limit` once scores are rounded to 12 significant digits (each moves by
at most 5e-12 of itself)."""


def rank(
    candidates: Iterable[Candidate],
    term_weights: Sequence[float],
    ranking: Ranking = DEFAULT_RANKING,
    *,
    limit: int | None = None,
) -> list[tuple[float, Candidate]]:
    """Score every candidate and order best first; equal scores go by path, then anchor.

    Scores are rounded to 12 significant digits before comparing, so rows whose BM25
    differs only by floating-point noise tie and fall back to the path order. With
    `limit`, only the best `limit` come back: candidates too far below the `limit`-th
    best raw score (see `ROUNDING_SLACK`) are dropped before rounding and sorting, which
    leaves the first `limit` exactly as a full ranking orders them.
    """
    weights = term_weights if ranking.idf_coord else [1.0] * len(term_weights)
    total = sum(weights)
    # counting terms, the share is exactly the matched count over the term count (a sum of
    # ones is exact), without summing per row
    counted = not ranking.idf_coord and total > 0
    power = ranking.coord_power
    raw: list[tuple[float, Candidate]] = []
    for c in candidates:
        share = len(c.matched) / total if counted else coordination(c.matched, weights)
        raw.append((max(c.relevance, 0.0) * share**power * prior(c.importance), c))
    if limit is not None and len(raw) > limit:
        floor = heapq.nlargest(limit, [value for value, _ in raw])[-1] * (1.0 - ROUNDING_SLACK)
        raw = [vc for vc in raw if vc[0] >= floor]
    scored = [(float(f"{value:.12g}"), c) for value, c in raw]
    scored.sort(key=lambda sc: (-sc[0], sc[1].path, sc[1].anchor))
    return scored if limit is None else scored[:limit]


def informative(rows: int, counts: Mapping[int, int], terms: int, ranking: Ranking = DEFAULT_RANKING) -> frozenset[int]:
    """Indexes of the query terms that are not common (in at most `Ranking.common_share` of
    all rows, none included): the words that say what a question is about, where the
    common ones say how it is asked."""
    most = ranking.common_share * rows
    return frozenset(i for i in range(terms) if counts.get(i, 0) <= most)


def term_weights(rows: int, counts: Mapping[int, int], terms: int) -> list[float]:
    """IDF of each query term from the number of rows containing it."""
    return [idf(rows, counts.get(i, 0)) for i in range(terms)]
