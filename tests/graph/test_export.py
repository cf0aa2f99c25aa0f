"""`/graph.md`: the export an authority renders and a client parses."""

from __future__ import annotations

from datetime import UTC, datetime

from demarkus.graph import Edge
from demarkus.graph.export import parse_export, render_export

WHEN = datetime(2026, 9, 1, 12, 30, tzinfo=UTC)
HERE = "mark://localhost:7000"


def _edges() -> list[Edge]:
    return [
        Edge("/b.md", "/a.md", "supersedes", "", "", "", 1),
        Edge("/a.md", "/b.md", "", "the | other \\ one", "intro", "setup", 3),
        Edge("/a.md", "mark://elsewhere.org/c.md", "depends-on", "", "", "", 1),
    ]


def test_an_export_reads_back_on_the_clients_name_for_the_authority():
    text = render_export({"/a.md": "Alpha | first", "/b.md": "Beta"}, _edges(), WHEN, 1 << 20).decode()
    assert text.startswith("# Document Graph\n\n> Exported: 2026-09-01T12:30:00Z\n> Nodes: 2\n> Edges: 3\n")
    assert "| [/a.md](/a.md) | Alpha \\| first | ok | 2 |" in text
    assert "| [/b.md](/b.md) | Beta | ok | 1 |" in text
    assert "| /a.md | /b.md#setup |  | the \\| other \\\\ one | intro | 3 |" in text
    export = parse_export(text, HERE)
    assert export is not None and export.omitted == 0
    assert export.titles == {f"{HERE}/a.md": "Alpha | first", f"{HERE}/b.md": "Beta"}
    assert set(export.edges) == {
        Edge(f"{HERE}/a.md", f"{HERE}/b.md", "", "the | other \\ one", "intro", "setup", 3),
        Edge(f"{HERE}/a.md", "mark://elsewhere.org/c.md", "depends-on", "", "", "", 1),
        Edge(f"{HERE}/b.md", f"{HERE}/a.md", "supersedes", "", "", "", 1),
    }


def test_the_same_edges_give_the_same_bytes_in_any_order():
    one = render_export({"/a.md": "Alpha"}, _edges(), WHEN, 1 << 20)
    assert render_export({"/a.md": "Alpha"}, list(reversed(_edges())), WHEN, 1 << 20) == one


def test_a_label_over_several_lines_is_one_cell():
    edge = Edge("/a.md", "/b.md", "", "two\nlines\t here", "", "", 1)
    export = parse_export(render_export({}, [edge], WHEN, 1 << 20).decode(), HERE)
    assert export is not None and export.edges[0].label == "two lines here"


def test_an_export_over_its_size_leaves_out_its_last_edges_and_says_how_many():
    edges = [Edge(f"/d/{i:03}.md", "/hub.md", "", f"link {i}", "", "", 1) for i in range(300)]
    whole = render_export({}, edges, WHEN, 1 << 20)
    cut = render_export({}, edges, WHEN, len(whole) // 3)
    assert len(cut) <= len(whole) // 3
    export = parse_export(cut.decode(), HERE)
    assert export is not None
    assert 0 < len(export.edges) < 300 and export.omitted == 300 - len(export.edges)
    assert f"> Omitted: {export.omitted} edges" in cut.decode()
    assert export.edges[0].source == f"{HERE}/d/000.md"  # the first edges are kept


def test_a_document_stored_as_graph_md_is_not_an_export():
    assert parse_export("# My graph notes\n\n| From | To |\n", HERE) is None
    assert parse_export("", HERE) is None


def test_rows_that_do_not_read_as_this_authoritys_edges_are_skipped():
    text = (
        "# Document Graph\n\n## Edges\n\n"
        "| From | To | Rel | Label | Anchor | Count |\n|------|----|-----|-------|--------|-------|\n"
        "| mark://other.org/x.md | /a.md | supersedes |  |  | 1 |\n"  # speaks for another authority
        "| /a.md | https://example.org/ |  |  |  | 1 |\n"  # the web
        "| /a.md | /b.md |  |  |  | many |\n"  # not a count
        "| /a.md | /b.md |  |  |  | 0 |\n"
        "| /a.md | /b.md | only four | cells |\n"
        "| /a.md | mark:///c.md |  |  |  | 1 |\n"  # no host
        "| /a.md | /c.md | depends-on |  |  | 2 |\n"
    )
    export = parse_export(text, HERE)
    assert export is not None
    assert export.edges == (Edge(f"{HERE}/a.md", f"{HERE}/c.md", "depends-on", "", "", "", 2),)
