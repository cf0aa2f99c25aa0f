"""The one typed hop: the related documents a multi-document question needs next. Pure
given the fetcher.

Related documents come only from the expanded documents' own `rel-*` metadata (no graph
store: the hop is fresh by construction and identical on every surface): targets of the
preferred predicates, on the same authority, not already in the table, at most
MAX_RELATED, never followed further. While rows have their turn, the ledger keeps room for
the first block of each target known so far that its relation says is needed (see
`keeps_room`); after them, each target shows its best, and what more of it could print
waits for the leftovers. A target's best is chosen by the query's informative words when
the authority names them (`protocol.INFORMATIVE_WORDS`), as every passage is: a
prerequisite met through words every other document holds too is noise, and one holding
none prints only its relation line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import frames
from .candidates import AnchorMissing, Plan, plan
from .document import MAX_FETCHES, Document, Fetcher, FetchFailed, Target
from .ledger import MAX_RELATED, Action, size
from .page import Page
from .show import candidate_text, omit, print_relations, show, show_note

SUCCESSION = frozenset({"supersedes", "superseded-by"})
"""Predicates that tie a document to the other versions of the same rule."""


def keeps_room(source: Document, target: Target) -> bool:
    """Whether the rows keep room for the target's first block: when the relation says the
    target is needed. A successor or predecessor always: without it the document's own
    text may no longer hold. A named section: the relation says which part. Another whole
    document only when it is the document's one target of that predicate: of several
    prerequisites a question needs one the relations cannot name (a proposal may require
    seven others), and room kept for each crowds out the rows. Those targets still print
    after the rows, in what they leave."""
    if target.predicate in SUCCESSION or target.fragment:
        return True
    return sum(1 for other in source.targets if other.predicate == target.predicate) == 1


@dataclass(frozen=True, slots=True)
class Related:
    """A related document that printed, and what more of it could print later."""

    doc: Document
    more: Plan


class Hop:
    """The related targets of one lookup: each target's plan and first-block size, worked
    out once (the room kept for the hop and the hop itself both need them)."""

    def __init__(self, terms: Sequence[str], in_table: set[str]) -> None:
        self.terms = terms
        """The query words a target's blocks are chosen by."""
        self.in_table = in_table
        self._plans: dict[tuple[Document, str], Plan | AnchorMissing] = {}
        self._sizes: dict[str, int | None] = {}

    def targets(self, order: Sequence[Document]) -> list[tuple[Document, Target]]:
        """(declaring document, target) of every target the hop may follow, in its order:
        those it keeps room for first (`keeps_room`), then by document, then by predicate
        preference."""
        pairs = [(doc, target) for doc in order for target in doc.targets if target.location not in self.in_table]
        return sorted(pairs, key=lambda pair: not keeps_room(*pair))

    def plan(self, doc: Document, fragment: str) -> Plan | AnchorMissing:
        key = (doc, fragment)
        if key not in self._plans:
            self._plans[key] = plan(doc, fragment, self.terms, related=True)
        return self._plans[key]

    def may_pass_fetch_limit(self, order: Sequence[Document], fetcher: Fetcher, unfetched: int) -> bool:
        """Whether the `unfetched` rows still to come and every target known so far could
        ask for more documents than the fetch limit allows (a target that prints nothing
        does not count towards MAX_RELATED, so the hop may try them all)."""
        targets = {target.location for _, target in self.targets(order)}
        return fetcher.count + unfetched + fetcher.unknown(targets) > MAX_FETCHES

    async def room(self, order: Sequence[Document], fetcher: Fetcher, unfetched: int) -> int:
        """Tokens the first blocks of the related targets known so far would take (the
        first MAX_RELATED the hop would print, in its order, of those it `keeps_room`
        for), with their relation lines. A target is fetched for this only when the rows
        still to come keep their fetches."""
        room, counted, seen = 0, 0, set()
        for source, target in self.targets(order):
            if counted >= MAX_RELATED:
                break
            if not keeps_room(source, target):
                continue
            if target.location in seen:
                continue
            seen.add(target.location)
            if target.location not in self._sizes:
                if not fetcher.known(target.location) and fetcher.count + unfetched >= MAX_FETCHES:
                    continue
                got = await fetcher.get(target.location)
                self._sizes[target.location] = self._first_block_size(source, target, got)
            tokens = self._sizes[target.location]
            if tokens is not None:
                room += tokens
                counted += 1
        return room

    def _first_block_size(self, source: Document, target: Target, got: Document | FetchFailed) -> int | None:
        """Tokens of a target's first block at its smallest, with its relation lines; None
        when it cannot print (a failed fetch, an unknown anchor: the hop says so)."""
        if isinstance(got, FetchFailed):
            return None
        groups = self.plan(got, target.fragment)
        if isinstance(groups, AnchorMissing) or not groups:
            return None
        header = frames.via(source.loc(), target.predicate)
        if not got.stale_said_by(source, target.predicate):
            header += got.stale
        first = min(size(frames.block(got.loc(c.anchor) + header, candidate_text(got, c))) for c in groups[0])
        return first + size(got.relation_lines)

    async def run(self, page: Page, order: Sequence[Document], fetcher: Fetcher) -> list[Related]:
        """Up to MAX_RELATED targets of the expanded documents, one hop: each target's best
        evidence."""
        ledger, tally = page.ledger, page.ledger.tally
        seen: set[str] = set()
        done: list[Related] = []
        for source, target in self.targets(order):
            if tally.related >= MAX_RELATED:
                break
            location = target.location
            if location in seen:
                continue
            seen.add(location)
            turn = f"related via {source.loc()} {target.predicate}"
            if not fetcher.known(location) and fetcher.exhausted():
                ledger.over_fetch_limit(location, turn)
                continue
            got = await fetcher.get(location)
            if isinstance(got, FetchFailed):
                show_note(page, location, got.note, f"{turn}: the fetch failed")
                continue
            groups = self.plan(got, target.fragment)
            if isinstance(groups, AnchorMissing):
                show_note(page, location, groups.note, f"{turn}: no such section")
                continue
            if not groups:  # its relation line, printed with the source, is all it adds
                ledger.skip(location, 0, Action.DROP, f"{turn}: no paragraph of it holds a query word")
                continue
            page.via[got] = frames.via(source.loc(), target.predicate)
            if got.stale_said_by(source, target.predicate):
                page.stale_said.add(got)
            if target.fragment:
                page.pinned.add(got)
            first = show(page, got, groups[:1], turn)
            printed, need, more = first.printed, first.need, groups[1:]
            if not printed and more:  # its best did not fit: anything of it that does
                after = show(page, got, more, turn)
                printed, need, more = after.printed, min(need, after.need or need), []
            if printed:
                tally.related += 1
                done.append(Related(got, more))
                print_relations(page, got)
            else:
                where = location + (f"#{target.fragment}" if target.fragment else "")
                omit(page, got, where, need, first.unfit, turn, related=True)
        return done
