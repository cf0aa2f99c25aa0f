"""Budgeted expansion of a lookup table: print the evidence behind the rows. Pure given a fetch.

The budget (o200k_base tokens) covers the expansion blocks only, not the table. Rows are
taken in rank order; each document is fetched at most once and at most MAX_FETCHES
documents are fetched. A block is printed only when it fits whole:

```
>>> /path.md/v3#anchor

<section text>

```
An anchored row prints that section (with its sub-sections); a row without anchor prints
the whole document when it is under 8 KiB, else every outermost section (level 2 or
deeper) holding all query terms, else the outline. Notes start with `>>> note:`.
"""

from __future__ import annotations

import re

from ..errors import DemarkusError
from ..markdown import Outline, Section, outline_text, parse_outline
from ..tokens import count_tokens
from .rows import Fetched, FetchFn, TableRow, table_rows

MAX_FETCHES = 10
WHOLE_LIMIT = 8192
FRAME = ">>>"

_STRIP = "\"'.,;:()"


def query_words(query: str) -> list[str]:
    """Lowercase words of at least two characters, punctuation stripped."""
    words: list[str] = []
    for raw in query.lower().split():
        word = raw.strip(_STRIP)
        if len(word) >= 2 and word not in words:
            words.append(word)
    return words


def location(doc: Fetched, anchor: str = "") -> str:
    pinned = f"{doc.path}/v{doc.version}" if doc.version else doc.path
    return f"{pinned}#{anchor}" if anchor else pinned


def _guard_frames(text: str) -> str:
    """A line starting with `>>>` inside evidence would read as a frame; indent it."""
    return re.sub(r"(?m)^>>>", " >>>", text)


def block(loc: str, text: str) -> str:
    return f"{FRAME} {loc}\n\n{_guard_frames(text).strip(chr(10))}\n\n"


def note(text: str) -> str:
    return f"{FRAME} note: {text}\n"


def _whole_h1(outline: Outline) -> Section | None:
    """The H1 that opens a document and spans all of it, so the block can be cited as a section."""
    if not outline.sections:
        return None
    first = outline.sections[0]
    if first.level == 1 and first.end == len(outline.body) and not outline.body[: first.start].strip():
        return first
    return None


def _sections_with_terms(outline: Outline, words: list[str]) -> list[Section]:
    """Outermost sections of level 2 or deeper whose text holds every query word."""
    if not words:
        return []
    chosen: list[Section] = []
    for section in outline.sections:
        if section.level < 2:
            continue
        if any(c.start <= section.start and section.end <= c.end for c in chosen):
            continue
        text = outline.text(section).decode("utf-8", errors="replace").lower()
        if all(word in text for word in words):
            chosen.append(section)
    return chosen


def evidence_for_row(doc: Fetched, outline: Outline, row: TableRow, words: list[str]) -> list[tuple[str, str]] | str:
    """(location, text) blocks for a row, or a note when its anchor does not exist."""
    if row.anchor:
        section = outline.find(row.anchor)
        if section is None:
            return f"{doc.path}: section #{row.anchor} not found"
        return [(location(doc, section.anchor), outline.text(section).decode("utf-8", errors="replace"))]
    body = doc.body.decode("utf-8", errors="replace")
    if len(doc.body) < WHOLE_LIMIT:
        whole = _whole_h1(outline)
        return [(location(doc, whole.anchor if whole else ""), body)]
    matching = _sections_with_terms(outline, words)
    if matching:
        return [(location(doc, s.anchor), outline.text(s).decode("utf-8", errors="replace")) for s in matching]
    return [(location(doc), outline_text(outline) or "(document has no headings)")]


async def expand(table: str, query: str, budget: int, fetch: FetchFn) -> str:
    """The expansion text to append after the table ("" when the budget is 0)."""
    if budget <= 0:
        return ""
    rows = table_rows(table)
    words = query_words(query)
    remaining = budget
    out: list[str] = []
    docs: dict[str, Fetched | None] = {}
    outlines: dict[str, Outline] = {}
    expanded = 0
    limit_noted = False
    for row in rows:
        if row.path not in docs:
            if len(docs) >= MAX_FETCHES:
                if not limit_noted:
                    out.append(note(f"fetch limit of {MAX_FETCHES} documents reached; later rows on unfetched documents skipped"))
                    limit_noted = True
                continue
            try:
                docs[row.path] = await fetch(row.path)
            except DemarkusError as exc:
                docs[row.path] = None
                out.append(note(f"{row.path}: {exc}"))
                continue
        doc = docs[row.path]
        if doc is None:
            continue
        outline = outlines.get(row.path)
        if outline is None:
            outline = outlines[row.path] = parse_outline(doc.body)
        blocks = evidence_for_row(doc, outline, row, words)
        if isinstance(blocks, str):
            out.append(note(blocks))
            continue
        printed = False
        for loc, text in blocks:
            rendered = block(loc, text)
            cost = count_tokens(rendered)
            if cost <= remaining:
                out.append(rendered)
                remaining -= cost
                printed = True
        if printed:
            expanded += 1
    out.append(note(f"expanded {expanded} of {len(rows)} rows within the budget"))
    return "\n" + "".join(out)
