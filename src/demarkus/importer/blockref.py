"""The blocks a note names for other notes to link to, as Logseq and Obsidian write them. Pure.

Logseq gives a block an id in a property line under it, and any page refers to it by that
id alone::

    - Where is the config stored?
      id:: 634fb3ee-cef0-4081-9085-c002d3be4e75

    see ((634fb3ee-cef0-4081-9085-c002d3be4e75)), or [redo it](((634fb3ee-...)))

Obsidian ends a block's line with `^id` (or puts it on the line after a list or a table)
and links to it as `[[note#^id]]`. A markdown reader sees neither as a link. Each id found
is kept with the section that holds its block (its anchor: what a link can name) and the
block's first line (what Logseq shows in place of the reference), so `wikilink` can write
the reference as a link to that section, with that line as its text.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from ..markdown.rewrite import line_offsets, rewrite_outside_code, split_lines
from ..markdown.sections import parse_outline

__all__ = ["UUID", "Block", "drop_block_ids", "find_blocks"]

UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
"""A Logseq block id."""
_LOGSEQ_ID = re.compile(rf"[ \t]*([-*+][ \t]+)?id::[ \t]+({UUID})[ \t]*(?:\r\n|\r|\n)?")
"""A block's id property: under its first line, or as its first line (`- id:: ...`)."""
_OBSIDIAN_ID = re.compile(r"(?:(?<=[ \t])|(?<=\]\])|^)\^([A-Za-z0-9-]{1,64})[ \t]*(?:\r\n|\r|\n)?$")
"""`^id` at the end of a line, after a space or right after an embed or link's `]]`
(`![[chart.png]]^chart`, as Obsidian's own help vault writes one), or alone on its line."""
_PROPERTY = re.compile(r"[ \t]*[A-Za-z][A-Za-z0-9_-]*::(?:[ \t]|\r?\n|\r|$)")
_MARKER = re.compile(r"[ \t]*(?:[-*+]|[0-9]{1,9}[.)]|#{1,6})(?:[ \t]+|(?=\r?\n|\r|$))")
"""What opens a block's first line: a list item's marker, or a heading's."""
_BULLET = re.compile(r"[ \t]*[-*+][ \t]")
"""What opens an outliner's next block."""
_WIKI_BRACKETS = re.compile(r"!?\[\[([^\[\]\r\n]*)\]\]")
LABEL_CHARS = 80
"""A block's first line is cut to about this many characters as a link's text."""
NEAR_LINES = 64
"""How far from its id line a block's first line is looked for (Logseq writes a block's
properties right under its first line): a walk over every line above each id would take
quadratic time on a note of id lines (23,000 in a 1 MiB file)."""


@dataclass(frozen=True, slots=True)
class Block:
    """Where a block id leads."""

    anchor: str
    """The section holding the block; "" before the note's first heading."""
    label: str
    """The block's first line, short, as plain text."""


def find_blocks(body: str) -> dict[str, Block]:
    """The block ids `body` (a note's text after its frontmatter) declares, lower-cased,
    each with its block; the first of two alike."""
    if "id::" not in body and "^" not in body:
        return {}
    lines = split_lines(body)
    found: dict[int, tuple[str, str]] = {}
    """line number -> (id, label) of each id line"""
    for number, line in enumerate(lines):
        logseq = _LOGSEQ_ID.fullmatch(line)
        if logseq is not None:
            first = _line_below(lines, number) if logseq.group(1) else _first_line(lines, number)
            found[number] = (logseq.group(2).lower(), _label(first))
            continue
        obsidian = _OBSIDIAN_ID.search(line)
        if obsidian is not None:
            text = line[: obsidian.start()]
            if not text.strip():  # alone on its line: the list or table above it
                text = _block_above(lines, number)
            found[number] = (obsidian.group(1).lower(), _label(text))
    if not found:
        return {}
    outline = parse_outline(body.encode("utf-8"))
    starts = [section.start for section in outline.sections]
    offsets = line_offsets(lines)
    blocks: dict[str, Block] = {}
    for number, (block_id, label) in found.items():
        at = bisect.bisect_right(starts, offsets[number]) - 1
        anchor = outline.sections[at].anchor if at >= 0 else ""
        blocks.setdefault(block_id, Block(anchor, label))
    return blocks


def _first_line(lines: list[str], number: int) -> str:
    """The first line of the block whose property line is `lines[number]`: up past its
    other properties and the lines it continues on, to the line its marker opens (or the
    one after a blank line), at most `NEAR_LINES` up."""
    first = ""
    for above in range(number - 1, max(number - 1 - NEAR_LINES, -1), -1):
        line = lines[above]
        if not line.strip():
            break
        if _PROPERTY.match(line):
            continue
        first = line
        if _MARKER.match(line):
            break
    return first


def _block_above(lines: list[str], number: int) -> str:
    """The first line of the block that ends above `lines[number]` (after the blank lines
    between them), at most `NEAR_LINES` up."""
    first = ""
    for above in range(number - 1, max(number - 1 - NEAR_LINES, -1), -1):
        if lines[above].strip():
            first = lines[above]
        elif first:
            break
    return first


def _line_below(lines: list[str], number: int) -> str:
    """The first line of text of the block that `lines[number]` opens with its properties:
    the next line that is not one of them ("" when a bullet or a blank line comes first)."""
    for line in lines[number + 1 : number + 1 + NEAR_LINES]:
        if not _PROPERTY.match(line):
            return "" if not line.strip() or _BULLET.match(line) else line
    return ""


def drop_block_ids(text: str) -> str:
    """`text` without Obsidian's block ids, which it never shows: the `^id` ending a line
    (the line stays) and a line of only `^id` under a list or a table. `find_blocks` reads
    them from the file; a link to a block leads to its section by then. Code keeps them."""

    def rewrite(line: str, _spans: object) -> str:
        found = _OBSIDIAN_ID.search(line)
        if found is None:
            return line
        kept = line[: found.start()].rstrip(" \t")
        if not kept.strip():
            return ""
        return kept + line[len(line.rstrip("\r\n")) :]

    return rewrite_outside_code(text, lambda part: "^" in part, rewrite)


def _label(line: str) -> str:
    """A block's first line as a link's text: without its marker and surrounding space, a
    wiki link as its text, cut at a word near `LABEL_CHARS`."""
    start = 0
    while (marker := _MARKER.match(line, start)) is not None and marker.end() > start:
        start = marker.end()  # `- ## FAQ`: an item's marker, then its heading's
    text = _WIKI_BRACKETS.sub(lambda link: link.group(1).split("|")[-1], line[start:])
    text = " ".join(text.split())
    if len(text) > LABEL_CHARS:
        cut = text.rfind(" ", 0, LABEL_CHARS)
        text = text[: cut if cut > LABEL_CHARS // 2 else LABEL_CHARS].rstrip() + "…"
    return text
