"""Pure: the text of the explore card's sections and of the backlinks answer.

These texts are replayed to models on every turn, so they are short, deterministic and
stable byte for byte. Each function returns whole lines, every one ending in `\\n`, with
no blank lines; a caller builds the card by concatenating sections. Every list is capped,
and a cap is never silent: `+N more <noun>` says how much was left out::

    ## Outline
    - Title (#title, 40 lines)
      - Setup (#setup, 6 lines)
    +3 more headings
    ## Opening
    <first paragraph>
    ## Outbound links (12)
    - [label](dest)
    +2 more links
    ## Relations (2 documents)
    - [Title or URL](mark://world/a.md)
      - incoming [supersedes]; [source](mark://world/a.md#decision) "label" x2
      - outgoing [link]; [source](mark://world/center.md#intro)
      - +4 more edges
    +7 more documents
    next-cursor: <opaque>
    ## Siblings in /dir/ (5)
    - other.md
    +1 more entries

(past the cap, the siblings nearest the document's own name: `+N earlier entries` before
them, `+N later entries` after).

Freshness annotations (`[freshness: ...]` in the Go client) are left out: explore
observes the document it shows, so its own edges are always fresh, and the store keeps
no per-source revision evidence to annotate the others with.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from .observe import Edge
from .store import NeighborhoodPage

__all__ = [
    "edge_annotation",
    "render_backlinks",
    "render_opening",
    "render_outbound",
    "render_outline_section",
    "render_relations",
    "render_siblings",
    "render_siblings_unavailable",
]

_SPACE = re.compile(r"\s+")
_BRACKETS = re.compile(r"([\\\[\]])")
_NEEDS_ANGLE = re.compile(r"[\s()]")


class LinkLike(Protocol):
    """A `markdown.Link` or an `Edge`: something with a label pointing at target#fragment."""

    @property
    def label(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def fragment(self) -> str: ...


def render_outline_section(outline_text_lines: str | Sequence[str], cap: int = 10) -> str:
    """`## Outline` with the first `cap` lines of `markdown.outline_text` (a str or its lines)."""
    if isinstance(outline_text_lines, str):
        lines = outline_text_lines.splitlines()
    else:
        lines = [line.rstrip("\n") for line in outline_text_lines]
    lines = [line for line in lines if line.strip()]
    out = ["## Outline\n"]
    if not lines:
        out.append("(no headings)\n")
    out += [f"{line}\n" for line in lines[:cap]]
    out.append(_more(len(lines) - cap, "headings"))
    return "".join(out)


def render_opening(paragraph: str) -> str:
    """`## Opening` and the opening paragraph as raw markdown."""
    text = paragraph.strip()
    return f"## Opening\n{text if text else '(no opening paragraph)'}\n"


def render_outbound(links: Sequence[LinkLike], cap: int = 10) -> str:
    """`## Outbound links (N)`: one line per distinct destination (target#fragment), in
    document order, labelled by its first labelled occurrence; N counts destinations."""
    labels: dict[str, str] = {}
    for link in links:
        dest = link.target + (f"#{link.fragment}" if link.fragment else "")
        if not labels.get(dest):
            labels[dest] = _one_line(link.label)
    out = [f"## Outbound links ({len(labels)})\n"]
    for dest, label in list(labels.items())[:cap]:
        out.append(f"- [{_link_text(label or dest)}]({_destination(dest)})\n")
    out.append(_more(len(labels) - cap, "links"))
    return "".join(out)


def _as_is(url: str) -> str:
    return url


def render_relations(page: NeighborhoodPage, titles: Mapping[str, str], name: Callable[[str], str] = _as_is) -> str:
    """`## Relations (N documents)`: one page of the neighbourhood, each neighbour with its
    edges, then `next-cursor:` when more pages follow. `name` turns a node's URL into the
    location the text prints (a bare path on the local server)."""
    noun = "document" if page.total_rows == 1 else "documents"
    out = [f"## Relations ({page.total_rows} {noun})\n"]
    for row in page.rows:
        title = _one_line(titles.get(row.url, ""))
        shown = name(row.url)
        out.append(f"- [{_link_text(title or shown)}]({_destination(shown)})\n")
        for edge in row.edges:
            out.append(f"  - {_edge_direction(page, edge)} {_edge_line(edge, name)}\n")
        if row.omitted_edges:
            out.append(f"  - +{row.omitted_edges} more edges\n")
    out.append(_more(page.remaining_rows, "documents"))
    if page.next_cursor:
        out.append(f"next-cursor: {page.next_cursor}\n")
    return "".join(out)


def render_siblings(dir_path: str, names: Sequence[str], complete: bool, cap: int = 10, at: int = 0) -> str:
    """`## Siblings in /dir/ (N)`, ` (first page)` when the listing was cut short. Past
    `cap`, the entries nearest the document's own place in the listing (`at`: how many
    come before it): in a folder of numbered or dated notes those are the ones written
    about the same time, where the listing's first entries are only the oldest."""
    first_page = "" if complete else " (first page)"
    start = max(0, min(at - cap // 2, len(names) - cap))
    out = [f"## Siblings in {dir_path} ({len(names)}){first_page}\n"]
    if start:
        out.append(f"+{start} earlier entries\n")
    out += [f"- {name}\n" for name in names[start : start + cap]]
    later = len(names) - start - cap
    if later > 0:
        out.append(f"+{later} later entries\n" if start else f"+{later} more entries\n")
    return "".join(out)


def render_siblings_unavailable(dir_path: str) -> str:
    """The siblings section when the LIST of the directory failed."""
    return f"## Siblings in {dir_path} (listing unavailable)\n"


def render_backlinks(
    url: str, edges: Sequence[Edge], titles: Mapping[str, str], cap: int = 50, name: Callable[[str], str] = _as_is
) -> str:
    """The `mark_backlinks` answer: one line per incoming edge, by source URL then rel;
    `url` and `name` as `render_relations` prints locations."""
    if not edges:
        return f"No backlinks found for {url}\nExplore or fetch documents that link here to record their links.\n"
    ordered = sorted(edges, key=lambda e: (e.source, e.rel, e.target))
    out = [f"Backlinks for {url} ({len(ordered)}):\n", "\n"]
    for edge in ordered[:cap]:
        title = _one_line(titles.get(edge.source, ""))
        shown = name(edge.source)
        source = f"[{_link_text(title)}]({_destination(shown)})" if title else shown
        out.append(f"- {source}{edge_annotation(edge)}\n")
    out.append(_more(len(ordered) - cap, "backlinks"))
    return "".join(out)


def edge_annotation(edge: Edge) -> str:
    """` [rel]` when typed, then ` ("label", #anchor, xN)` with the parts that are set."""
    text = f" [{edge.rel}]" if edge.rel else ""
    parts = []
    if edge.label:
        parts.append(_quote(edge.label))
    if edge.anchor:
        parts.append(f"#{edge.anchor}")
    if edge.count > 1:
        parts.append(f"x{edge.count}")
    if parts:
        text += f" ({', '.join(parts)})"
    return text


# --- pieces -------------------------------------------------------------------------------


def _edge_direction(page: NeighborhoodPage, edge: Edge) -> str:
    if page.direction != "both":
        return page.direction
    return "incoming" if edge.target == page.url else "outgoing"


def _edge_line(edge: Edge, name: Callable[[str], str]) -> str:
    """`[rel]; [source](url#anchor) "label" xN` for one edge of a relations row."""
    source = name(edge.source) + (f"#{edge.anchor}" if edge.anchor else "")
    text = f"[{edge.rel or 'link'}]; [source]({_destination(source)})"
    if edge.label:
        text += f" {_quote(edge.label)}"
    if edge.count > 1:
        text += f" x{edge.count}"
    return text


def _more(left_out: int, noun: str) -> str:
    return f"+{left_out} more {noun}\n" if left_out > 0 else ""


def _one_line(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _quote(label: str) -> str:
    escaped = _one_line(label).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _link_text(text: str) -> str:
    """Text safe inside `[...]`: backslashes and brackets escaped."""
    return _BRACKETS.sub(r"\\\1", text)


def _destination(dest: str) -> str:
    """A link destination; in `<...>` when it holds spaces or parentheses."""
    return f"<{dest}>" if _NEEDS_ANGLE.search(dest) else dest
