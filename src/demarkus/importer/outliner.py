"""A heading's child blocks, indented under it as an outliner writes them. Pure.

Logseq writes a page as an outline, and a heading at the margin keeps its child blocks
indented one level under it::

    ## Usage
        - Type `/Code block` and pick a language.
                - type:: [[Command]]

The editor shows a list under the heading. Markdown reads the indented lines as one
indented code block (one may follow a heading directly), so their wiki links and tags
would stay text and a lookup could print the whole block or nothing of it. In a note read
as the editor writes it, such a block (on the line after a heading, opening with a list
item) loses the indentation its lines share, and is the list the editor shows.
"""

from __future__ import annotations

import os
import re

from ..markdown.rewrite import split_lines
from ..markdown.sections import parse_body

__all__ = ["heading_lists"]

_ITEM = re.compile(r"(?:[-*+]|[0-9]{1,9}[.)])(?:[ \t]|\r?\n|\r|$)")
"""A list item's marker at the start of a line."""


def heading_lists(text: str) -> str:
    """`text` with each indented block that follows a heading directly (no blank line
    between) and opens with a list item, without the indentation its lines share: markdown
    reads it as the list it is. `text` itself when no block is such."""
    if "\t" not in text and "    " not in text:
        return text
    tokens = parse_body(text.encode("utf-8"), inline=False).tokens
    lines: list[str] | None = None
    changed = False
    for previous, token in zip(tokens, tokens[1:], strict=False):
        if token.type != "code_block" or previous.type != "heading_close" or not token.map:
            continue
        lines = lines if lines is not None else split_lines(text)
        block = range(token.map[0], min(token.map[1], len(lines)))
        indent = os.path.commonprefix([_indentation(lines[n]) for n in block if lines[n].strip()])
        first = lines[block.start]
        if not indent or not _ITEM.match(first, len(indent)) or not lines[block.start - 1].strip():
            continue  # not a list, or set apart from the heading by a blank line: code
        for number in block:
            lines[number] = lines[number].removeprefix(indent)
        changed = True
    return "".join(lines) if lines is not None and changed else text


def _indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]
