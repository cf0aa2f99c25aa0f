"""What is on the page: the ranges of each document already shown, the texts already
printed (by digest), and what waits for the leftover budget. Pure.

Coalescing rules: a range inside one already shown prints one `within` line; a range
byte-identical to one printed elsewhere prints one `same text` line; a wider range prints
only what is not yet shown, with a one-line marker where an earlier block (or a section
whose text is printed elsewhere) sits, except that the rest of a block cut after its
leading blocks joins that block when nothing printed after it (`Page.continued`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..markdown import Section
from . import frames
from .candidates import Candidate
from .document import Document
from .ledger import Ledger

Elided = tuple[int, int, str]
"""A range left out of a block, and the marker printed in its place."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A block that did not print whole in its turn: its best parts may still fit at the end."""

    doc: Document
    candidate: Candidate
    location: str
    """Where the row or relation pointed."""
    need: int
    """Tokens its smallest alternative needed in its turn."""
    related: bool
    turn: str
    """The turn it had, for the decision list."""
    rest: bool = False
    """The wider range of a block that printed narrower: already counted, not omitted."""

    @property
    def label(self) -> str:
        """Its entry in the omission note ("" for a rest: it is not omitted)."""
        return "" if self.rest else frames.omission_label(self.location, self.need)


@dataclass(frozen=True, slots=True)
class Uncovered:
    """The text of a range with what is already on the page replaced by markers."""

    text: str
    elided: list[Elided]
    printed: list[Section]
    """Sections whose own text is printed (remembered; with their whole text when all of
    it is printed)."""


@dataclass(frozen=True, slots=True)
class Cut:
    """A block printed cut after its leading blocks, as the ledger's last part: its rest may
    follow in the same block instead of a new one."""

    doc: Document
    location: str
    start: int
    end: int
    """Where the cut is: the rest starts here."""
    header: str
    text: str
    """What it shows of [start, end), without the closing line naming the rest."""
    part: int
    """Its index in the ledger's parts."""


@dataclass
class Page:
    """The page a lookup prints, beside the ledger that pays for it."""

    ledger: Ledger
    shown: dict[Document, list[tuple[int, int, str]]] = field(default_factory=dict)
    """Ranges of each document on the page, with the location that printed them."""
    texts: dict[str, str] = field(default_factory=dict)
    """sha256 of printed evidence text -> first location."""
    via: dict[Document, str] = field(default_factory=dict)
    """How a related document's blocks are headed after its location: ` (via ...)`."""
    pinned: set[Document] = field(default_factory=set)
    """Related documents reached through `path#anchor`: that section is what they are here for."""
    relations_printed: set[Document] = field(default_factory=set)
    notes: set[str] = field(default_factory=set)
    """Notes printed (a failure is said once, however many rows name it)."""
    pending: list[Pending] = field(default_factory=list)
    """Blocks that did not fit whole, in the order they had their turn."""
    cut: Cut | None = None
    """The last block printed cut after its leading blocks."""

    stale_said: set[Document] = field(default_factory=set)
    """Documents with a block on the page, or reached through their one successor's
    `supersedes`: a stale document's marker goes with its first block, and only when the
    relation that brought it in does not already say it is superseded."""

    def header(self, doc: Document, anchor: str) -> str:
        """A block's header: its location, how a related document was reached, and, on a
        stale document's first block, its marker (`superseded by ...`)."""
        return doc.loc(anchor) + self.via.get(doc, "") + ("" if doc in self.stale_said else doc.stale)

    def covering(self, doc: Document, start: int, end: int) -> str | None:
        """The location of a block of `doc` that already shows [start, end)."""
        for s, e, loc in self.shown.get(doc, ()):
            if s <= start and end <= e:
                return loc
        return None

    def shown_to(self, doc: Document, start: int) -> int:
        """Where the shown range holding `start` ends (`start` when none does)."""
        return max((e for s, e, _ in self.shown.get(doc, ()) if s <= start < e), default=start)

    def same_text(self, doc: Document, start: int, end: int) -> str | None:
        """The first location that printed these very bytes."""
        return self.texts.get(digest(doc.body[start:end]))

    def uncovered(self, doc: Document, start: int, end: int) -> Uncovered:
        """The text of [start, end) with what is already on the page replaced by one-line
        markers: earlier blocks of this document, and sections whose text is byte-identical
        to one printed elsewhere."""
        body = doc.body
        elided: list[Elided] = [
            (s, e, frames.shown_above(_anchor_of(loc)))
            for s, e, loc in self.shown.get(doc, ())
            if s < end and start < e
        ]
        full: list[Section] = []
        for section in doc.outline.sections:
            # a section whose own text is in the range: a range cut after its leading
            # blocks may hold a section's own text without all of its sub-sections
            if not (start <= section.start and section.own_end <= end):
                continue
            if any(s <= section.start and section.own_end <= e for s, e, _ in elided):
                continue
            first = self.texts.get(digest(body[section.start : section.end])) if section.end <= end else None
            if first is not None:
                elided.append((section.start, section.end, frames.same_text_above(section.anchor, first)))
                continue
            own = self.texts.get(digest(body[section.start : section.own_end]))
            if own is not None and section.own_end > section.start:
                elided.append((section.start, section.own_end, frames.same_text_above(section.anchor, own)))
            full.append(section)
        elided.sort()
        pieces: list[str] = []
        cursor = start
        for s, e, marker in elided:
            if s > cursor:
                pieces.append(doc.text(cursor, s))
            if e > cursor and (not pieces or pieces[-1] != marker + "\n\n"):  # adjacent parts of one block: one marker
                pieces.append(marker + "\n\n")
            cursor = max(cursor, e)
        if cursor < end:
            pieces.append(doc.text(cursor, end))
        printed = [sec for sec in full if not any(s < sec.own_end and sec.start < e for s, e, _ in elided)]
        return Uncovered("".join(pieces), elided, printed)

    def continued(self, doc: Document, location: str, start: int, shown: Uncovered) -> tuple[Cut, str] | None:
        """The block cut last and the text after its cut, when `shown` (a wider range of
        `doc` from `start`) begins with that block and it is still the page's last part: the
        rest then joins that block (no new location, no marker for what it showed)."""
        cut = self.cut
        if cut is None or cut.part != len(self.ledger.parts) - 1 or cut.doc is not doc:
            return None
        if cut.location != location or cut.start != start or not shown.elided:
            return None
        first_start, first_end, marker = shown.elided[0]
        if (first_start, first_end) != (start, cut.end) or not shown.text.startswith(marker + "\n\n"):
            return None
        return cut, shown.text[len(marker) + 2 :]

    def remember(self, doc: Document, start: int, end: int, loc: str, shown: Uncovered | None = None) -> None:
        """Record [start, end) of `doc` as on the page, and the texts printed whole in it."""
        self.shown.setdefault(doc, []).append((start, end, loc))
        self.stale_said.add(doc)
        body = doc.body
        elided = shown.elided if shown is not None else []
        if not elided:
            self.texts.setdefault(digest(body[start:end]), loc)
        for section in shown.printed if shown is not None else []:
            # their own text is on the page; the subtree too unless elided or cut
            self.texts.setdefault(digest(body[section.start : section.own_end]), doc.loc(section.anchor))
            if section.end <= end and not any(s < section.end and section.start < e for s, e, _ in elided):
                self.texts.setdefault(digest(body[section.start : section.end]), doc.loc(section.anchor))


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _anchor_of(loc: str) -> str:
    return loc.split("#", 1)[1] if "#" in loc else loc
