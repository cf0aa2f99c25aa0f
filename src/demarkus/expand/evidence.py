"""Budgeted evidence selection: the table plus the passages and the one typed hop a
question needs, inside one token budget. Pure given a fetch function.

The budget (o200k_base tokens) covers the WHOLE result: envelope, table, blocks, relation
lines and notes. Output grammar, every line that starts with `>>> `:

```
>>> /a.md/v3#decision                                 a block: the evidence follows, then a blank line
>>> /b.md/v1 (via /a.md/v3 supersedes)                a related block, headed with the relation
>>> rel: /a.md/v3 supersedes /b.md                    one declared relation of an expanded document
>>> /a.md/v3#hashes: within /a.md/v3#checks above     a row already shown by an earlier block
>>> /c.md/v2#x: same text as /a.md/v3#y above         byte-identical text printed once
>>> note: ...                                         failures, omissions, the closing count
```
Inside a block, `[…]` stands where text of its section is left out, and a last line
`[… ~N tokens more: fetch LOC]` says how much of the block's range is not shown.
The location of a frame is its first word; a block's text belongs to that location.

Choices: a later row whose section ENCLOSES earlier blocks of its document prints only the
part not yet shown, with `[#anchor shown above]` where an earlier block sits; a row whose
whole range is already shown prints one `within` line. Related documents come only from
the fetched documents' own `rel-*` metadata (no graph store), one hop, same authority.
A related document shows, whole when small, else what it is (its summary section, when
that holds a query term) and its paragraphs holding the most query terms; every target
shows its best before any shows more. A row's turn keeps room for the first block of every
related target known so far, and prints a large block (over a third of the evidence
budget) only later: one section cannot crowd out the hop or the rows after it. What is
left at the end goes to the leads of the documents on the page, then to the blocks that
did not fit whole in their turn: whole when they fit, else their paragraphs holding the
most query terms, in document order.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import DemarkusError
from ..index.query import content_words
from ..markdown import PREFERRED, Outline, Section, outline_text, parse_blocks, parse_relations
from ..protocol import parse_mark_url
from ..tokens import count_tokens
from .relevance import lead_sections, opening_with_terms, ranked_blocks, sections_by_terms, whole_h1
from .rows import Fetched, FetchFn, TableRow, table_rows

MAX_FETCHES = 10
MAX_RELATED = 3
WHOLE_LIMIT = 8192
OMITTED_SHOWN = 5
SECTIONS_PER_DOCUMENT = 2
"""Sections printed for a document reached without an anchor (large documents)."""
PASSAGES_PER_DOCUMENT = 3
"""Passages offered for a related document reached without an anchor: its blocks holding
the most query terms."""
PENDING_PASSAGES = 8
"""Passages tried, for a block that did not fit whole, with the budget left at the end."""
WHOLE_SHARE = 3
"""A row prints a block whole in its turn only within 1/WHOLE_SHARE of the evidence budget
(what the table leaves): the top row's section together with its sub-sections, and every
later row's block. A larger block waits for the leftover budget, where its paragraphs
holding the most query terms print; one large section cannot crowd out the rest."""
WHOLE_FLOOR = 100
"""...but a block of up to this many tokens (a paragraph or two) is never held back."""
ELIDED = "[…]"
"""Where an excerpt leaves out text of its section."""

FRAME = ">>>"


# --- small pure pieces ------------------------------------------------------------------


def _guard_frames(text: str) -> str:
    return re.sub(r"(?m)^>>>", " >>>", text)


def render_block(header: str, text: str) -> str:
    return f"{FRAME} {header}\n\n{_guard_frames(text).strip(chr(10))}\n\n"


def render_line(text: str) -> str:
    return f"{FRAME} {text}\n"


@dataclass(eq=False)
class _Doc:
    """A fetched document and what of it is already on the page."""

    location: str
    """How rows name it: `/a.md` or `mark://world/a.md`."""
    fetched: Fetched
    outline: Outline
    cuts: list[int]
    """Where a long range may be cut (block and list item starts)."""
    shown: list[tuple[int, int, str]] = field(default_factory=list)
    relations_done: bool = False
    suffix: str = ""
    """How its blocks are headed after the location: `(via ...)` for a related document."""
    pinned: bool = False
    """Reached through a `path#anchor` relation: that section is what it is here for."""
    related_plans: dict[str, list[list[_Candidate]] | str] = field(default_factory=dict)
    """`candidates_for` it as a related target, by fragment (the query is one per page)."""

    @functools.cached_property
    def relations(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        """Its `rel:` lines, and the same-authority targets the hop may follow."""
        return _relation_lines(self)

    def loc(self, anchor: str = "") -> str:
        pinned = f"{self.location}/v{self.fetched.version}" if self.fetched.version else self.location
        return f"{pinned}#{anchor}" if anchor else pinned

    def covering(self, start: int, end: int) -> str | None:
        for s, e, loc in self.shown:
            if s <= start and end <= e:
                return loc
        return None

    def uncovered(
        self, start: int, end: int, texts: dict[str, str]
    ) -> tuple[str, list[tuple[int, int, str]], list[Section]]:
        """The text of [start, end) with what is already on the page replaced by one-line
        markers: earlier blocks of this document, and sections whose text is byte-identical
        to one printed elsewhere. Also returns the elided ranges and the sections printed
        in full (to remember their text)."""
        body = self.fetched.body
        elided: list[tuple[int, int, str]] = [
            (s, e, f"[#{_anchor_of(loc)} shown above]") for s, e, loc in self.shown if s < end and start < e
        ]
        full: list[Section] = []
        for section in self.outline.sections:
            if not (start <= section.start and section.end <= end):
                continue
            if any(s <= section.start and section.end <= e for s, e, _ in elided):
                continue
            first = texts.get(_digest(body[section.start : section.end]))
            if first is not None:
                elided.append((section.start, section.end, f"[#{section.anchor}: same text as {first} above]"))
                continue
            own = texts.get(_digest(body[section.start : section.own_end]))
            if own is not None and section.own_end > section.start:
                elided.append((section.start, section.own_end, f"[#{section.anchor}: same text as {own} above]"))
            full.append(section)
        elided.sort()
        pieces: list[str] = []
        cursor = start
        for s, e, marker in elided:
            if s > cursor:
                pieces.append(body[cursor:s].decode("utf-8", errors="replace"))
            if e > cursor:
                pieces.append(marker + "\n\n")
            cursor = max(cursor, e)
        if cursor < end:
            pieces.append(body[cursor:end].decode("utf-8", errors="replace"))
        printed = [sec for sec in full if not any(s < sec.own_end and sec.start < e for s, e, _ in elided)]
        return "".join(pieces), elided, printed


def _anchor_of(loc: str) -> str:
    return loc.split("#", 1)[1] if "#" in loc else loc


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class _Candidate:
    """One way to show a row: a byte range with its anchor, or a synthetic text (outline)."""

    anchor: str
    start: int
    end: int
    text: str | None = None
    note: str = ""
    excerpt: bool = False
    """Part of the section `anchor`: the text it leaves out is marked."""


def passages(
    doc: _Doc,
    terms: Sequence[str],
    most: int = PASSAGES_PER_DOCUMENT,
    skip: Section | None = None,
    within: tuple[int, int] | None = None,
    merge: bool = True,
) -> list[_Candidate]:
    """The document's blocks (or those of its range `within`) holding the most distinct
    query terms, as excerpts of their sections: best first, at most `most`, adjacent ones
    merged unless `merge` is false. In a long document the answer is a paragraph; a whole
    section would spend the budget around it."""
    ranked = ranked_blocks(doc.outline, doc.fetched.body, doc.cuts, terms, within=within, skip=skip)
    best = [(rank, block.start, block.end, block.section) for rank, block in enumerate(ranked[:most])]
    if merge:
        runs: list[tuple[int, int, int, Section]] = []
        for rank, start, end, section in sorted(best, key=lambda item: item[1]):
            if runs and runs[-1][2] == start and runs[-1][3] is section:
                runs[-1] = (min(runs[-1][0], rank), runs[-1][1], end, section)
            else:
                runs.append((rank, start, end, section))
        best = sorted(runs, key=lambda item: item[0])
    return [_Candidate(section.anchor, start, end, excerpt=True) for _, start, end, section in best]


def _excerpt_text(doc: _Doc, cand: _Candidate, text: str) -> str:
    """Mark where the excerpt's section has text before or after it."""
    section = doc.outline.find(cand.anchor)
    if section is None:
        return text
    body = doc.fetched.body
    before = body[section.heading_end : cand.start].strip()
    after = body[cand.end : section.own_end].strip()
    return (f"{ELIDED}\n\n" if before else "") + text.strip("\n") + (f"\n\n{ELIDED}" if after else "")


def candidates_for(
    doc: _Doc, anchor: str, terms: Sequence[str], *, related: bool = False
) -> list[list[_Candidate]] | str:
    """How to show a document or one of its sections, as groups of alternatives: each group
    prints its first alternative that fits. A string is a note (unknown anchor). A related
    document without anchor leads with its opening section when that holds a query term."""
    outline = doc.outline
    if anchor:
        section = outline.find(anchor)
        if section is None:
            return f"{doc.location}: section #{anchor} not found"
        whole = _Candidate(section.anchor, section.start, section.end)
        if section.own_end < section.end:  # fallback: the section without its sub-sections
            subs = [s.anchor for s in outline.sections if s.parent == section.anchor]
            note = "[sub-sections not shown: " + ", ".join(f"#{a}" for a in subs) + "]"
            return [[whole, _Candidate(section.anchor, section.start, section.own_end, note=note)]]
        return [[whole]]
    body = doc.fetched.body
    small = len(body) < WHOLE_LIMIT
    h1 = whole_h1(outline)
    whole = _Candidate(h1.anchor if h1 else "", 0, len(body))
    opening = opening_with_terms(outline, terms) if related else None
    if related:
        found = passages(doc, terms, skip=opening)
        if found:  # whole when small and it fits, else what it is, then its best paragraphs
            lead = _Candidate(opening.anchor, opening.start, opening.own_end) if opening else found.pop(0)
            return [[whole, lead] if small else [lead], *([cand] for cand in found)]
    matching = sections_by_terms(outline, terms, SECTIONS_PER_DOCUMENT)
    if opening is not None:
        matching = [opening, *(s for s in matching if s is not opening)][:SECTIONS_PER_DOCUMENT]
    if small:  # whole when it fits, else the section holding the most query terms
        return [[whole, *(_Candidate(s.anchor, s.start, s.own_end) for s in matching)]]
    if matching:
        return [[_Candidate(s.anchor, s.start, s.own_end)] for s in matching]
    return [[_Candidate("", 0, 0, text=outline_text(outline) or "(document has no headings)")]]


# --- the selection ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Pending:
    """A block that did not fit whole: its leading blocks may still fit at the end."""

    doc: _Doc
    candidate: _Candidate
    label: str
    """Its entry in the omission note."""
    related: bool
    terms: Sequence[str]
    """The query's terms, to choose its paragraphs when its turn comes."""
    rest: bool = False
    """The wider range of a block that printed narrower: already counted, not omitted."""


@dataclass
class _Page:
    """Everything printed so far, and the bookkeeping the closing notes report.

    Budget exactness: every part ends with a newline and the next starts with `>>>`, a
    boundary no o200k pre-token crosses, so token counts add up part by part. A part is
    added only if the result still fits with the longest form of the closing notes; the
    final text then lists as many omissions (at most OMITTED_SHOWN) as the budget allows,
    and is counted whole once more to be sure.
    """

    head: str
    budget: int
    head_tokens: int = 0
    """Tokens of the head plus the blank line that opens the expansion."""
    parts: list[str] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)
    expanded_rows: int = 0
    related: int = 0
    rows: int = 0
    fetch_limited: int = 0
    may_hit_fetch_limit: bool = False
    texts: dict[str, str] = field(default_factory=dict)
    """sha256 of printed evidence text -> first location."""
    pending: list[_Pending] = field(default_factory=list)
    """Blocks that did not fit whole, in the order they had their turn."""
    listing: int = 0
    """Tokens kept for the closing notes naming the first omission (keep_first_listed)."""
    hop: int = 0
    """Tokens kept, while rows have their turn, for the first block of each related target
    known so far: the one typed hop is what a multi-document question needs next."""

    def __post_init__(self) -> None:
        self.head_tokens = count_tokens(self.head + "\n")

    def _notes(self, listed: int, *, reserve: bool = False) -> str:
        lines: list[str] = []
        if self.omitted or reserve:
            count = max(len(self.omitted), 99 if reserve else 0)
            shown = self.omitted[:listed]
            more = count - len(shown)
            items = ", ".join(shown) + (
                f" +{more} more" if shown and more else f"{more} block{'s' if more != 1 else ''}" if not shown else ""
            )
            lines.append(render_line(f"note: did not fit: {items}"))
        if self.fetch_limited or (reserve and self.may_hit_fetch_limit):
            count = max(self.fetch_limited, 99 if reserve else 0)
            lines.append(render_line(f"note: fetch limit of {MAX_FETCHES} documents reached; {count} not fetched"))
        return "".join(lines)

    def _closing(self, used: int, *, reserve: bool = False) -> str:
        related = MAX_RELATED if reserve else self.related
        expanded = self.rows if reserve else self.expanded_rows
        clause = f" and {related} related document{'s' if related != 1 else ''}" if related else ""
        return render_line(
            f"note: expanded {expanded} of {self.rows} rows{clause}; used {used} of {self.budget} tokens"
        )

    def omit(
        self,
        doc: _Doc,
        location: str,
        anchor: str,
        cost: int,
        unfit: _Candidate | None,
        terms: Sequence[str],
        *,
        related: bool,
    ) -> None:
        """List what did not fit in the omission note, and keep it for the leftover budget."""
        label = f"{location}{'#' + anchor if anchor else ''} (~{cost} tokens)"
        self.omitted.append(label)
        if unfit is not None:
            self.pending.append(_Pending(doc, unfit, label, related, terms))

    @functools.cached_property
    def _reserve(self) -> int:
        return count_tokens(self._notes(0, reserve=True)) + count_tokens(self._closing(999_999, reserve=True))

    def reserved(self) -> int:
        """Tokens kept back: what the closing notes may need at most (their longest form),
        plus, while rows have their turn, the room kept for the hop."""
        return max(self._reserve, self.listing) + self.hop

    def keep_first_listed(self) -> None:
        """From now on keep room to name the first thing that did not fit, so the budget
        left at the end never turns a visible omission into a bare count."""
        self.listing = count_tokens(self._notes(1, reserve=True)) + count_tokens(self._closing(999_999, reserve=True))

    def left(self) -> int:
        """Tokens still free for evidence."""
        return self.budget - self.head_tokens - sum(self.costs) - self.reserved()

    def fits(self, extra: str) -> bool:
        return self.head_tokens + sum(self.costs) + count_tokens(extra) + self.reserved() <= self.budget

    def add(self, extra: str) -> bool:
        if self.fits(extra):
            self.parts.append(extra)
            self.costs.append(count_tokens(extra))
            return True
        return False

    def _assemble(self, listed: int) -> tuple[str, int]:
        body = "\n" + "".join(self.parts) + self._notes(listed)
        used = self.head_tokens + sum(self.costs) + count_tokens(self._notes(listed))
        for _ in range(3):  # the count includes the line stating it; settle the number
            closing = self._closing(used)
            settled = self.head_tokens + sum(self.costs) + count_tokens(self._notes(listed)) + count_tokens(closing)
            if settled == used:
                break
            used = settled
        text = body + self._closing(used)
        return text, count_tokens(self.head + text)

    def text(self) -> str:
        for listed in range(min(OMITTED_SHOWN, len(self.omitted)), -1, -1):
            text, total = self._assemble(listed)
            if total <= self.budget:
                return text
        return text


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


class _Fetcher:
    """At most MAX_FETCHES documents, each fetched once, failures remembered."""

    def __init__(self, fetch: FetchFn) -> None:
        self._fetch = fetch
        self.docs: dict[str, _Doc | str] = {}
        self.count = 0
        self.order: list[str] = []

    def known(self, location: str) -> bool:
        return location in self.docs

    def exhausted(self) -> bool:
        return self.count >= MAX_FETCHES

    async def get(self, location: str) -> _Doc | str:
        if location in self.docs:
            return self.docs[location]
        self.count += 1
        self.order.append(location)
        try:
            fetched = await self._fetch(location)
        except DemarkusError as exc:
            self.docs[location] = f"{location}: {exc}"
        else:
            self.docs[location] = _Doc(location, fetched, *parse_blocks(fetched.body))
        return self.docs[location]


def _authority_prefix(location: str) -> str:
    if location.lower().startswith("mark://"):
        return parse_mark_url(location).authority
    return ""


def _relation_lines(doc: _Doc) -> tuple[list[str], list[tuple[str, str, str]]]:
    """One line per declared relation; plus (predicate, fetch location, fragment) of
    same-authority targets, in preference order."""
    prefix = _authority_prefix(doc.location)
    base = doc.location
    relations, _ = parse_relations(doc.fetched.metadata, base)
    lines: list[str] = []
    follow: list[tuple[str, str, str]] = []
    for rel in relations:
        target = rel.target + (f"#{rel.fragment}" if rel.fragment else "")
        shown = target if rel.authority else prefix + target if prefix else target
        lines.append(render_line(f"rel: {doc.loc()} {rel.predicate} {shown}"))
        if rel.authority is None and rel.predicate in PREFERRED:
            follow.append((rel.predicate, prefix + rel.target, rel.fragment))
    follow.sort(key=lambda item: PREFERRED.index(item[0]))
    return lines, follow


def _show(
    page: _Page, doc: _Doc, groups: list[list[_Candidate]], most: int | None = None, *, widest_only: bool = False
) -> tuple[bool, int, _Candidate | None, _Candidate | None]:
    """Print each group's first alternative that fits, in at most `most` tokens (with
    `widest_only`, only a section taken with its sub-sections is held to `most`, when its
    own text is the next alternative: the location stays the same). Returns whether
    anything of the document is now on the page for this row, the tokens of the smallest
    block that did not fit (for the omission note), the first group that did not fit (its
    first alternative, to print its best blocks later), and the widest alternative of a
    group that printed narrower because of `most` (its rest may print later)."""
    shown_any = False
    missing = 0
    unfit: _Candidate | None = None
    narrowed: _Candidate | None = None
    for group in groups:
        costs: list[int] = []
        capped = not widest_only or len(group) > 1 and group[1].anchor == group[0].anchor
        for number, cand in enumerate(group):
            need = _show_one(page, doc, cand, most if capped and (number == 0 or not widest_only) else None)
            if need is None:
                shown_any = True
                if number and capped and most is not None and costs[0] > most and narrowed is None:
                    narrowed = group[0]
                break
            costs.append(need)
        else:
            missing = min(costs) if not missing else min(missing, *costs)
            if unfit is None:
                unfit = group[0]
    return shown_any, missing, unfit, narrowed


def _show_one(page: _Page, doc: _Doc, cand: _Candidate, most: int | None = None) -> int | None:
    """Print the candidate (a block in at most `most` tokens), or a line standing for it
    when the page already shows its text. None when done, else the tokens that block or
    line would need."""
    loc = doc.loc(cand.anchor)
    if cand.text is not None:
        block = render_block(loc + doc.suffix, cand.text)
        return None if _add_block(page, block, most) else count_tokens(block)
    covered = doc.covering(cand.start, cand.end)
    digest = _digest(doc.fetched.body[cand.start : cand.end])
    if covered is not None or digest in page.texts:
        line = render_line(
            f"{loc}: within {covered} above" if covered else f"{loc}: same text as {page.texts[digest]} above"
        )
        return None if page.add(line) else count_tokens(line)
    text, elided, printed = doc.uncovered(cand.start, cand.end, page.texts)
    block = render_block(loc + doc.suffix, _dressed(doc, cand, text))
    if not _add_block(page, block, most):
        return count_tokens(block)
    _remember(page, doc, cand.start, cand.end, loc, elided, printed)
    return None


def _add_block(page: _Page, block: str, most: int | None) -> bool:
    return (most is None or count_tokens(block) <= most) and page.add(block)


def _remember(
    page: _Page, doc: _Doc, start: int, end: int, loc: str, elided: list[tuple[int, int, str]], printed: list[Section]
) -> None:
    """Record [start, end) of `doc` as on the page, and the texts printed whole in it."""
    doc.shown.append((start, end, loc))
    body = doc.fetched.body
    if not elided:
        page.texts.setdefault(_digest(body[start:end]), loc)
    for section in printed:  # their own text is on the page; the subtree too unless elided or cut
        page.texts.setdefault(_digest(body[section.start : section.own_end]), doc.loc(section.anchor))
        if section.end <= end and not any(s < section.end and section.start < e for s, e, _ in elided):
            page.texts.setdefault(_digest(body[section.start : section.end]), doc.loc(section.anchor))


def _show_leading(page: _Page, doc: _Doc, cand: _Candidate, most: int | None = None) -> bool:
    """Print the longest run of leading blocks of the candidate that fits (at most `most`
    blocks past what is already shown), closed by a line naming how much is left and
    where: the budget is used, never overrun."""
    if cand.text is not None or doc.covering(cand.start, cand.end) is not None:
        return False
    shown_to = max((e for s, e, _ in doc.shown if s <= cand.start < e), default=cand.start)
    cuts = [c for c in doc.cuts if shown_to < c < cand.end][1:]  # the first block is the heading
    if most is not None:
        if len(cuts) < most:
            return False
        cuts = cuts[:most]
    loc = doc.loc(cand.anchor)
    body = doc.fetched.body

    def attempt(cut: int) -> tuple[str, list[tuple[int, int, str]], list[Section]]:
        text, elided, printed = doc.uncovered(cand.start, cut, page.texts)
        rest = count_tokens(body[cut : cand.end].decode("utf-8", errors="replace"))
        tail = f"[… ~{rest} tokens more: fetch {loc}]"
        return render_block(loc + doc.suffix, text.rstrip("\n") + "\n\n" + tail), elided, printed

    low, high, best = 0, len(cuts) - 1, None
    while low <= high:  # the longest prefix that fits; token counts grow with the prefix
        middle = (low + high) // 2
        block, elided, printed = attempt(cuts[middle])
        if page.fits(block):
            best, low = (cuts[middle], block, elided, printed), middle + 1
        else:
            high = middle - 1
    if best is None:
        return False
    cut, block, elided, printed = best
    page.add(block)
    _remember(page, doc, cand.start, cut, loc, elided, [p for p in printed if p.own_end <= cut])
    return True


def _show_leads(page: _Page, docs: list[_Doc], most: int | None) -> None:
    """The leads (banner, summary) of the documents, in page order: their first paragraph
    (`most=1`) or the rest of each, whole or its leading blocks."""
    leads = [
        (doc, _Candidate(s.anchor, s.start, s.own_end))
        for doc in docs
        if not doc.pinned
        for s in lead_sections(doc.outline)
    ]
    for doc, cand in leads:
        if (
            doc.covering(cand.start, cand.end) is not None
            or _digest(doc.fetched.body[cand.start : cand.end]) in page.texts
        ):
            continue
        whole_is_enough = most is None or len([c for c in doc.cuts if cand.start < c < cand.end]) <= 1
        if not (whole_is_enough and _show_one(page, doc, cand) is None):
            _show_leading(page, doc, cand, most)


def _fill(page: _Page, docs: list[_Doc], more: list[tuple[_Doc, list[list[_Candidate]]]]) -> list[_Doc]:
    """Spend what is left of the budget, after every row and related document had its
    turn: every lead's (banner, summary) first paragraph, in page order; more of each
    related document (`more`: its further paragraphs); the rest of each lead; then what
    did not fit whole in its turn, each sharing what is left with those after it: its
    paragraphs holding the most query terms, else its leading blocks.
    Returns related documents that printed here for the first time."""
    page.keep_first_listed()
    _show_leads(page, docs, 1)
    for doc, groups in more:
        for group in groups:
            for cand in group:
                if _show_new(page, doc, cand):
                    break
    _show_leads(page, docs, None)
    newly: list[_Doc] = []
    for index, item in enumerate(page.pending):
        if item.related and item.doc not in docs and item.doc not in newly and page.related >= MAX_RELATED:
            continue
        if page.left() <= 0:
            break
        share = page.left() // (len(page.pending) - index)  # what is left, shared by those still waiting
        cand = item.candidate
        if not _show_new(page, item.doc, cand, share):
            best = (
                passages(item.doc, item.terms, PENDING_PASSAGES, within=(cand.start, cand.end), merge=False)
                if cand.text is None
                else []
            )
            if not _show_excerpt(page, item.doc, cand, best, share) and not _show_leading(page, item.doc, cand):
                continue
        if item.rest:
            continue
        if item.label in page.omitted:
            page.omitted.remove(item.label)
        if item.related:
            if item.doc not in docs and item.doc not in newly:
                page.related += 1
                newly.append(item.doc)
        else:
            page.expanded_rows += 1
        _print_relations(page, item.doc)
    return newly


def _show_new(page: _Page, doc: _Doc, cand: _Candidate, most: int | None = None) -> bool:
    """Print the candidate (in at most `most` tokens) unless the page already shows it."""
    return doc.covering(cand.start, cand.end) is None and _show_one(page, doc, cand, most) is None


def _show_excerpt(page: _Page, doc: _Doc, cand: _Candidate, best: list[_Candidate], allowance: int) -> bool:
    """Print, in one block, the blocks of `cand` holding the most query terms (`best`,
    best first) that fit in `allowance` tokens, in document order: `[…]` where text is
    left out, closed by a line naming how much is left and where."""
    if cand.text is not None or doc.covering(cand.start, cand.end) is not None:
        return False
    loc = doc.loc(cand.anchor)
    body = doc.fetched.body
    section = doc.outline.find(cand.anchor)
    opening = section.heading_end if section is not None else cand.start
    total = count_tokens(body[cand.start : cand.end].decode("utf-8", errors="replace"))

    def render(chosen: list[_Candidate]) -> str:
        pieces: list[str] = []
        cursor, kept, gaps = opening, 0, False
        for part in sorted(chosen, key=lambda c: c.start):
            if body[cursor : part.start].strip():
                pieces.append(ELIDED)
                gaps = True
            text = body[part.start : part.end].decode("utf-8", errors="replace")
            pieces.append(text.strip("\n"))
            kept += count_tokens(text)
            cursor = part.end
        if gaps or body[cursor : cand.end].strip():
            pieces.append(f"[… ~{max(total - kept, 1)} tokens more: fetch {loc}]")
        return render_block(loc + doc.suffix, "\n\n".join(pieces))

    chosen: list[_Candidate] = []
    for part in best:
        if doc.covering(part.start, part.end) is not None:
            continue
        block = render([*chosen, part])
        if count_tokens(block) <= allowance and page.fits(block):
            chosen.append(part)
    if not chosen:
        return False
    page.add(render(chosen))
    for part in chosen:
        _remember(page, doc, part.start, part.end, loc, [], [])
    return True


async def expand(head: str, query: str, budget: int, fetch: FetchFn) -> str:
    """The text to append after `head` (envelope + table); "" when the budget is 0."""
    if budget <= 0:
        return ""
    return (await select_evidence(head, query, budget, fetch)).text


async def select_evidence(head: str, query: str, budget: int, fetch: FetchFn) -> Selection:
    """Choose the evidence to append after `head` (envelope + table) within `budget`."""
    rows = table_rows(head)
    terms = content_words(query)
    page = _Page(head=head, budget=budget, rows=len(rows))
    head_tokens = count_tokens(head)
    fetcher = _Fetcher(fetch)
    # related documents fetch too: reserve the note whenever rows and hops could pass the limit
    page.may_hit_fetch_limit = len({row.path for row in rows}) + MAX_RELATED > MAX_FETCHES
    if page.head_tokens + page.reserved() > budget:
        note = await _table_too_large(head_tokens, budget, rows, fetcher, terms)
        if head_tokens <= budget and count_tokens(head + note) > budget:
            note = ""  # the table fits and nothing else does: the result stays within the budget
        return Selection(note, tuple(fetcher.order), (), 0, (), 0)

    in_table = {row.path for row in rows}
    share = max(page.left() // WHOLE_SHARE, WHOLE_FLOOR)
    order: list[_Doc] = []
    hop_sizes: dict[str, int | None] = {}
    for index, row in enumerate(rows):
        if not fetcher.known(row.path) and fetcher.exhausted():
            page.fetch_limited += 1
            continue
        got = await fetcher.get(row.path)
        if isinstance(got, str):
            if got not in page.parts:
                page.add(render_line(f"note: {got}"))
            continue
        candidates = candidates_for(got, row.anchor, terms)
        if isinstance(candidates, str):
            page.add(render_line(f"note: {candidates}"))
            continue
        # the strongest match prints first, narrower when its sub-sections would crowd
        # the page; every later row prints whole only within its share
        printed, cost, unfit, narrowed = _show(page, got, candidates, share, widest_only=not order)
        if narrowed is not None:
            page.pending.append(_Pending(got, narrowed, "", False, terms, rest=True))
        if printed:
            page.expanded_rows += 1
            if got not in order:
                order.append(got)
            _print_relations(page, got)
        else:
            page.omit(got, row.path, row.anchor, cost, unfit, terms, related=False)
        unfetched = len({later.path for later in rows[index + 1 :]} - fetcher.docs.keys())
        page.hop = await _hop_room(order, in_table, fetcher, terms, unfetched, hop_sizes)
    page.hop = 0

    related, more = await _related_hop(page, order, in_table, fetcher, terms)
    on_page = order + [doc for doc in related if doc not in order]
    related += _fill(page, on_page, more)
    return Selection(
        page.text(),
        tuple(fetcher.order),
        tuple(doc.location for doc in related),
        page.expanded_rows,
        tuple(page.omitted),
        page.fetch_limited,
    )


async def _hop_room(
    order: list[_Doc],
    in_table: set[str],
    fetcher: _Fetcher,
    terms: Sequence[str],
    unfetched: int,
    sizes: dict[str, int | None],
) -> int:
    """Tokens the first blocks of the related targets known so far would take (the first
    MAX_RELATED the hop would print, in its order), with their relation lines. A target is
    fetched for this only when the rows still to come keep their fetches. `sizes` keeps
    each target's figure (None: nothing of it can print)."""
    room, counted, seen = 0, 0, set()
    for doc, predicate, location, fragment in _targets(order, in_table):
        if counted >= MAX_RELATED:
            break
        if location in seen:
            continue
        seen.add(location)
        if location not in sizes:
            if not fetcher.known(location) and fetcher.count + unfetched >= MAX_FETCHES:
                continue
            sizes[location] = _first_block_size(doc, predicate, await fetcher.get(location), fragment, terms)
        size = sizes[location]
        if size is not None:
            room += size
            counted += 1
    return room


def _first_block_size(source: _Doc, predicate: str, got: _Doc | str, fragment: str, terms: Sequence[str]) -> int | None:
    """Tokens of a related target's first block at its smallest, with its relation lines;
    None when it cannot print (a failed fetch, an unknown anchor: the hop says so)."""
    if isinstance(got, str):
        return None
    candidates = _related_candidates(got, fragment, terms)
    if isinstance(candidates, str) or not candidates:
        return None
    suffix = f" (via {source.loc()} {predicate})"
    block = min(
        count_tokens(render_block(got.loc(cand.anchor) + suffix, _candidate_text(got, cand))) for cand in candidates[0]
    )
    return block + count_tokens("".join(got.relations[0]))


def _related_candidates(doc: _Doc, fragment: str, terms: Sequence[str]) -> list[list[_Candidate]] | str:
    """`candidates_for` a related target, worked out once: the room kept for its first
    block and the hop both need it."""
    if fragment not in doc.related_plans:
        doc.related_plans[fragment] = candidates_for(doc, fragment, terms, related=True)
    return doc.related_plans[fragment]


def _targets(order: list[_Doc], in_table: set[str]) -> list[tuple[_Doc, str, str, str]]:
    """(declaring document, predicate, location, fragment) of the same-authority targets
    the hop may follow, in its order: by document, then by predicate preference."""
    return [
        (doc, predicate, location, fragment)
        for doc in order
        for predicate, location, fragment in doc.relations[1]
        if location not in in_table
    ]


def _candidate_text(doc: _Doc, cand: _Candidate) -> str:
    """The candidate's text as a block prints it when nothing of it is on the page yet."""
    if cand.text is not None:
        return cand.text
    return _dressed(doc, cand, doc.fetched.body[cand.start : cand.end].decode("utf-8", errors="replace"))


def _dressed(doc: _Doc, cand: _Candidate, text: str) -> str:
    """The candidate's text with its note (sub-sections not shown) and excerpt marks."""
    if cand.note:
        text = text.rstrip("\n") + "\n\n" + cand.note + "\n"
    return _excerpt_text(doc, cand, text) if cand.excerpt else text


def _print_relations(page: _Page, doc: _Doc) -> None:
    if doc.relations_done:
        return
    doc.relations_done = True
    lines, _ = doc.relations
    if lines and not page.add("".join(lines)):
        page.add(render_line(f"rel: {doc.loc()} declares {len(lines)} relations; fetch it to see them"))


async def _related_hop(
    page: _Page, order: list[_Doc], in_table: set[str], fetcher: _Fetcher, terms: Sequence[str]
) -> tuple[list[_Doc], list[tuple[_Doc, list[list[_Candidate]]]]]:
    """Up to MAX_RELATED same-authority targets of the expanded documents, one hop: each
    target's best evidence. Returns the targets printed, and what more of each could print
    (for the leftover budget)."""
    seen: set[str] = set()
    expanded: list[_Doc] = []
    later: list[tuple[_Doc, list[list[_Candidate]]]] = []
    for doc, predicate, location, fragment in _targets(order, in_table):
        if page.related >= MAX_RELATED:
            break
        if location in seen:
            continue
        seen.add(location)
        if not fetcher.known(location) and fetcher.exhausted():
            page.fetch_limited += 1
            continue
        got = await fetcher.get(location)
        if isinstance(got, str):
            page.add(render_line(f"note: {got}"))
            continue
        candidates = _related_candidates(got, fragment, terms)
        if isinstance(candidates, str):
            page.add(render_line(f"note: {candidates}"))
            continue
        got.suffix, got.pinned = f" (via {doc.loc()} {predicate})", bool(fragment)
        printed, cost, unfit, _ = _show(page, got, candidates[:1])
        rest = candidates[1:]
        if not printed and rest:  # its best did not fit: anything of it that does
            printed, more_cost, _, _ = _show(page, got, rest)
            cost, rest = min(cost, more_cost or cost), []
        if printed:
            page.related += 1
            expanded.append(got)
            later.append((got, rest))
            _print_relations(page, got)
        else:
            page.omit(got, location, fragment, cost, unfit, terms, related=True)
    return expanded, later


async def _table_too_large(
    head_tokens: int, budget: int, rows: list[TableRow], fetcher: _Fetcher, terms: Sequence[str]
) -> str:
    """Say in one line that the table leaves no room, with the budget that would show the
    top row's evidence."""
    need = head_tokens + 60
    if rows:
        got = await fetcher.get(rows[0].path)
        if isinstance(got, _Doc):
            candidates = candidates_for(got, rows[0].anchor, terms)
            if not isinstance(candidates, str) and candidates:
                cand = candidates[0][-1]
                text = cand.text or got.fetched.body[cand.start : cand.end].decode("utf-8", errors="replace")
                need += count_tokens(render_block(got.loc(cand.anchor), text))
    first = f"{rows[0].path}{'#' + rows[0].anchor if rows[0].anchor else ''}" if rows else "a row"
    size = (
        f"over the budget of {budget}"
        if head_tokens > budget
        else f"of the budget of {budget}, leaving no room for evidence"
    )
    return "\n" + render_line(
        f"note: the table alone is {head_tokens} tokens, {size}; "
        f"raise the budget to {need} for the top row's evidence, or fetch {first}"
    )
