"""Seeding a graph from a loaded store makes incoming relations known up front."""

import os
from pathlib import Path

import pytest

from demarkus.graph import GraphStore
from demarkus.graph.seed import Ahead, Prepared, seed_graph
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
            seed_graph(graph, store, "mark://demo.world", prepared={path: ahead}.get)
            assert (graph.outgoing(url) == [marker]) is used


def _handed_over(ahead: Ahead, store: FileStore) -> None:
    for path in store.documents():
        doc = store.read(path)
        ahead.submit(path, doc.metadata, doc.body)


def test_the_world_parsed_in_worker_processes_seeds_what_a_parse_here_seeds(demo_root: Path, tmp_path: Path):
    from demarkus.index import SectionIndex

    store = FileStore(demo_root)
    given: list[str] = []
    with Ahead("mark://demo.world", workers=2) as ahead:
        _handed_over(ahead, store)

        def taken(path: str) -> Prepared | None:
            found = ahead.get(path)
            if found is not None:
                given.append(path)
            return found

        seeded = {}
        for name, prepared in (("here", None), ("ahead", taken)):
            index = SectionIndex.recreate(tmp_path / f"{name}.sqlite")
            with GraphStore(None) as graph:
                seed_graph(graph, store, "mark://demo.world", index=index, prepared=prepared)
                edges = {p: graph.outgoing("mark://demo.world" + p) for p in store.documents()}
            hits = [index.search(q, "/", limit=20) for q in ("segment log", "lease heartbeat", "retry backoff")]
            index.close()
            seeded[name] = (edges, hits)
    assert given == store.documents()  # every parse came from the workers, each once
    assert seeded["ahead"] == seeded["here"]


def _die(run: object) -> dict[str, Prepared]:
    os._exit(3)  # a worker killed part way


def _fault(run: object) -> dict[str, Prepared]:
    raise RuntimeError("a fault in the worker")


@pytest.mark.parametrize(("task", "said"), [(_die, "terminated abruptly"), (_fault, "a fault in the worker")])
def test_when_a_parsing_worker_fails_the_seeding_parses_for_itself(  # type: ignore[no-untyped-def]
    demo_root: Path, task, said: str, caplog
) -> None:
    store = FileStore(demo_root)
    with Ahead("mark://demo.world", workers=1, task=task) as ahead:
        _handed_over(ahead, store)
        assert ahead.get(store.documents()[-1]) is None
        assert ahead.get(store.documents()[0]) is None
        with GraphStore(None) as graph:
            assert seed_graph(graph, store, "mark://demo.world", prepared=ahead.get) == len(store.documents())
            assert graph.outgoing("mark://demo.world/decisions/adr-0007-segment-log.md")
    assert "parsing beside the load failed" in caplog.text and said in caplog.text


def test_a_document_that_does_not_parse_is_left_to_the_seeding(demo_root: Path) -> None:
    with Ahead("mark://demo.world", workers=1) as ahead:
        ahead.submit("/bad.md", {}, b"\xff not UTF-8")
        ahead.submit("/good.md", {}, b"# Good\n")
        assert ahead.get("/bad.md") is None
        good = ahead.get("/good.md")
        assert good is not None and good.url == "mark://demo.world/good.md"
        assert ahead.get("/good.md") is None  # each parse is given once
