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
