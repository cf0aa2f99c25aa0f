"""Pure: `/graph.md`, the links between an authority's documents as one markdown text.

A client learns a document's edges when it reads the document, so on its own it cannot know
which documents link to one it has not read them from: `mark_explore` on an old proposal
shows none of the newer ones that amend it. An authority answers FETCH `/graph.md` with the
edges of its current documents the caller may read (`render_export`), and a client seeds
its graph with them (`parse_export`, `GraphStore.seed`). The format is the reference's
graph export, with the authority's own documents named by path: an authority does not know
the name its callers reach it by (`localhost:6309`, a gateway's world name), so a client
puts its own in front::

    # Document Graph

    > Exported: 2026-09-01T00:00:00Z
    > Nodes: 2
    > Edges: 1

    ## Nodes

    | URL | Title | Status | Links |
    |-----|-------|--------|-------|
    | [/a.md](/a.md) | A \\| title | ok | 1 |
    | [/b.md](/b.md) | B | ok | 0 |

    ## Edges

    | From | To | Rel | Label | Anchor | Count |
    |------|----|-----|-------|--------|-------|
    | /a.md | /b.md#intro | depends-on |  |  | 1 |

A node's status is `ok` for a current document the caller may read and `unknown` for any
other link target (a missing document and one the caller may not read look alike).
`Exported` is the newest modification among the documents the caller may read, so a store
that did not change gives the same bytes (and etag). Cells escape `\\` then `|`; runs of
white space become one space, as the explore card prints a label. Edges to other
authorities keep their full `mark://` URL; links to the web are left out (they are
nobody's backlinks here). When the edges would pass `max_bytes`, the last ones are left out
and `> Omitted: N edges` says how many.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ..errors import BadRequestError
from ..protocol import SCHEME
from .observe import Edge, node_url

__all__ = ["EXPORT_PATH", "GraphExport", "parse_export", "render_export"]

EXPORT_PATH = "/graph.md"
TITLE_LINE = "# Document Graph"
_NODE_HEADER = "| URL | Title | Status | Links |\n|-----|-------|--------|-------|\n"
_EDGE_HEADER = "| From | To | Rel | Label | Anchor | Count |\n|------|----|-----|-------|--------|-------|\n"
_MARK = f"{SCHEME}://"


@dataclass(frozen=True, slots=True)
class GraphExport:
    """What a client takes from an export: titles by node URL and edges, both on the
    authority's full `mark://` URLs."""

    titles: Mapping[str, str]
    edges: tuple[Edge, ...]
    omitted: int
    """Edges the authority left out to keep the export within its size."""


def render_export(titles: Mapping[str, str], edges: Sequence[Edge], exported: datetime, max_bytes: int) -> bytes:
    """The export of `edges` (sources and same-authority targets as paths) and the titles of
    the documents they join (`titles`, by path), edges sorted by source, target and rel.
    Edges are cut from the end so the text stays within `max_bytes`."""
    ordered = sorted(edges, key=lambda e: (e.source, e.target, e.fragment, e.rel))
    rows = [_edge_row(edge) for edge in ordered]

    def text(kept: int) -> bytes:
        return _text(titles, ordered[:kept], rows[:kept], exported, len(rows) - kept).encode("utf-8")

    whole = text(len(rows))
    if len(whole) <= max_bytes:
        return whole
    fits, over = 0, len(rows)  # the most edges that fit: at least `fits`, fewer than `over`
    while over - fits > 1:
        middle = (fits + over) // 2
        if len(text(middle)) <= max_bytes:
            fits = middle
        else:
            over = middle
    return text(fits)


def _text(
    titles: Mapping[str, str], edges: Sequence[Edge], rows: Sequence[str], exported: datetime, omitted: int
) -> str:
    links: dict[str, int] = {}
    for edge in edges:
        links[edge.source] = links.get(edge.source, 0) + 1
        if edge.target.startswith("/"):
            links.setdefault(edge.target, 0)
    nodes = sorted(links)
    stamp = exported.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = [f"{TITLE_LINE}\n\n> Exported: {stamp}\n> Nodes: {len(nodes)}\n> Edges: {len(edges)}\n"]
    if omitted:
        out.append(f"> Omitted: {omitted} edges\n")
    out.append("\n## Nodes\n\n" + _NODE_HEADER)
    out += [
        f"| [{_cell(p)}]({_cell(p)}) | {_cell(titles.get(p, ''))} | {_status(p, titles)} | {links[p]} |\n"
        for p in nodes
    ]
    out.append("\n## Edges\n\n" + _EDGE_HEADER)
    out += rows
    return "".join(out)


def _status(path: str, titles: Mapping[str, str]) -> str:
    """`ok` for a document the export was given (a current one the caller may read), else
    `unknown`: a link's target that is missing and one the caller may not read look alike."""
    return "ok" if path in titles else "unknown"


def _edge_row(edge: Edge) -> str:
    to = edge.target + (f"#{edge.fragment}" if edge.fragment else "")
    cells = (edge.source, to, edge.rel, edge.label, edge.anchor, str(edge.count))
    return "| " + " | ".join(_cell(c) for c in cells) + " |\n"


def _cell(text: str) -> str:
    flat = " ".join(text.split())
    return flat.replace("\\", "\\\\").replace("|", "\\|")


def parse_export(text: str, authority: str) -> GraphExport | None:
    """The export in `text`, its paths put on `authority` (`mark://host[:port]`); None when
    `text` is not an export (a document someone stored at /graph.md).

    Only edges from the authority's own documents are taken: an export names no source by a
    full URL, so none can speak for another authority's documents. A row that does not
    read as an edge is skipped.
    """
    lines = text.splitlines()
    if not lines or lines[0].strip() != TITLE_LINE:
        return None
    titles: dict[str, str] = {}
    edges: list[Edge] = []
    omitted = 0
    section = ""
    for line in lines[1:]:
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        if line.startswith("> Omitted: "):
            omitted = _count(line[len("> Omitted: ") :].split(" ")[0]) or 0
            continue
        if not line.startswith("| ") or line.startswith(("| URL |", "| From |")):
            continue
        cells = _cells(line)
        if section == "Nodes" and len(cells) == 4:
            path = cells[0].partition("](")[2].removesuffix(")")
            if path.startswith("/") and cells[1]:
                try:
                    titles[node_url(authority + path)] = cells[1]
                except BadRequestError:
                    continue
        elif section == "Edges" and len(cells) == 6:
            edge = _edge(cells, authority)
            if edge is not None:
                edges.append(edge)
    return GraphExport(titles, tuple(edges), omitted)


def _edge(cells: Sequence[str], authority: str) -> Edge | None:
    source, to, rel, label, anchor, count = cells
    number = _count(count)
    if not source.startswith("/") or number is None or number < 1:
        return None
    target, _, fragment = to.partition("#")
    if target.startswith("/"):
        target = authority + target
    elif not target.lower().startswith(_MARK):
        return None
    try:
        return Edge(node_url(authority + source), node_url(target), rel, label, anchor, fragment, number)
    except BadRequestError:
        return None


def _count(text: str) -> int | None:
    return int(text) if text.isdigit() and len(text) <= 9 else None


def _cells(line: str) -> list[str]:
    """The cells of one table row, unescaped (`\\|` is a bar inside a cell)."""
    cells: list[str] = []
    current: list[str] = []
    body = line.strip()[1:]
    index = 0
    while index < len(body):
        char = body[index]
        if char == "\\" and index + 1 < len(body):
            current.append(body[index + 1])
            index += 2
            continue
        if char == "|":
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        index += 1
    return cells
