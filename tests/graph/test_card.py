"""Explore card sections and the backlinks answer: golden texts, byte for byte."""

from __future__ import annotations

from datetime import UTC, datetime

from demarkus.graph import (
    Edge,
    GraphStore,
    NeighborhoodPage,
    NeighborhoodRow,
    edge_annotation,
    render_backlinks,
    render_opening,
    render_outbound,
    render_outline_section,
    render_relations,
    render_siblings,
    render_siblings_unavailable,
)
from demarkus.markdown import Link, extract_links, outline_text, parse_outline

W = "mark://world"


def test_outline_section_caps_at_ten_headings_with_an_honest_rest() -> None:
    body = "# Title\n\n" + "".join(f"## Part {i}\n\ntext\n\n" for i in range(1, 13))
    text = render_outline_section(outline_text(parse_outline(body.encode())))
    assert text == (
        "## Outline\n"
        "- Title (#title, 50 lines)\n"
        "  - Part 1 (#part-1, 4 lines)\n"
        "  - Part 2 (#part-2, 4 lines)\n"
        "  - Part 3 (#part-3, 4 lines)\n"
        "  - Part 4 (#part-4, 4 lines)\n"
        "  - Part 5 (#part-5, 4 lines)\n"
        "  - Part 6 (#part-6, 4 lines)\n"
        "  - Part 7 (#part-7, 4 lines)\n"
        "  - Part 8 (#part-8, 4 lines)\n"
        "  - Part 9 (#part-9, 4 lines)\n"
        "+3 more headings\n"
    )


def test_outline_section_takes_lines_and_says_when_there_are_no_headings() -> None:
    lines = ["- A (#a, 2 lines)"]
    assert render_outline_section(lines, cap=10) == "## Outline\n- A (#a, 2 lines)\n"
    assert render_outline_section("") == "## Outline\n(no headings)\n"


def test_opening_section() -> None:
    assert render_opening("First line\nsecond line.\n") == "## Opening\nFirst line\nsecond line.\n"
    assert render_opening("") == "## Opening\n(no opening paragraph)\n"


def test_outbound_links_are_deduplicated_by_destination_in_document_order() -> None:
    body = (
        "# A\n\nSee [](b.md), [Bee](b.md), [the guide](../guide.md#setup), "
        "[again](../guide.md#setup), [RFC](https://example.org/rfc) and [odd](<my doc.md>).\n"
    )
    assert render_outbound(extract_links(body.encode(), f"{W}/docs/a.md")) == (
        "## Outbound links (4)\n"
        "- [Bee](/docs/b.md)\n"
        "- [the guide](/guide.md#setup)\n"
        "- [RFC](https://example.org/rfc)\n"
        "- [odd](</docs/my doc.md>)\n"
    )


def test_outbound_links_cap_and_fall_back_to_the_destination_as_label() -> None:
    links = [Link("", f"/d{i}.md", "", None, False) for i in range(12)]
    text = render_outbound(links, cap=2)
    assert text == ("## Outbound links (12)\n- [/d0.md](/d0.md)\n- [/d1.md](/d1.md)\n+10 more links\n")
    assert render_outbound([]) == "## Outbound links (0)\n"


def page_of(rows: list[NeighborhoodRow], **fields: object) -> NeighborhoodPage:
    values: dict[str, object] = {
        "url": f"{W}/center.md",
        "direction": "both",
        "relations": None,
        "rows": tuple(rows),
        "total_rows": len(rows),
        "remaining_rows": 0,
        "next_cursor": None,
    }
    values.update(fields)
    return NeighborhoodPage(**values)  # type: ignore[arg-type]


def test_relations_section_shows_each_neighbour_with_its_edges() -> None:
    a, center = f"{W}/a.md", f"{W}/center.md"
    rows = [
        NeighborhoodRow(
            a,
            (
                Edge(a, center, "", label='the "centre"', anchor="decision", count=2),
                Edge(a, center, "supersedes"),
                Edge(center, a, "", label="A", anchor="intro"),
            ),
            omitted_edges=4,
        ),
        NeighborhoodRow("https://example.org/x", (Edge(center, "https://example.org/x", ""),), 0),
    ]
    page = page_of(rows, total_rows=9, remaining_rows=7, next_cursor="abc")
    assert render_relations(page, {a: "Doc [A]", center: "Center"}) == (
        "## Relations (9 documents)\n"
        "- [Doc \\[A\\]](mark://world/a.md)\n"
        '  - incoming [link]; [source](mark://world/a.md#decision) "the \\"centre\\"" x2\n'
        "  - incoming [supersedes]; [source](mark://world/a.md)\n"
        '  - outgoing [link]; [source](mark://world/center.md#intro) "A"\n'
        "  - +4 more edges\n"
        "- [https://example.org/x](https://example.org/x)\n"
        "  - outgoing [link]; [source](mark://world/center.md)\n"
        "+7 more documents\n"
        "next-cursor: abc\n"
    )


def test_relations_section_for_a_single_direction_and_no_neighbours() -> None:
    loop = Edge(f"{W}/center.md", f"{W}/center.md", "")
    page = page_of([NeighborhoodRow(loop.target, (loop,), 0)], direction="outgoing")
    assert render_relations(page, {}) == (
        "## Relations (1 document)\n"
        "- [mark://world/center.md](mark://world/center.md)\n"
        "  - outgoing [link]; [source](mark://world/center.md)\n"
    )
    assert render_relations(page_of([]), {}) == "## Relations (0 documents)\n"


def test_relations_section_from_a_real_store_page() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    with GraphStore(None) as store:
        for name in ("b", "c", "d"):
            edge = Edge(f"{W}/{name}.md", f"{W}/a.md", "depends-on")
            store.observe(edge.source, title=name.upper(), version=1, edges=[edge], observed_at=when)
        page = store.neighborhood(f"{W}/a.md", page_size=2)
        assert page.next_cursor is not None
        assert render_relations(page, store.titles(r.url for r in page.rows)) == (
            "## Relations (3 documents)\n"
            "- [B](mark://world/b.md)\n"
            "  - incoming [depends-on]; [source](mark://world/b.md)\n"
            "- [C](mark://world/c.md)\n"
            "  - incoming [depends-on]; [source](mark://world/c.md)\n"
            "+1 more documents\n"
            f"next-cursor: {page.next_cursor}\n"
        )


def test_relations_and_backlinks_print_locations_as_the_caller_names_them() -> None:
    """The local server passes a naming that turns its own nodes into bare paths; the
    titles are still found by the node's URL, and another authority's URL stays whole."""
    a, center, far = f"{W}/a.md", f"{W}/center.md", "mark://elsewhere/b.md"

    def name(url: str) -> str:
        return url.removeprefix(W) if url.startswith(W + "/") else url

    rows = [
        NeighborhoodRow(a, (Edge(a, center, "supersedes", anchor="status"),), 0),
        NeighborhoodRow(far, (Edge(center, far, ""),), 0),
    ]
    assert render_relations(page_of(rows), {a: "A"}, name) == (
        "## Relations (2 documents)\n"
        "- [A](/a.md)\n"
        "  - incoming [supersedes]; [source](/a.md#status)\n"
        "- [mark://elsewhere/b.md](mark://elsewhere/b.md)\n"
        "  - outgoing [link]; [source](/center.md)\n"
    )
    edges = [Edge(a, center, "supersedes"), Edge(far, center, "")]
    assert render_backlinks("/center.md", edges, {a: "A"}, name=name) == (
        "Backlinks for /center.md (2):\n\n- mark://elsewhere/b.md\n- [A](/a.md) [supersedes]\n"
    )


def test_siblings_section() -> None:
    names = [f"n{i}.md" for i in range(12)] + ["sub/"]
    assert render_siblings("/dir/", ["other.md", "sub/"], complete=True) == (
        "## Siblings in /dir/ (2)\n- other.md\n- sub/\n"
    )
    assert render_siblings("/dir/", names, complete=False, cap=3) == (
        "## Siblings in /dir/ (13) (first page)\n- n0.md\n- n1.md\n- n2.md\n+10 more entries\n"
    )
    assert render_siblings_unavailable("/dir/") == "## Siblings in /dir/ (listing unavailable)\n"


def test_siblings_past_the_cap_are_those_nearest_the_documents_own_place() -> None:
    names = [f"rfc-{i:04}.md" for i in range(20)]
    # the document itself is rfc-0010.md, then the last, then the first
    middle = render_siblings("/rfcs/", names[:10] + names[11:], complete=True, cap=4, at=10)
    assert middle == (
        "## Siblings in /rfcs/ (19)\n+8 earlier entries\n"
        "- rfc-0008.md\n- rfc-0009.md\n- rfc-0011.md\n- rfc-0012.md\n+7 later entries\n"
    )
    last = render_siblings("/rfcs/", names[:19], complete=True, cap=4, at=19)
    assert last == (
        "## Siblings in /rfcs/ (19)\n+15 earlier entries\n- rfc-0015.md\n- rfc-0016.md\n- rfc-0017.md\n- rfc-0018.md\n"
    )
    first = render_siblings("/rfcs/", names[1:], complete=True, cap=4, at=0)
    assert (
        first
        == "## Siblings in /rfcs/ (19)\n- rfc-0001.md\n- rfc-0002.md\n- rfc-0003.md\n- rfc-0004.md\n+15 more entries\n"
    )


def test_backlinks_follow_the_annotation_rule_sorted_by_source_then_rel() -> None:
    x = f"{W}/x.md"
    edges = [
        Edge(f"{W}/b.md", x, "", label="Getting started", anchor="intro", count=3),
        Edge(f"{W}/a.md", x, "supersedes"),
        Edge(f"{W}/a.md", x, "", anchor="notes"),
        Edge(f"{W}/c.md", x, "cites", fragment="ignored", count=2),
    ]
    assert render_backlinks(x, edges, {f"{W}/a.md": "Title"}) == (
        "Backlinks for mark://world/x.md (4):\n"
        "\n"
        "- [Title](mark://world/a.md) (#notes)\n"
        "- [Title](mark://world/a.md) [supersedes]\n"
        '- mark://world/b.md ("Getting started", #intro, x3)\n'
        "- mark://world/c.md [cites] (x2)\n"
    )


def test_backlinks_are_capped_and_none_says_how_to_find_some() -> None:
    x = f"{W}/x.md"
    edges = [Edge(f"{W}/s{i}.md", x, "") for i in range(5)]
    assert render_backlinks(x, edges, {}, cap=2) == (
        "Backlinks for mark://world/x.md (5):\n\n- mark://world/s0.md\n- mark://world/s1.md\n+3 more backlinks\n"
    )
    assert render_backlinks(x, [], {}) == (
        "No backlinks found for mark://world/x.md\nExplore or fetch documents that link here to record their links.\n"
    )


def test_edge_annotation_parts() -> None:
    assert edge_annotation(Edge("s", "t", "")) == ""
    assert edge_annotation(Edge("s", "t", "r", label="a\nb", count=1)) == ' [r] ("a b")'
