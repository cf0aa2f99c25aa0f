"""The leftovers' turn: what is left of the budget after every row and the hop. Pure.

In order: the first paragraph of every document's lead (its title's own text, such as a
status banner, and its summary; a short lead whole; a related document's only when it holds
a query term), in page order; more of each related
document (its further paragraphs); the rest of each summary; then the blocks that did not
fit whole in their turn, each sharing what is left with those after it: whole when it fits,
else its paragraphs holding the most query terms (beyond its share when none fits in it),
else nothing (the omission note names it); last the rest of each title's own text.
"""

from __future__ import annotations

from collections.abc import Sequence

from .candidates import Candidate, passages
from .document import Document
from .hop import Related
from .ledger import MAX_RELATED, Action
from .page import Page, Pending
from .show import print_relations, show_excerpt, show_leads, show_new

PENDING_PASSAGES = 8
"""Passages tried, for a block that did not fit whole, with the budget left at the end."""


def show_leftovers(
    page: Page, docs: Sequence[Document], related: Sequence[Related], terms: Sequence[str]
) -> list[Document]:
    """Spend what is left; returns related documents that printed here for the first time."""
    page.ledger.keep_first_listed()
    show_leads(page, docs, 1, terms)
    for item in related:
        for group in item.more:
            for cand in group:
                if show_new(page, item.doc, cand, "more of a related document"):
                    break
    show_leads(page, docs, None, terms, title_text=False)
    newly = _show_pending(page, docs, terms)
    # a title's own text (an introduction, a byline: its first paragraph already printed)
    # after the blocks that waited: what the search ranked for the question comes first
    show_leads(page, docs, None, terms, title_text=True)
    return newly


def _show_pending(page: Page, docs: Sequence[Document], terms: Sequence[str]) -> list[Document]:
    """The blocks that did not fit whole in their turn, in that order, each sharing what is
    left with those after it."""
    ledger, tally = page.ledger, page.ledger.tally
    newly: list[Document] = []
    for index, item in enumerate(page.pending):
        fresh = item.doc not in docs and item.doc not in newly
        if item.related and fresh and tally.related >= MAX_RELATED:
            _left_out(page, item, f"the hop already printed {MAX_RELATED} related documents")
            continue
        if ledger.left() <= 0:
            for later in page.pending[index:]:
                _left_out(page, later, "nothing is left")
            break
        share = ledger.share(len(page.pending) - index)
        cand, turn = item.candidate, f"{item.turn}, left over"
        covered = page.covering(item.doc, cand.start, cand.end)
        if covered is not None:
            ledger.skip(item.location, 0, Action.DROP, f"{turn}: already shown by {covered}")
            continue
        if not show_new(page, item.doc, cand, turn, share) and not _show_part(page, item, share, turn, terms):
            _left_out(page, item, f"nothing of it fits in its share of {share} tokens")
            continue
        if item.rest:
            continue
        if item.label in tally.omitted:
            tally.omitted.remove(item.label)
        if not item.related:
            tally.expanded_rows += 1
        elif fresh:
            tally.related += 1
            newly.append(item.doc)
        print_relations(page, item.doc)
    return newly


def _show_part(page: Page, item: Pending, share: int, turn: str, terms: Sequence[str]) -> bool:
    """Print part of a waiting block that does not fit whole in its share: its paragraphs
    holding the most query terms, within its share; when none fits there and nothing of
    the block printed in its turn, within what is left (the blocks wait in rank order, so
    a better-ranked block's best paragraph goes before the shares of those after it, and the
    query's words choose it, as within a share). Never its leading blocks: when none of
    its paragraphs holding a query term fits, what opens it is rarely what was asked, and
    the omission note (or the narrower block's closing line) names it for a fetch."""
    doc, cand = item.doc, item.candidate
    best = _best_parts(doc, cand, terms)
    if show_excerpt(page, doc, cand, best, share, turn):
        return True
    return not item.rest and show_excerpt(page, doc, cand, best, None, turn)


def _left_out(page: Page, item: Pending, why: str) -> None:
    """Record that a waiting block did not print at the end either."""
    if item.rest:
        page.ledger.skip(item.location, 0, Action.DROP, f"{item.turn}, left over: the rest of its section; {why}")
    else:
        page.ledger.skip(item.location, item.need, Action.OMIT, f"{item.turn}, left over: {why}")


def _best_parts(doc: Document, cand: Candidate, terms: Sequence[str]) -> list[Candidate]:
    if cand.text is not None:
        return []
    return passages(doc, terms, PENDING_PASSAGES, within=(cand.start, cand.end), merge=False)
