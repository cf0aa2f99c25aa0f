"""Tags written in a note's text, as the editors that write wiki links write them. Pure.

Obsidian, Logseq, Foam and basic-memory read `#word` in a note's text as a tag, beside
the `tags` of its frontmatter::

    Decided in the #weekly meeting; see #storage/segments.

A tag is `#` at the start of a line or after a space, then letters, digits, `_`, `-` and
`/` (a nested tag, `#inbox/to-read`), holding at least one letter: `#1984` is an issue
number, `# Title` a heading, `C#` and `page#part` no tag. Logseq's `#[[write path]]` is
the tag `write path` (a name with a comma is none: a `tags` value is a comma list). Code blocks, code spans and HTML
blocks are text, as for links. Each tag counts once whatever its case (the first spelling
is kept), as those editors and the catalog's `tag=` filter compare them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..markdown.rewrite import in_spans, rewrite_outside_code

__all__ = ["inline_tags", "joined_tags"]

_TAG = re.compile(r"(?<!\S)#(?:\[\[([^\[\],\r\n]+)\]\]|([\w/-]+))")
_MAYBE = re.compile(r"#[\w/\[-]")
"""A cheap test first (a literal `#` is found fast): a body without it is not parsed."""
_LETTER = re.compile(r"[^\W\d_]")


def inline_tags(body: str) -> list[str]:
    """The tags `body` writes as `#tag` outside code, in order, each once (any case)."""
    found: list[str] = []

    def collect(line: str, spans: list[tuple[int, int]]) -> str:
        for match in _TAG.finditer(line):
            tag = (match.group(1) or match.group(2)).strip().strip("/")
            if _LETTER.search(tag) and not in_spans(match.start(), spans):
                found.append(tag)
        return line

    rewrite_outside_code(body, lambda text: _MAYBE.search(text) is not None, collect)
    return _unique(found)


def joined_tags(written: str, more: Iterable[str]) -> str:
    """A `tags` value (comma-separated, as the catalog reads it) with those of `more` it
    lacks in any case after it; what it holds is kept as written."""
    held = {tag.strip().lower() for tag in written.split(",")}
    fresh = [tag for tag in _unique(more) if tag.lower() not in held]
    return ",".join([written, *fresh] if written else fresh)


def _unique(tags: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for tag in tags:
        key = tag.strip().lower()  # as the catalog folds them
        if key and key not in seen:
            seen.add(key)
            out.append(tag.strip())
    return out
