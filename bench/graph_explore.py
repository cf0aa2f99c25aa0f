"""Graph store: the explore neighbourhood query on hubs with 1,000 and 10,000 incoming edges.

A SQLite file store (WAL) holds 10,000 documents with about 10 outgoing edges each
(about 100,000 edges): 9 random links, one to `hub-10k.md` and, for the first 1,000
documents, one to `hub-1k.md`; half of the hub edges are typed `supersedes`. Per hub it times:

    first page        neighborhood(hub)                         both, page_size 10
    middle page       neighborhood(hub, cursor=<middle>)        paging deep into the rows
    filtered          neighborhood(hub, relations=["supersedes"])
    relations text    first page + titles + render_relations    what mark_explore adds
    backlinks         backlinks(hub)                             every incoming edge

and, for scale, one `observe` replacing a document's outgoing edges (`--fanout` of them).
Prints a table and writes bench/results/graph_explore.json.

    .venv/bin/python -m bench.graph_explore [--docs 10000] [--iterations 300]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from demarkus.graph import Edge, GraphStore, render_relations

from .common import latency_summary_ms, print_table, write_results

W = "mark://bench.world"
HUB_1K = f"{W}/hub-1k.md"
HUB_10K = f"{W}/hub-10k.md"
WHEN = datetime(2026, 10, 10, tzinfo=UTC)


def doc(i: int) -> str:
    return f"{W}/docs/d{i:05}.md"


def build(store: GraphStore, docs: int, fanout: int, seed: int = 7) -> int:
    """Observe `docs` documents; returns the number of edges stored."""
    rng = random.Random(seed)
    total = 0
    for i in range(docs):
        source = doc(i)
        targets = {doc(rng.randrange(docs)) for _ in range(fanout - 2)} - {source}
        edges = [Edge(source, t, "", label="see", anchor="body") for t in targets]
        rel = "supersedes" if i % 2 else ""
        edges.append(Edge(source, HUB_10K, rel, label="hub" if not rel else ""))
        if i < 1000:
            edges.append(Edge(source, HUB_1K, rel, label="hub" if not rel else ""))
        edges.sort(key=lambda e: (e.target, e.rel))
        store.observe(source, title=f"Doc {i}", version=1, edges=edges, observed_at=WHEN)
        total += len(edges)
    for hub in (HUB_1K, HUB_10K):
        store.observe(hub, title=hub.rsplit("/", 1)[1], version=1, edges=[], observed_at=WHEN)
    return total


def timed(fn: Callable[[], object], iterations: int) -> list[float]:
    fn()  # warm the page cache and the statement cache
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def relations_text(store: GraphStore, hub: str) -> str:
    """What mark_explore adds for the relations: one page, its titles, its text."""
    page = store.neighborhood(hub)
    return render_relations(page, store.titles(r.url for r in page.rows))


def middle_cursor(store: GraphStore, hub: str, rows: int) -> str:
    """A cursor about half-way through the hub's neighbours (pages of 100, then 10)."""
    page = store.neighborhood(hub, page_size=100)
    for _ in range(rows // 200 - 1):
        assert page.next_cursor is not None
        page = store.neighborhood(hub, page_size=100, cursor=page.next_cursor)
    assert page.next_cursor is not None
    return page.next_cursor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--fanout", type=int, default=11, help="edges per document (about)")
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        store = GraphStore(Path(tmp) / "graph.sqlite")
        start = time.perf_counter()
        edges = build(store, args.docs, args.fanout)
        build_s = time.perf_counter() - start
        print(f"built {args.docs} documents, {edges} edges in {build_s:.1f} s")

        results: dict[str, dict[str, float]] = {}
        rows = []
        for name, hub in (("hub-1k", HUB_1K), ("hub-10k", HUB_10K)):
            incoming = len(store.backlinks(hub))
            cursor = middle_cursor(store, hub, incoming)
            cases: dict[str, Callable[[], object]] = {
                "first page": partial(store.neighborhood, hub),
                "middle page": partial(store.neighborhood, hub, cursor=cursor),
                "filtered": partial(store.neighborhood, hub, relations=["supersedes"]),
                "relations text": partial(relations_text, store, hub),
                "backlinks": partial(store.backlinks, hub),
            }
            for case, fn in cases.items():
                summary = latency_summary_ms(timed(fn, args.iterations))
                results[f"{name} {case}"] = {"incoming_edges": incoming, **summary}
                rows.append([name, incoming, case, summary["p50_ms"], summary["p99_ms"], summary["max_ms"]])

        rng = random.Random(11)

        def reobserve() -> None:
            i = rng.randrange(args.docs)
            source = doc(i)
            targets = sorted({doc(rng.randrange(args.docs)) for _ in range(args.fanout)} - {source})
            store.observe(
                source,
                title=f"Doc {i}",
                version=2,
                edges=[Edge(source, t, "") for t in targets],
                observed_at=WHEN,
            )

        summary = latency_summary_ms(timed(reobserve, args.iterations))
        case = f"observe {args.fanout} edges"
        results[case] = {"incoming_edges": 0, **summary}
        rows.append(["-", 0, case, summary["p50_ms"], summary["p99_ms"], summary["max_ms"]])
        store.close()

    print_table(
        f"graph store, {args.docs} documents, {edges} edges, {args.iterations} runs each (ms)",
        ["node", "incoming", "query", "p50", "p99", "max"],
        rows,
    )
    write_results(
        "graph_explore",
        {
            "docs": args.docs,
            "fanout": args.fanout,
            "edges": edges,
            "iterations": args.iterations,
            "page_size": 10,
            "build_seconds": round(build_s, 2),
        },
        results,
    )


if __name__ == "__main__":
    main()
