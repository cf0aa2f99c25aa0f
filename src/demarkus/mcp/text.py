"""Tool result texts: the envelope every tool prints, and the fetch modes. Pure.

```
status: <status>
<key>: <value>        selected keys first, in order; with verbose, the rest sorted
<blank line>
<body>
```
Every byte here is replayed to the model on each later turn, so texts are short and
stable byte for byte (the local server and the gateway must print the same).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..markdown import Outline, Section, opening_paragraph, outline_text

OUTLINE_THRESHOLD = 8192
"""Bodies of this many bytes or more are answered with an outline unless forced; so are
sections of this size with sub-sections (their own text, then the outline below it)."""

FETCH_KEYS = ("version", "title")
FETCH_VERBOSE_KEYS = ("version", "modified", "etag")
LOOKUP_KEYS = ("matches", "match")
SURFACE_KEYS = ("mode", "size", "section", "note", "hidden")
"""Keys the tool surface adds itself; shown in lean and verbose mode alike. `hidden` says
how many rows a lookup or listing left out for lack of a read token (`access.hidden_note`)."""


def envelope(
    status: str,
    metadata: Mapping[str, str],
    body: str,
    *,
    keys: Sequence[str],
    verbose: bool = False,
    verbose_keys: Sequence[str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> str:
    """Render the status line, the chosen keys and the body."""
    lines = [f"status: {status}"]
    chosen = list(verbose_keys if verbose and verbose_keys is not None else keys)
    shown: set[str] = set()
    for key in chosen:
        if key in metadata:
            lines.append(f"{key}: {metadata[key]}")
            shown.add(key)
    if verbose:
        for key in sorted(metadata):
            if key not in shown:
                lines.append(f"{key}: {metadata[key]}")
                shown.add(key)
    for key in SURFACE_KEYS:
        if extra and key in extra:
            lines.append(f"{key}: {extra[key]}")
    head = "\n".join(lines) + "\n"
    if not body:
        return head
    return head + "\n" + body.lstrip("\n")


def count_lines(body: bytes) -> int:
    if not body:
        return 0
    return body.count(b"\n") + (0 if body.endswith(b"\n") else 1)


def outline_body(url: str, outline: Outline) -> str:
    """The outline answer for a large document: headings, opening, and how to go on."""
    tree = outline_text(outline)
    opening = opening_paragraph(outline.body)
    parts = [tree.rstrip("\n") if tree else "(document has no headings)"]
    if opening:
        parts.append(opening)
    parts.append(f"fetch {url}#<anchor> for a section; force=true for the full body")
    return "\n\n".join(parts) + "\n"


def section_outline_body(url: str, outline: Outline, section: Section) -> str:
    """The outline answer for a large section with sub-sections: its own text (what it
    says before its first sub-section), the tree of its sub-sections, and how to go on."""
    tree = outline_text(outline, within=section)
    own = outline.own_text(section).decode("utf-8").rstrip("\n")
    hint = f"fetch {url}#<anchor> for a sub-section; force=true for the whole section"
    return "\n\n".join((own, "Sub-sections:\n" + tree.rstrip("\n"), hint)) + "\n"


def unchanged_notice(version: str) -> str:
    return (
        f"unchanged since v{version}; the full body was returned earlier this session; pass force=true to re-read it\n"
    )


def section_not_found(anchor: str, url: str, anchors: Sequence[str]) -> str:
    listed = ", ".join(anchors) if anchors else "(document has no headings)"
    return f"section #{anchor} not found in {url}; available anchors: {listed}"
