"""Which parts of a markdown document say what it is, and which hold a query's terms. Pure.

A term matches as a prefix at a word start (`except` finds `exceptions`) and counts once
however often it occurs. The units are sections (their own text, heading included) and
blocks: paragraphs, list items and code blocks, the places a section can be cut.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..index.query import words
from ..markdown import Outline, Section
from ..textcache import TextCache

SUMMARY_TITLES = frozenset({"abstract", "summary", "overview", "introduction", "synopsis", "tl;dr", "tldr"})
"""Headings under which a document says what it is."""


def term_count(text: str, terms: Sequence[str]) -> int:
    """How many distinct query terms the text holds (prefix match at a word start: a
    term, itself letters and digits, begins one of the text's words)."""
    # each word follows a separator no word holds: a term begins a word where the
    # separator and the term occur together, found by one substring search
    return sum(map(_kept_vocabulary(text).__contains__, _led(tuple(terms))))


_SEPARATOR = "\0"


@functools.lru_cache(maxsize=64)
def _led(terms: tuple[str, ...]) -> tuple[str, ...]:
    """Each term after the separator, as a text's vocabulary is searched for it."""
    return tuple(_SEPARATOR + term for term in terms)


VOCABULARY_TEXT_MAX = 4096
"""Texts up to this many characters (paragraphs, list items, most sections) keep their
words: the same blocks are scored lookup after lookup."""
VOCABULARY_CHARS = 1 << 20
"""Characters of text whose words are kept, shared by every lookup in the process (with
their words, about twice that). The blocks a world's sixteen questions touch at limits 3, 5
and 10 hold about 610,000 characters (2,600 texts, peps and eth): kept by count, 2,048
texts, the questions asked in turn found almost none of theirs kept."""


def _vocabulary(text: str) -> str:
    """The text's distinct words, each after the separator (in one string: its substring
    search runs in C, where a loop over the words would not)."""
    return "".join(_SEPARATOR + word for word in sorted(set(words(text))))


_KEPT: TextCache[str] = TextCache(VOCABULARY_CHARS)


def _kept_vocabulary(text: str) -> str:
    """`_vocabulary`, kept for a short text (`VOCABULARY_TEXT_MAX`)."""
    vocabulary = _KEPT.get(text)
    if vocabulary is None:
        vocabulary = _vocabulary(text)
        if len(text) <= VOCABULARY_TEXT_MAX:
            _KEPT.put(text, vocabulary)
    return vocabulary


def whole_h1(outline: Outline) -> Section | None:
    """The title section when it spans the whole document (nothing before it)."""
    if not outline.sections:
        return None
    first = outline.sections[0]
    if first.level == 1 and first.end == len(outline.body) and not outline.body[: first.start].strip():
        return first
    return None


def sections_by_terms(outline: Outline, terms: Sequence[str], most: int) -> list[Section]:
    """Sections whose own text (and heading) holds the most query terms, best first: those
    within one term of the best, at most `most`."""
    if not terms:
        return []
    scored: list[tuple[int, int, Section]] = []
    for index, section in enumerate(outline.sections):
        count = term_count(outline.own_text(section).decode("utf-8", errors="replace"), terms)
        if count:
            scored.append((-count, index, section))
    scored.sort(key=lambda item: (item[0], item[1]))
    if not scored:
        return []
    floor = max(1, -scored[0][0] - 1)
    return [s for negcount, _, s in scored if -negcount >= floor][:most]


@dataclass(frozen=True, slots=True)
class Block:
    """A paragraph, list item or code block: body[start:end], in the own text of `section`
    (None: the preamble, the text before the first heading; all of a document without one)."""

    start: int
    end: int
    section: Section | None


def ranked_blocks(
    outline: Outline,
    body: bytes,
    cuts: Sequence[int],
    terms: Sequence[str],
    *,
    within: tuple[int, int] | None = None,
    skip: Section | None = None,
) -> list[Block]:
    """The blocks holding at least one query term, most distinct terms first (ties in
    document order). `cuts` are the block starts (`markdown.block_starts`); `within`
    keeps the blocks starting in [start, end); `skip` leaves out one section's own text.
    Headings and a block repeating an earlier one's bytes are left out; the preamble's
    blocks count (a long note without headings is all preamble)."""
    if not terms:
        return []
    starts = [section.start for section in outline.sections]
    scored: list[tuple[int, Block]] = []
    seen: set[bytes] = set()
    for start, end in itertools.pairwise([*cuts, len(body)]):
        if within is not None and not within[0] <= start < within[1]:
            continue
        section = _section_at(outline, starts, start)
        if section is not None and (start < section.heading_end or section is skip):
            continue
        if body[start:end] in seen:
            continue
        seen.add(body[start:end])
        count = term_count(body[start:end].decode("utf-8", errors="replace"), terms)
        if count:
            scored.append((-count, Block(start, end, section)))
    scored.sort(key=lambda item: (item[0], item[1].start))
    return [block for _, block in scored]


def _section_at(outline: Outline, starts: list[int], offset: int) -> Section | None:
    """The section whose own text (without sub-sections) holds `offset`, None in the
    preamble; `starts` are the sections' start offsets (own texts are disjoint, in order,
    and run to the end of the body)."""
    index = bisect.bisect_right(starts, offset) - 1
    return outline.sections[index] if index >= 0 else None


def _has_prose(outline: Outline, section: Section) -> bool:
    return bool(outline.own_text(section)[section.heading_end - section.start :].strip())


_FIELD = re.compile(r"[-*+][ \t]+[^:\n]{1,40}:(?:[ \t]|$)")
"""A list item naming a field: `- Start Date: 2015-05-04`, `* Status: draft`."""


def is_field_list(outline: Outline, section: Section) -> bool:
    """Whether the section's own text is only a list of fields: front matter written in
    markdown (a feature name, a start date, links to the discussion), which says when and
    where a document was written, not what it is."""
    text = outline.own_text(section)[section.heading_end - section.start :].decode("utf-8", errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return bool(lines) and all(_FIELD.match(line) for line in lines)


def titled_summary(outline: Outline) -> Section | None:
    """The section below the title that is titled like an abstract and has text."""
    for section in outline.sections:
        if section.level > 1 and _is_summary_title(section.title) and _has_prose(outline, section):
            return section
    return None


def _is_summary_title(title: str) -> bool:
    return title.strip().lower().rstrip(":") in SUMMARY_TITLES


def summary_section(outline: Outline) -> Section | None:
    """The section in which a document says what it is: one titled like an abstract, else
    the first below the title with text of its own (a title's own text is often a banner)."""
    titled = titled_summary(outline)
    if titled is not None:
        return titled
    below = [s for s in outline.sections if s.level > 1]
    for section in [*below, *outline.sections]:
        if _has_prose(outline, section):
            return section
    return None


def lead_sections(outline: Outline) -> list[Section]:
    """What a reader sees first: the title's own text when it has some and is not a list of
    fields (status banners such as "superseded by ...", an introduction), then the summary
    section."""
    lead: list[Section] = []
    first = outline.sections[0] if outline.sections else None
    if first is not None and first.level == 1 and _has_prose(outline, first) and not is_field_list(outline, first):
        lead.append(first)
    summary = summary_section(outline)
    if summary is not None and summary not in lead:
        lead.append(summary)
    return lead


def opening_with_terms(outline: Outline, terms: Sequence[str]) -> Section | None:
    """The section titled like an abstract, when it holds a query term: a document reached
    by a relation says first what it is. Only a titled one: the first section with text
    (the leads' fallback) is as often a fork name or a parameter table, and then the
    target's paragraphs holding the most query terms say more (eth +1 question with
    every quote and +4 quotes over the sweep, demo +1 quote, peps and rust unchanged)."""
    section = titled_summary(outline)
    if section is None:
        return None
    return section if term_count(outline.own_text(section).decode("utf-8", errors="replace"), terms) else None
