"""Budgeted evidence selection: the order of turns, and nothing else. Pure given a fetch
function.

One budget (o200k_base tokens) covers the whole result, the table included. When the
table leaves no room, or the match is weak (`weak`), one note says so. Otherwise, in turn:

1. the rows, in rank order (`rows.py`), with room kept for the hop;
2. the one typed hop: up to MAX_RELATED related documents (`hop.py`);
3. the leftovers: leads, more of the related documents, and what did not fit whole in
   its turn (`leftovers.py`);
4. the closing notes: what did not fit, the fetch limit, the count (`ledger.py`).

Tokens are counted only in `ledger.py`; every print and skip is a `Decision` there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..index.query import content_words
from . import frames
from .document import MAX_FETCHES, Fetcher, FetchFn
from .hop import Hop
from .ledger import Action, Decision, Ledger, Tally, size
from .leftovers import show_leftovers
from .page import Page
from .rows import show_rows, too_large
from .table import Table, TableRow


@dataclass(frozen=True, slots=True)
class Selection:
    """What one expansion did: the text, and the facts its tests and benches check."""

    text: str
    fetched: tuple[str, ...]
    """Locations fetched, in order (each at most once)."""
    related: tuple[str, ...]
    """Related documents that printed evidence (one hop)."""
    expanded_rows: int
    omitted: tuple[str, ...]
    fetch_limited: int
    decisions: tuple[Decision, ...] = ()
    """Every include and skip, in order; those spent add up to the closing count."""


WEAK_ASKED = 3
"""Informative words a query needs before its match can be judged weak: of two, the one
a best row lacks is as likely a synonym the documents do not use as a subject they lack."""


def weak(informative: tuple[int, int] | None) -> bool:
    """Whether a body match is weak: its best row holds at most one of the query's
    informative words (`protocol.INFORMATIVE`: held, asked) while the query has at least
    `WEAK_ASKED`. One word in common is a coincidence of vocabulary; two that meet in one
    section are a subject. For a question about something the documents do not hold, the
    table is all that is worth its tokens."""
    return informative is not None and informative[0] <= 1 and informative[1] >= WEAK_ASKED


async def select_evidence(
    head: str,
    rows: Sequence[TableRow],
    query: str,
    budget: int,
    fetch: FetchFn,
    informative: tuple[int, int] | None = None,
    telling: frozenset[str] | None = None,
) -> Selection:
    """Choose the evidence to append after `head` (envelope + table, whose rows are `rows`);
    `informative`: the lookup answer's (held, asked), and `telling` its informative words
    (`protocol.INFORMATIVE_WORDS`), when it sent them: the sections and paragraphs printed
    are those holding the most of these (of every query word when there are none)."""
    if informative is not None and weak(informative) and size(head) <= budget:
        return _weak_match(head, budget, rows, informative)
    asked = content_words(query)
    # every passage is chosen by the words that say what the question is about
    terms = [term for term in asked if term in telling] if telling else asked
    fetcher = Fetcher(fetch)
    # the rows alone could pass the fetch limit: keep its note's room from the start (when
    # the hop's targets could, from the row that declares them on: `show_rows`)
    may_hit = len({row.document for row in rows}) > MAX_FETCHES
    ledger = Ledger(head, budget, Tally(rows=len(rows), may_hit_fetch_limit=may_hit))
    hop = Hop(terms, {row.document for row in rows})
    if ledger.left() < 0:
        return await _table_too_large(head, budget, rows, fetcher, terms)

    page = Page(ledger)
    order = await show_rows(page, rows, fetcher, hop, terms)
    related = await hop.run(page, order, fetcher)
    on_page = order + [item.doc for item in related if item.doc not in order]
    newly = show_leftovers(page, on_page, related, terms)
    text = ledger.close()

    tally = ledger.tally
    documents = [item.doc.location for item in related] + [doc.location for doc in newly]
    return Selection(
        text,
        tuple(fetcher.order),
        tuple(documents),
        tally.expanded_rows,
        tuple(tally.omitted),
        tally.fetch_limited,
        tuple(ledger.decisions),
    )


async def expand(head: str, query: str, budget: int, fetch: FetchFn) -> str:
    """The text to append after `head`, an envelope and table held as text (benches that
    compare versions call this); "" when the budget is 0."""
    if budget <= 0:
        return ""
    table = Table.parse(head)
    return (await select_evidence(head, table.rows if table else (), query, budget, fetch)).text


def _weak_match(head: str, budget: int, rows: Sequence[TableRow], informative: tuple[int, int]) -> Selection:
    """One note instead of evidence, nothing fetched (the note is dropped when it does not
    fit beside the table)."""
    note = "\n" + frames.weak_match(*informative)
    head_tokens, whole = size(head), size(head + note)
    decisions = [Decision("", head_tokens, Action.TABLE, f"the envelope and the table of {len(rows)} rows")]
    if whole > budget:
        decisions.append(Decision("", size(note), Action.DROP, "the table fits and leaves no room even for this note"))
        note = ""
    else:  # what the note adds to the text: the decisions add up to the tokens printed
        decisions.append(Decision("", whole - head_tokens, Action.NOTE, "a weak match: no evidence is printed"))
    return Selection(note, (), (), 0, (), 0, tuple(decisions))


async def _table_too_large(
    head: str, budget: int, rows: Sequence[TableRow], fetcher: Fetcher, terms: Sequence[str]
) -> Selection:
    """One note instead of evidence; dropped when the table fits and the note does not."""
    head_tokens = size(head)
    note = await too_large(head_tokens, budget, rows, fetcher, terms)
    decisions = [Decision("", head_tokens, Action.TABLE, f"the envelope and the table of {len(rows)} rows")]
    if head_tokens <= budget and size(head + note) > budget:
        decisions.append(Decision("", size(note), Action.DROP, "the table fits and leaves no room even for this note"))
        note = ""
    else:
        decisions.append(Decision("", size(note), Action.NOTE, "the table leaves no room for evidence"))
    return Selection(note, tuple(fetcher.order), (), 0, (), 0, tuple(decisions))
