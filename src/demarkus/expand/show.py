"""Putting a candidate on the page: whole, as a one-line stub when its text is already
there, cut after its leading blocks, or as an excerpt of its best paragraphs; and a
document's lead (its banner and summary), for the rows' turn and the leftovers'. Pure.

Every function asks the ledger whether a text fits and records why it printed; none
counts tokens itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import frames
from .candidates import Candidate, Plan
from .document import Document
from .ledger import WHOLE_FLOOR, Action, size
from .page import Cut, Page, Pending, Uncovered
from .relevance import lead_sections, term_count


@dataclass(frozen=True, slots=True)
class Shown:
    """How a plan went: whether anything of the document printed, the tokens of the
    smallest block that did not (for the omission note), the first group that did not fit
    (its widest alternative, to print its best parts later) and the widest alternative of
    a group that printed narrower because of the allowance (its rest may print later)."""

    printed: bool
    need: int
    unfit: Candidate | None
    narrowed: Candidate | None


def show(
    page: Page, doc: Document, groups: Plan, turn: str, most: int | None = None, *, widest_only: bool = False
) -> Shown:
    """Print each group's first alternative that fits, in at most `most` tokens (with
    `widest_only`, only a section taken with its sub-sections is held to `most`, when its
    own text is the next alternative: the location stays the same)."""
    printed = False
    missing = 0
    unfit: Candidate | None = None
    narrowed: Candidate | None = None
    for group in groups:
        costs: list[int] = []
        capped = not widest_only or len(group) > 1 and group[1].anchor == group[0].anchor
        for number, cand in enumerate(group):
            allowance = most if capped and (number == 0 or not widest_only) else None
            need = show_one(page, doc, cand, turn, allowance)
            if need is None:
                printed = True
                if number and capped and most is not None and costs[0] > most and narrowed is None:
                    narrowed = group[0]
                break
            costs.append(need)
        else:
            missing = min(costs) if not missing else min(missing, *costs)
            if unfit is None:
                unfit = group[0]
    return Shown(printed, missing, unfit, narrowed)


def show_one(page: Page, doc: Document, cand: Candidate, turn: str, most: int | None = None) -> int | None:
    """Print the candidate (a block in at most `most` tokens), or a line standing for it
    when the page already shows its text. None when done, else the tokens that block or
    line would need."""
    ledger = page.ledger
    loc = doc.loc(cand.anchor)
    why = f"{turn}: {cand.what}"
    if cand.text is not None:
        block = frames.block(page.header(doc, cand.anchor), cand.text)
        if not ledger.spend(block, loc, Action.BLOCK, why, most):
            return size(block)
        page.stale_said.add(doc)
        return None
    covered = page.covering(doc, cand.start, cand.end)
    first = page.same_text(doc, cand.start, cand.end)
    if covered is not None or first is not None:
        if covered:
            line, why = frames.within(loc, covered), f"{turn}: already shown by {covered}"
        else:
            line, why = frames.same_text(loc, str(first)), f"{turn}: its text is printed at {first}"
        return None if ledger.spend(line, loc, Action.LINE, why) else size(line)
    shown = page.uncovered(doc, cand.start, cand.end)
    joined = None if cand.excerpt else page.continued(doc, loc, cand.start, shown)
    if joined is not None:
        cut, rest = joined
        block = frames.block(cut.header, cut.text.rstrip("\n") + "\n\n" + dressed(doc, cand, rest))
        if not ledger.extend_last(block, loc, Action.BLOCK, why + ": the rest of the block above", most):
            return size(block) - size(ledger.parts[-1])
        page.cut = None  # whole now: nothing of it is left to join
    else:
        block = frames.block(page.header(doc, cand.anchor), dressed(doc, cand, shown.text))
        if not ledger.spend(block, loc, Action.BLOCK, why + _elided(shown), most):
            return size(block)
    page.remember(doc, cand.start, cand.end, loc, shown)
    return None


def show_new(page: Page, doc: Document, cand: Candidate, turn: str, most: int | None = None) -> bool:
    """Print the candidate (in at most `most` tokens) unless the page already shows it."""
    return page.covering(doc, cand.start, cand.end) is None and show_one(page, doc, cand, turn, most) is None


def show_leading(page: Page, doc: Document, cand: Candidate, turn: str, most: int | None = None) -> bool:
    """Print the longest run of leading blocks of the candidate that fits (at most `most`
    blocks past what is already shown), closed by a line naming how much is left and
    where: the budget is used, never overrun."""
    if cand.text is not None or page.covering(doc, cand.start, cand.end) is not None:
        return False
    shown_to = page.shown_to(doc, cand.start)
    cuts = [c for c in doc.cuts if shown_to < c < cand.end][1:]  # the first block is the heading
    if most is not None:
        if len(cuts) < most:
            return False
        cuts = cuts[:most]
    loc, header = doc.loc(cand.anchor), page.header(doc, cand.anchor)

    def attempt(cut: int) -> tuple[str, Uncovered]:
        shown = page.uncovered(doc, cand.start, cut)
        tail = frames.rest(size(doc.text(cut, cand.end)), loc)
        return frames.block(header, shown.text.rstrip("\n") + "\n\n" + tail), shown

    low, high, best = 0, len(cuts) - 1, None
    while low <= high:  # the longest prefix that fits; token counts grow with the prefix
        middle = (low + high) // 2
        block, shown = attempt(cuts[middle])
        if page.ledger.fits(block):
            best, low = (cuts[middle], block, shown), middle + 1
        else:
            high = middle - 1
    if best is None:
        return False
    cut, block, shown = best
    page.ledger.spend(block, loc, Action.BLOCK, f"{turn}: {cand.what}, cut after its leading blocks")
    page.remember(doc, cand.start, cut, loc, shown)  # the range ends at the cut
    page.cut = Cut(doc, loc, cand.start, cut, header, shown.text, len(page.ledger.parts) - 1)
    return True


def show_excerpt(
    page: Page, doc: Document, cand: Candidate, best: Sequence[Candidate], allowance: int | None, turn: str
) -> bool:
    """Print, in one block, the blocks of `cand` holding the most query terms (`best`,
    best first) that fit in `allowance` tokens (None: in what is left), in document
    order: `[…]` where text is left out, closed by a line naming how much is left and
    where."""
    if cand.text is not None or page.covering(doc, cand.start, cand.end) is not None:
        return False
    loc = doc.loc(cand.anchor)
    body = doc.body
    section = doc.outline.find(cand.anchor)
    opening = section.heading_end if section is not None else cand.start
    total = size(doc.text(cand.start, cand.end))

    def render(chosen: list[Candidate]) -> str:
        pieces: list[str] = []
        cursor, kept, gaps = opening, 0, False
        for part in sorted(chosen, key=lambda c: c.start):
            if body[cursor : part.start].strip():
                pieces.append(frames.ELIDED)
                gaps = True
            text = doc.text(part.start, part.end)
            pieces.append(text.strip("\n"))
            kept += size(text)
            cursor = part.end
        if gaps or body[cursor : cand.end].strip():
            pieces.append(frames.rest(max(total - kept, 1), loc))
        return frames.block(page.header(doc, cand.anchor), "\n\n".join(pieces))

    chosen: list[Candidate] = []
    for part in best:
        if page.covering(doc, part.start, part.end) is not None:
            continue
        if page.ledger.fits(render([*chosen, part]), allowance):
            chosen.append(part)
    if not chosen:
        return False
    why = f"{turn}: {len(chosen)} of its paragraphs holding the most query terms"
    page.ledger.spend(render(chosen), loc, Action.BLOCK, why)
    for part in chosen:
        page.remember(doc, part.start, part.end, loc)
    return True


def print_relations(page: Page, doc: Document) -> None:
    """After a document's first block: one line per relation it declares, or one line
    counting them when they do not fit."""
    if doc in page.relations_printed:
        return
    page.relations_printed.add(doc)
    if not doc.relation_count:
        return
    ledger, loc = page.ledger, doc.loc()
    declared = (
        "the relation it declares" if doc.relation_count == 1 else f"the {doc.relation_count} relations it declares"
    )
    if ledger.spend(doc.relation_lines, loc, Action.RELATIONS, declared):
        return
    unlisted = frames.unlisted(loc, doc.relation_count)
    why = f"its {doc.relation_count} relations do not fit: counted"
    if not ledger.spend(unlisted, loc, Action.RELATIONS, why):
        ledger.skip(loc, size(doc.relation_lines), Action.DROP, "its relations: no room even to count them")


def show_note(page: Page, location: str, text: str, why: str) -> None:
    """A note about a location (a failed fetch, a missing section), once, when there is room."""
    note = frames.note(text)
    if note in page.notes:
        page.ledger.skip(location, 0, Action.DROP, f"{why}; the note above says so")
        return
    page.notes.add(note)
    if not page.ledger.spend(note, location, Action.NOTE, why):
        page.ledger.skip(location, size(note), Action.DROP, f"{why}; no room for the note")


def omit(
    page: Page, doc: Document, where: str, need: int, unfit: Candidate | None, turn: str, *, related: bool
) -> None:
    """Name what did not fit in the omission note, and keep its widest range for the
    leftover budget, where its best parts may still print."""
    why = f"{turn}: did not fit" + ("; its best parts wait for what is left" if unfit is not None else "")
    page.ledger.omit(where, need, why)
    if unfit is not None:
        page.pending.append(Pending(doc, unfit, where, need, related, turn))


def candidate_text(doc: Document, cand: Candidate) -> str:
    """The candidate's text as a block prints it when nothing of it is on the page yet."""
    if cand.text is not None:
        return cand.text
    return dressed(doc, cand, doc.text(cand.start, cand.end))


def dressed(doc: Document, cand: Candidate, text: str) -> str:
    """The candidate's text with its note (sub-sections not shown) and excerpt marks: `[…]`
    where its section has text before or after it."""
    if cand.note:
        text = text.rstrip("\n") + "\n\n" + cand.note + "\n"
    if not cand.excerpt:
        return text
    body = doc.body
    if cand.anchor:
        section = doc.outline.find(cand.anchor)
        if section is None:
            return text
        opening, closing = section.heading_end, section.own_end
    else:  # a passage of the preamble: the text before the first heading
        opening, closing = 0, len(doc.outline.preamble)
    before = body[opening : cand.start].strip()
    after = body[cand.end : closing].strip()
    marked = (f"{frames.ELIDED}\n\n" if before else "") + text.strip("\n")
    return marked + (f"\n\n{frames.ELIDED}" if after else "")


def _elided(shown: Uncovered) -> str:
    if not shown.elided:
        return ""
    return f" ({len(shown.elided)} part{'s' if len(shown.elided) != 1 else ''} already on the page left out)"


def show_leads(
    page: Page,
    docs: Sequence[Document],
    most: int | None,
    terms: Sequence[str],
    turn: str | None = None,
    *,
    title_text: bool | None = None,
) -> None:
    """The leads (banner, summary) of the documents, in page order: their first paragraph
    (`most=1`; a short lead whole) or the rest of each, whole or its leading blocks. A
    related document's lead only when it holds a query term, as its paragraphs print only
    then (its header already names it stale when it is). `turn` names the turn in the
    decisions (a lead's own by default); `title_text` keeps only the title's own text
    (True) or only the summaries (False)."""
    turn = turn or ("lead, first paragraph" if most == 1 else "lead")
    leads = [
        (doc, Candidate(s.anchor, s.start, s.own_end, "what it says it is"))
        for doc in docs
        if doc not in page.pinned
        for s in lead_sections(doc.outline)
        if title_text is None or (s.level == 1 and s is doc.outline.sections[0]) == title_text
        if doc not in page.via or not terms or term_count(doc.text(s.start, s.own_end), terms)
    ]
    for doc, cand in leads:
        if page.covering(doc, cand.start, cand.end) is not None or page.same_text(doc, cand.start, cand.end):
            continue
        blocks = len([c for c in doc.cuts if cand.start < c < cand.end])
        # whole when that is its first paragraph, or when it is short: a lead of a paragraph
        # or two is not held back (WHOLE_FLOOR), as a row's block is not
        whole = most is None or blocks <= 1 or size(doc.text(cand.start, cand.end)) <= WHOLE_FLOOR
        if not (whole and show_one(page, doc, cand, turn) is None):
            show_leading(page, doc, cand, turn, most)
