"""Page properties written as `key:: value` lines, as Logseq writes a page's metadata. Pure.

Logseq keeps no YAML frontmatter: a page opens with its properties, one per line, before
its first block::

    title:: Segment log
    tags:: storage, [[adr]]
    alias:: SL
    depends-on:: [[Index layout]]

    - Segments are append-only.

Those lines, when a file opens with them (and has no `---` block), are its frontmatter:
the keys lower-cased with `_` as `-`, the values as written, save that `tags` and
`alias` lose the `[[...]]` and `#` around each name (`#adr`, `[[adr]]` are the tag
`adr`). The blank lines after them go with them, as after a `---` block.

A block's own properties stay as text, but for the two Logseq keeps for itself and never
shows (`drop_hidden_properties`).
"""

from __future__ import annotations

import re

from ..catalog import ALIAS_KEYS
from ..markdown.rewrite import rewrite_outside_code
from .blockref import UUID

__all__ = ["drop_hidden_properties", "split_properties"]

_PROPERTY = re.compile(r"([A-Za-z][A-Za-z0-9_-]{0,63})::(?:[ \t]+([^\r\n]*))?[ \t]*(?:\r\n|\r|\n|$)")
"""`key:: value` (a space after `::`, as Logseq writes it: `std::vector` is text)."""
_LEADING_BLANK = re.compile(r"(?:[ \t]*(?:\r\n|\r|\n))+")
_NAMED = re.compile(r"\s*(?:#?\[\[([^\[\]]*)\]\]|#?([^,]*?))\s*(?:,|\Z)")
"""One name of a list and its comma: `[[name]]`, `#[[name]]`, `#name` or `name`."""
_NAME_LISTS = frozenset({"tags", *ALIAS_KEYS})
_HIDDEN = re.compile(rf"[ \t]*(?:id::[ \t]+{UUID}|collapsed::[ \t]+(?:true|false))[ \t]*(?:\r\n|\r|\n)?")
"""A block property line Logseq never shows: the block's id, whether it is collapsed."""


def split_properties(text: str) -> tuple[dict[str, object], str]:
    """The `key:: value` lines `text` opens with, as frontmatter fields, and the body after
    them (with the blank lines right after); `({}, text)` when it opens with none."""
    fields: dict[str, object] = {}
    position = 0
    while (line := _PROPERTY.match(text, position)) is not None and line.end() > position:
        key = line.group(1).lower().replace("_", "-")
        value = (line.group(2) or "").strip()
        if value:
            fields[key] = _names(value) if key in _NAME_LISTS else value
        position = line.end()
    if position == 0:
        return {}, text
    blank = _LEADING_BLANK.match(text, position)
    return fields, text[blank.end() if blank else position :]


def _names(value: str) -> list[str]:
    """The names of a comma-separated list, their `[[...]]` and `#` taken off."""
    names = ((match.group(1) if match.group(1) is not None else match.group(2)) for match in _NAMED.finditer(value))
    return [name.strip() for name in names if name and name.strip()]


def drop_hidden_properties(text: str) -> str:
    """`text` without the block property lines Logseq keeps for itself and never shows: a
    block's `id` (what references name; `blockref` reads it from the file, and a reference
    is a link by then) and whether it is `collapsed` (how the editor last left it). A
    block's first line stays, whatever it holds (`- id:: ...` opens a block)."""
    return rewrite_outside_code(
        text, lambda part: "::" in part, lambda line, _spans: "" if _HIDDEN.fullmatch(line) else line
    )
