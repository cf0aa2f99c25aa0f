"""The rows' turn: each row of the table, in rank order, prints its evidence. Pure given
the fetcher.

The strongest match prints first, narrower when its sub-sections would crowd the page;
every later row prints whole only within its allowance (the ledger's `row_allowance`),
and a block over it waits for the leftovers. After each row the ledger keeps room for the
first block of every related target known so far that the hop keeps room for
(`hop.keeps_room`), so the rows cannot crowd out the hop, and, once there is a target,
for the closing to count related documents and (when the targets could pass it) to say
the fetch limit was reached; then a stale document's lead
(its status banner, its summary) prints its first paragraph, in the room left.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import frames
from .candidates import AnchorMissing, plan
from .document import Document, Fetcher, FetchFailed
from .hop import Hop
from .ledger import size
from .page import Page, Pending
from .show import omit, print_relations, show, show_leads, show_note
from .table import TableRow


async def show_rows(
    page: Page, rows: Sequence[TableRow], fetcher: Fetcher, hop: Hop, terms: Sequence[str]
) -> list[Document]:
    """Give every row its turn; returns the documents that printed, in page order."""
    ledger, tally = page.ledger, page.ledger.tally
    allowance = ledger.row_allowance()
    order: list[Document] = []
    for index, row in enumerate(rows):
        turn = f"row {index + 1}"
        if not fetcher.known(row.document) and fetcher.exhausted():
            ledger.over_fetch_limit(row.location, turn)
            continue
        got = await fetcher.get(row.document)
        if isinstance(got, FetchFailed):
            show_note(page, row.location, got.note, f"{turn}: the fetch failed")
            continue
        groups = plan(got, row.anchor, terms)
        if isinstance(groups, AnchorMissing):
            show_note(page, row.location, groups.note, f"{turn}: no such section")
            continue
        shown = show(page, got, groups, turn, allowance, widest_only=not order)
        if shown.narrowed is not None:
            page.pending.append(Pending(got, shown.narrowed, row.location, 0, False, turn, rest=True))
        if shown.printed:
            tally.expanded_rows += 1
            if got not in order:
                order.append(got)
            print_relations(page, got)
        else:
            omit(page, got, row.location, shown.need, shown.unfit, turn, related=False)
        unfetched = fetcher.unknown({later.document for later in rows[index + 1 :]})
        ledger.reserve("hop", await hop.room(order, fetcher, unfetched))
        if hop.targets(order):
            ledger.keep_related_clause()
        if hop.may_pass_fetch_limit(order, fetcher, unfetched):
            ledger.keep_fetch_limit_note()
        if shown.printed and got.stale:
            # stale text is read with what made it stale (a withdrawal notice, "superseded
            # by ... on ..."), not after the later rows: its lead follows at once, in the
            # room the hop's reservation leaves
            show_leads(page, [got], 1, terms, f"{turn}, stale: lead, first paragraph")
    ledger.reserve("hop", 0)
    return order


async def too_large(
    head_tokens: int, budget: int, rows: Sequence[TableRow], fetcher: Fetcher, terms: Sequence[str]
) -> str:
    """Say in one line that the table leaves no room, with the budget that would show the
    top row's evidence (and about 60 tokens for the closing notes)."""
    need = head_tokens + 60
    if rows:
        got = await fetcher.get(rows[0].document)
        if isinstance(got, Document):
            groups = plan(got, rows[0].anchor, terms)
            if not isinstance(groups, AnchorMissing) and groups:
                cand = groups[0][-1]
                text = cand.text or got.text(cand.start, cand.end)
                need += size(frames.block(got.loc(cand.anchor), text))
    first = frames.word(rows[0].location) if rows else "a row"
    if head_tokens > budget:
        over = f"over the budget of {budget}"
    else:
        over = f"of the budget of {budget}, leaving no room for evidence"
    return "\n" + frames.note(
        f"the table alone is {head_tokens} tokens, {over}; "
        f"raise the budget to {need} for the top row's evidence, or fetch {first}"
    )
