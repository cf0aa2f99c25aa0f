"""Seeding a graph from a loaded store makes incoming relations known up front."""

from pathlib import Path

from demarkus.graph import GraphStore
from demarkus.graph.seed import seed_graph
from demarkus.store import FileStore


def test_seeding_the_demo_world_records_supersession_backlinks(demo_root: Path):
    with GraphStore(None) as graph:
        count = seed_graph(graph, FileStore(demo_root), "mark://demo.world")
        assert count == len(FileStore(demo_root).documents())
        incoming = graph.backlinks("mark://demo.world/decisions/adr-0003-sqlite-job-store.md")
        assert ("mark://demo.world/decisions/adr-0007-segment-log.md", "supersedes") in {
            (e.source, e.rel) for e in incoming
        }
        cross = graph.outgoing("mark://demo.world/decisions/adr-0008-pier-framing.md")
        assert "mark://partner.world/specs/wire.md" in {e.target for e in cross}


def test_a_parse_made_ahead_is_used_only_for_the_body_and_metadata_it_was_made_from(demo_root: Path):
    from dataclasses import replace

    from demarkus.graph.observe import Edge
    from demarkus.graph.seed import prepare

    store = FileStore(demo_root)
    path = "/decisions/adr-0007-segment-log.md"
    doc = store.read(path)
    url = "mark://demo.world" + path
    marker = Edge(source=url, target="mark://demo.world/marker.md", rel="")
    made = replace(prepare(url, doc.metadata, doc.body), edges=[marker])
    stale = replace(made, content_hash="sha256-" + "0" * 64)
    other_meta = replace(made, metadata={**made.metadata, "title": "Changed"})
    elsewhere = replace(made, url="mark://other.world" + path)
    for ahead, used in ((made, True), (stale, False), (other_meta, False), (elsewhere, False)):
        with GraphStore(None) as graph:
            seed_graph(graph, store, "mark://demo.world", prepared={path: ahead})
            assert (graph.outgoing(url) == [marker]) is used


def test_the_world_parsed_in_another_process_seeds_what_a_parse_here_seeds(demo_root: Path, tmp_path: Path):
    from demarkus.graph.seed import prepared_aside
    from demarkus.index import SectionIndex
    from demarkus.worlds import demo_world_path

    store = FileStore(demo_root)
    with prepared_aside(demo_world_path()) as parsed:
        ahead = parsed()
    assert set(ahead) == set(store.documents())
    seeded = {}
    for name, prepared in (("here", None), ("ahead", ahead)):
        index = SectionIndex.recreate(tmp_path / f"{name}.sqlite")
        with GraphStore(None) as graph:
            seed_graph(graph, store, "mark://demo.world", index=index, prepared=prepared)
            edges = {p: graph.outgoing("mark://demo.world" + p) for p in store.documents()}
        hits = [index.search(q, "/", limit=20) for q in ("segment log", "lease heartbeat", "retry backoff")]
        index.close()
        seeded[name] = (edges, hits)
    assert seeded["ahead"] == seeded["here"]


def test_when_the_parsing_process_dies_the_seeding_parses_for_itself(tmp_path: Path, caplog):  # type: ignore[no-untyped-def]
    from demarkus.graph.seed import prepared_aside

    with prepared_aside(tmp_path / "no-such-world") as parsed:
        assert parsed() == {}
    assert "parsing beside the load failed (exit code 1); parsing after it" in caplog.text
