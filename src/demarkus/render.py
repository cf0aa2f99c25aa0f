"""Markdown bodies the server generates: listings, version histories, lookup tables. Pure.

These texts are replayed to models and compared byte for byte across surfaces, so every
choice here (escaping, ordering, number formats) is fixed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

_PUNCTUATION = "\\[]()*_`~#|"
"""The markdown punctuation a name or a cell writes behind a backslash."""
_ESCAPED = str.maketrans({ch: "\\" + ch for ch in _PUNCTUATION})
_ESCAPE = re.compile("\\\\([" + re.escape(_PUNCTUATION) + "])")


def escape_cell(text: str) -> str:
    """Escape markdown punctuation and flatten line breaks, for names and table cells."""
    text = text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
    return text.translate(_ESCAPED)


def unescape_cell(text: str) -> str:
    """A name as `escape_cell` wrote it (`Changelog\\_07\\_09.md`), its escapes dropped: a
    path copied from a table's cell is the path."""
    return _ESCAPE.sub(r"\1", text)


_UNWRITABLE = re.compile(r"[%#?]")
"""Characters a document path holds that a location (a link, a `url`) ends or decodes at."""


def written_path(path: str) -> str:
    """A document path as a location or a link names it: `%`, `#` and `?` percent-escaped
    (`/C%23.md` for the document `/C#.md`), so a caller who passes it back (links and urls
    are read with their escapes decoded) names the document, not a section of `/C`."""
    return _UNWRITABLE.sub(lambda match: f"%{ord(match.group()):02X}", path)


def escape_snippet(text: str) -> str:
    """Snippets are quoted prose: only what would break the table row is escaped."""
    text = " ".join(text.split())
    return text.replace("\\", "\\\\").replace("|", "\\|")


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with seconds, the form every `modified` value takes."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class ListingEntry:
    name: str
    is_dir: bool


def render_listing(path: str, entries: Sequence[ListingEntry], *, truncated: bool = False) -> str:
    shown = path if path.endswith("/") else path + "/"
    lines = [f"\n# Index of {shown}\n\n"]
    for entry in entries:
        label = entry.name + ("/" if entry.is_dir else "")
        lines.append(f"- [{escape_cell(label)}]({quote(label)})\n")
    if truncated:
        lines.append("\n*...more entries on the next page; pass the cursor to continue*\n")
    return "".join(lines)


def render_versions(path: str, versions: Sequence[tuple[int, datetime]]) -> str:
    lines = [f"\n# Version History: {path}\n\n"]
    for number, modified in versions:
        lines.append(f"- [v{number}]({path}/v{number}) - {format_time(modified)}\n")
    return "".join(lines)


@dataclass(frozen=True, slots=True)
class LookupRow:
    """One lookup result row. `anchor` and `heading` are set for section (body) matches."""

    path: str
    importance: float
    title: str
    tags: tuple[str, ...]
    anchor: str = ""
    heading: str = ""
    snippet: str = ""


def _tags_cell(tags: Sequence[str], cap: int | None) -> str:
    if cap is not None and len(tags) > cap:
        return ", ".join(tags[:cap]) + f", +{len(tags) - cap} more"
    return ", ".join(tags)


def render_lookup(
    query: str,
    scope: str,
    rows: Sequence[LookupRow],
    *,
    body_match: bool,
    tag_cap: int | None = None,
) -> str:
    """The LOOKUP table; body mode adds the `#anchor`, `Title › Heading` and a Snippet column."""
    quoted = query.replace('"', '\\"')
    out = [f'\n# Lookup matches for "{quoted}" in {scope}\n\n']
    if body_match:
        out.append("| Path | Importance | Title | Tags | Snippet |\n")
        out.append("|------|------------|-------|------|---------|\n")
    else:
        out.append("| Path | Importance | Title | Tags |\n")
        out.append("|------|------------|-------|------|\n")
    for row in rows:
        location = escape_cell(row.path) + (f"#{row.anchor}" if row.anchor else "")
        title = row.title + (f" › {row.heading}" if row.heading else "")
        cells = [
            location,
            f"{row.importance:.2f}",
            escape_cell(title),
            escape_cell(_tags_cell(row.tags, tag_cap)),
        ]
        if body_match:
            cells.append(escape_snippet(row.snippet))
        out.append("| " + " | ".join(cells) + " |\n")
    return "".join(out)
