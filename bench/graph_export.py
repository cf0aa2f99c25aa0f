"""`/graph.md`: what an authority's export of its links costs, and what taking it in costs a
client, on every visible world.

Each world is loaded into a fresh store (`demarkus world load`), then, in process:

    local graph      seed_graph over the store: what a world load spends on its graph (the baseline)
    first export     FETCH /graph.md on a fresh service: every document's links read once
    next export      the same again (documents unchanged: nothing parsed), median
    not-modified     the same with the etag, median
    client seed      parse_export + GraphStore.seed of the export, median

The first export is the same work as the local graph (a parse of every document), so its
ratio to it should be about 1; the next ones should be a small fraction of it.

    .venv/bin/python -m bench.graph_export [--repeats 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from demarkus.graph import GraphStore
from demarkus.graph.export import EXPORT_PATH, parse_export
from demarkus.graph.seed import seed_graph
from demarkus.protocol import Request, Verb
from demarkus.service import Service

from . import common

NAME = "graph_export"
AUTHORITY = "mark://bench.world"


def measure(world: Path, root: Path, repeats: int) -> dict[str, object]:
    common.load_world(world, root)
    service = Service.open(root, writable=False)
    try:
        started = time.perf_counter()
        with GraphStore(None) as local:
            documents = seed_graph(local, service.store, AUTHORITY)
        baseline = time.perf_counter() - started

        request = Request(Verb.FETCH, EXPORT_PATH, {})
        started = time.perf_counter()
        first = service.handle(request)
        cold = time.perf_counter() - started
        warm = _median(lambda: service.handle(request), repeats)
        same = Request(Verb.FETCH, EXPORT_PATH, {"if-none-match": first.metadata["etag"]})
        unchanged = _median(lambda: service.handle(same), repeats)
        export = parse_export(first.text, AUTHORITY)
        assert export is not None

        def seed() -> None:
            parsed = parse_export(first.text, AUTHORITY)
            assert parsed is not None
            with GraphStore(None) as graph:
                graph.seed(parsed.titles, parsed.edges)

        client = _median(seed, repeats)
    finally:
        service.close()
    return {
        "world": common.shown(world),
        "documents": documents,
        "edges": len(export.edges),
        "export_bytes": len(first.body),
        "local_graph_s": round(baseline, 3),
        "first_export_s": round(cold, 3),
        "first_over_local": round(cold / baseline, 2),
        "next_export_ms": round(warm * 1000, 1),
        "next_over_first": round(warm / cold, 4),
        "not_modified_ms": round(unchanged * 1000, 1),
        "client_seed_ms": round(client * 1000, 1),
    }


def _median(action: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="the demo world only; results not kept")
    args = parser.parse_args()
    worlds = (common.DEMO,) if args.smoke else common.VISIBLE_WORLDS
    rows = []
    with tempfile.TemporaryDirectory(prefix="demarkus-graph-export-") as tmp:
        for number, world in enumerate(worlds):
            rows.append(measure(world, Path(tmp) / f"store-{number}", args.repeats))
    headers = list(rows[0])
    common.print_table("/graph.md: export and seed, per world", headers, [[row[h] for h in headers] for row in rows])
    common.write_results(
        NAME, {"repeats": args.repeats, "worlds": [r["world"] for r in rows]}, rows, keep=not args.smoke
    )


if __name__ == "__main__":
    main()
