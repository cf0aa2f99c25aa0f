"""Which ranges of a document could stand for a row or a related target. Pure; no tokens.

A plan is a list of groups; each group is a list of alternatives, widest first, and prints
the first alternative that fits. A row with an anchor is its section (or, when that does
not fit, the section without its sub-sections). A row without one is the document whole
when it is small, else its sections holding the most query terms, else its paragraphs
holding the most (a long note without headings: its text is all before a heading), else
its outline. A
related document leads with what it is (its summary, when that holds a query term), then
its paragraphs holding the most query terms: in a long document the answer is a paragraph,
and a whole section would spend the budget around it. A related document none of whose
paragraphs holds a query term (of a query with some) has no plan: its relation line is all
it adds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..markdown import Section, outline_text
from . import frames
from .document import Document
from .relevance import opening_with_terms, ranked_blocks, sections_by_terms, whole_h1

WHOLE_LIMIT = 8192
"""Bytes under which a document without an anchor may print whole."""
SECTIONS_PER_DOCUMENT = 2
"""Sections printed for a document reached without an anchor (large documents)."""
PASSAGES_PER_DOCUMENT = 3
"""Passages offered for a related document reached without an anchor: its blocks holding
the most query terms."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One way to show a row: a byte range with its anchor, or a synthetic text (outline)."""

    anchor: str
    start: int
    end: int
    what: str
    """What it is, for the decision list: "the section", "its outline", ..."""
    text: str | None = None
    note: str = ""
    """A line printed after the text (the sub-sections left out)."""
    excerpt: bool = False
    """Part of the section `anchor`: the text it leaves out is marked."""


Plan = list[list[Candidate]]


@dataclass(frozen=True, slots=True)
class AnchorMissing:
    """A row or relation naming a section the document does not have."""

    location: str
    anchor: str

    @property
    def note(self) -> str:
        return f"{frames.word(self.location)}: section #{self.anchor} not found"


def passages(
    doc: Document,
    terms: Sequence[str],
    most: int = PASSAGES_PER_DOCUMENT,
    skip: Section | None = None,
    within: tuple[int, int] | None = None,
    merge: bool = True,
) -> list[Candidate]:
    """The document's blocks (or those of its range `within`) holding the most distinct
    query terms, as excerpts of their sections (of the document, for the preamble's): best
    first, at most `most`, adjacent ones merged unless `merge` is false."""
    ranked = ranked_blocks(doc.outline, doc.body, doc.cuts, terms, within=within, skip=skip)
    best = [(rank, block.start, block.end, block.section) for rank, block in enumerate(ranked[:most])]
    if merge:
        runs: list[tuple[int, int, int, Section | None]] = []
        for rank, start, end, section in sorted(best, key=lambda item: item[1]):
            if runs and runs[-1][2] == start and runs[-1][3] is section:
                runs[-1] = (min(runs[-1][0], rank), runs[-1][1], end, section)
            else:
                runs.append((rank, start, end, section))
        best = sorted(runs, key=lambda item: item[0])
    return [
        Candidate(
            section.anchor if section else "", start, end, "its paragraphs holding the most query terms", excerpt=True
        )
        for _, start, end, section in best
    ]


def plan(doc: Document, anchor: str, terms: Sequence[str], *, related: bool = False) -> Plan | AnchorMissing:
    """How to show a document or one of its sections. A related document without anchor
    leads with its opening section when that holds a query term."""
    outline = doc.outline
    if anchor:
        section = outline.find(anchor)
        if section is None:
            return AnchorMissing(doc.location, anchor)
        whole = Candidate(section.anchor, section.start, section.end, "the section")
        if section.own_end < section.end:  # fallback: the section without its sub-sections
            subs = [s.anchor for s in outline.sections if s.parent == section.anchor]
            own = Candidate(
                section.anchor,
                section.start,
                section.own_end,
                "the section without its sub-sections",
                note=frames.subsections_not_shown(subs),
            )
            return [[_retold(whole, "the section with its sub-sections"), own]]
        return [[whole]]
    small = len(doc.body) < WHOLE_LIMIT
    h1 = whole_h1(outline)
    whole = Candidate(h1.anchor if h1 else "", 0, len(doc.body), "the document whole")
    opening = opening_with_terms(outline, terms) if related else None
    if related:
        found = passages(doc, terms, skip=opening)
        if found:  # whole when small and it fits, else what it is, then its best paragraphs
            if opening is not None:
                lead = Candidate(opening.anchor, opening.start, opening.own_end, "its summary section")
            else:
                lead = found.pop(0)
            return [[whole, lead] if small else [lead], *([cand] for cand in found)]
        if opening is None and terms:  # nothing in it matches: its relation line says all it can
            return []
    matching = sections_by_terms(outline, terms, SECTIONS_PER_DOCUMENT)
    if opening is not None:
        matching = [opening, *(s for s in matching if s is not opening)][:SECTIONS_PER_DOCUMENT]
    sections = [Candidate(s.anchor, s.start, s.own_end, "a section holding the most query terms") for s in matching]
    if small:  # whole when it fits, else the section holding the most query terms
        return [[whole, *sections]]
    if sections:
        return [[cand] for cand in sections]
    found = passages(doc, terms)
    if found:  # no section holds a query term, the text before the first heading does
        return [[cand] for cand in found]
    text = outline_text(outline) or "(document has no headings)"
    return [[Candidate("", 0, 0, "its outline (a large document)", text=text)]]


def _retold(cand: Candidate, what: str) -> Candidate:
    return Candidate(cand.anchor, cand.start, cand.end, what, cand.text, cand.note, cand.excerpt)
