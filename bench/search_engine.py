"""Search near the engine: the section index against a bare FTS5 table of the same
sections, side by side in one run, on the PEPs world and on a generated world.

    .venv/bin/python -m bench.search_engine                  # peps + 100,000 generated sections
    .venv/bin/python -m bench.search_engine --docs 1000      # a smaller generated world
    .venv/bin/python -m bench.search_engine --quick          # smoke run; writes bench/out only

The baseline is what the engine alone costs. Its table holds the very rows the index holds
(`index.sqlite.section_rows`: the project's own markdown parser, title and tags, heading
trails) in the same `fts5 (meta, trail, body)` with the same tokenizer, in one
transaction, and nothing else: no sections or documents tables, no catalog table. Its
query is the OR of the same content words (`query.content_words`), best `bm25` first, the
LOOKUP's default limit of rows, ids and scores only (no snippets, no re-ranking).

* **build**: the baseline parses every current document and fills its table;
  `index.rebuild` (what `demarkus index rebuild` runs) reads the store, parses and fills
  the index. For the generated world both take the documents from memory.
* **world load** (PEPs only): `demarkus world load` as a subprocess (every version into
  a fresh store, the index and the graph), against the baseline build of the current
  versions; one load per build round, in turns with the builds, ratio of medians (one
  load alone swung from 1.6 to 2.6 times the build with what else the machine did).
* **lookup**: body-match LOOKUP in process (`Service.handle`) and the index's `search`
  against the baseline query, query by query in turn (each round in another order of
  the arms), over several rounds; ratios of medians. On the generated world the
  LOOKUP's service has an empty store beside the index (a body LOOKUP reads only the
  index). On PEPs also the world's own questions (a dozen content words each, as agents
  ask), on the baseline query and the LOOKUP.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path

from demarkus.catalog import DEFAULT_LIMIT, derive_title, parse_tags
from demarkus.index import SectionIndex, rebuild
from demarkus.index.query import content_words, match_any
from demarkus.index.sqlite import TOKENIZE, section_rows
from demarkus.protocol import Request, Verb
from demarkus.service import Service
from demarkus.store import FileStore

from . import common
from .index_build import MODIFIED, build_generated, generate_world, latency_queries
from .lookup_body import QUERIES, SCOPE

NAME = "search_engine"
TARGET = 2.0
"""The goal: the project's figure at most this many times the bare engine's."""

Document = tuple[str, dict[str, str], bytes]
"""path, metadata, body."""

# --- the baseline ---------------------------------------------------------------------------


def bare_build(path: Path, documents: Iterable[Document]) -> tuple[float, int]:
    """Seconds to parse `documents` and fill a bare FTS5 table with their rows; rows."""
    path.unlink(missing_ok=True)
    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute(f"CREATE VIRTUAL TABLE fts USING fts5 (meta, trail, body, tokenize = '{TOKENIZE}')")
        rows = 0
        started = time.perf_counter()
        db.execute("BEGIN")
        for doc_path, metadata, body in documents:
            meta = "\n".join((derive_title(doc_path, metadata, body), *parse_tags(metadata.get("tags"))))
            found = [(meta, trail, text) for _anchor, _heading, trail, text in section_rows(body)]
            db.executemany("INSERT INTO fts (meta, trail, body) VALUES (?, ?, ?)", found)
            rows += len(found)
        db.execute("COMMIT")
        return time.perf_counter() - started, rows
    finally:
        db.close()


BARE_QUERY = "SELECT rowid, -bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?"


def bare_lookup(db: sqlite3.Connection) -> Callable[[str], object]:
    def run(query: str) -> object:
        return db.execute(BARE_QUERY, (match_any(content_words(query)), DEFAULT_LIMIT)).fetchall()

    return run


# --- measuring ------------------------------------------------------------------------------


def side_by_side(
    arms: dict[str, Callable[[str], object]], queries: Sequence[str], rounds: int
) -> dict[str, dict[str, object]]:
    """Each query on every arm in turn, `rounds` times after a warm-up round; per arm the
    latency summary over all samples and the median of the per-round p50s.

    Each round takes the next order of the arms (all their orders in turn), so over a
    multiple of the number of orders each arm runs as often straight after each other
    arm as before it: an arm run right after another on the same query finds the caches that
    one warmed (LOOKUP and `index.search` read the same rows; in a fixed order, LOOKUP's
    cost over `index.search` was about 0.2 ms with LOOKUP first and 0.1 ms with it
    second, peps, p50 3.4 to 3.9 ms)."""
    for query in queries:
        for run in arms.values():
            run(query)
    samples: dict[str, list[float]] = {name: [] for name in arms}
    round_p50: dict[str, list[float]] = {name: [] for name in arms}
    orders = list(itertools.permutations(arms))
    for turn in range(rounds):
        this: dict[str, list[float]] = {name: [] for name in arms}
        order = orders[turn % len(orders)]
        for query in queries:
            for name in order:
                run = arms[name]
                t0 = time.perf_counter()
                run(query)
                this[name].append(time.perf_counter() - t0)
        for name, got in this.items():
            samples[name] += got
            round_p50[name].append(statistics.median(got) * 1000)
    return {
        name: {**common.latency_summary_ms(samples[name]), "round_p50_ms": [round(v, 3) for v in round_p50[name]]}
        for name in arms
    }


def ratio(ours: float, bare: float) -> float:
    return round(ours / bare, 2) if bare > 0 else float("nan")


def verdict(value: float) -> str:
    return "PASS" if value <= TARGET else "MISS"


def busy_cores(fn: Callable[[], object]) -> tuple[object, float, float]:
    """Run `fn`; its result, wall seconds, and the cores the whole machine kept busy."""
    busy = common.system_busy_seconds()
    started = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - started
    return result, seconds, round((common.system_busy_seconds() - busy) / seconds, 2)


# --- the worlds -----------------------------------------------------------------------------


def current_documents(root: Path) -> list[Document]:
    store = FileStore(root)
    out: list[Document] = []
    for path in sorted(store.documents()):
        doc = store.read(path)
        if not doc.archived:
            out.append((path, dict(doc.metadata), doc.body))
    return out


def run_peps(work: Path, world: Path, rounds: int, build_rounds: int) -> tuple[dict[str, object], list[list[object]]]:
    root = work / "peps"
    env = common.bench_env(work / "home")
    print(f"loading {world} ...", file=sys.stderr, flush=True)
    _, first_load_s, first_busy = busy_cores(lambda: common.load_world(world, root, env))
    documents = current_documents(root)
    bare_path = work / "bare-peps.sqlite"
    builds: dict[str, list[float]] = {"bare": [], "rebuild": []}
    loads, load_busy = [first_load_s], [first_busy]
    rows = 0
    for turn in range(build_rounds):
        seconds, rows = bare_build(bare_path, documents)
        builds["bare"].append(seconds)
        if turn > 0:  # the first load (above) made the store the lookups below read
            _, seconds, busy = busy_cores(partial(common.load_world, world, work / f"load-{turn}", env))
            loads.append(seconds)
            load_busy.append(busy)
        index = SectionIndex.recreate(work / "rebuild.sqlite")
        try:
            started = time.perf_counter()
            with index.bulk():
                rebuild(index, FileStore(root))
            builds["rebuild"].append(time.perf_counter() - started)
        finally:
            index.close()
    bare_s = statistics.median(builds["bare"])
    rebuild_s = statistics.median(builds["rebuild"])
    load_s = statistics.median(loads)

    service = Service.open(root)
    index = service.index
    assert index is not None
    bare_db = sqlite3.connect(str(bare_path))

    def lookup(query: str) -> object:
        response = service.handle(Request(Verb.LOOKUP, SCOPE, {"query": query, "match": "body"}))
        assert response.status == "ok", response.body
        return response

    def search(query: str) -> object:
        return index.search(query, SCOPE, limit=DEFAULT_LIMIT)

    questions = [q["question"] for q in json.loads((world / "questions.json").read_text(encoding="utf-8"))]
    try:
        (latency, seconds, busy) = busy_cores(
            lambda: side_by_side({"bare": bare_lookup(bare_db), "lookup": lookup, "search": search}, QUERIES, rounds)
        )
        asked = side_by_side({"bare": bare_lookup(bare_db), "lookup": lookup}, questions, rounds)
    finally:
        bare_db.close()
        common.close_service(service)
    assert isinstance(latency, dict)
    bare_p50 = latency["bare"]["p50_ms"]
    results = {
        "documents": len(documents),
        "rows": rows,
        "build": {
            "bare_s": round(bare_s, 3),
            "rebuild_s": round(rebuild_s, 3),
            "rounds_s": {k: [round(v, 3) for v in vs] for k, vs in builds.items()},
            "ratio": ratio(rebuild_s, bare_s),
        },
        "world_load": {
            "seconds": round(load_s, 3),
            "rounds_s": [round(v, 3) for v in loads],
            "background_cores": load_busy,
            "ratio": ratio(load_s, bare_s),
        },
        "lookup": {
            **latency,
            "ratio_lookup": ratio(latency["lookup"]["p50_ms"], bare_p50),
            "ratio_search": ratio(latency["search"]["p50_ms"], bare_p50),
            "busy_cores": busy,
            "seconds": round(seconds, 1),
        },
        "questions": {
            **asked,
            "count": len(questions),
            "ratio_lookup": ratio(asked["lookup"]["p50_ms"], asked["bare"]["p50_ms"]),
        },
    }
    table = [
        ["peps", "index rebuild (s)", round(bare_s, 3), round(rebuild_s, 3), ratio(rebuild_s, bare_s)],
        ["peps", "world load (s)", round(bare_s, 3), round(load_s, 3), ratio(load_s, bare_s)],
        [
            "peps",
            "LOOKUP body p50 (ms)",
            bare_p50,
            latency["lookup"]["p50_ms"],
            ratio(latency["lookup"]["p50_ms"], bare_p50),
        ],
        [
            "peps",
            "index.search p50 (ms)",
            bare_p50,
            latency["search"]["p50_ms"],
            ratio(latency["search"]["p50_ms"], bare_p50),
        ],
        [
            "peps",
            "LOOKUP body, the world's questions, p50 (ms)",
            asked["bare"]["p50_ms"],
            asked["lookup"]["p50_ms"],
            ratio(asked["lookup"]["p50_ms"], asked["bare"]["p50_ms"]),
        ],
    ]
    return results, table


def run_generated(work: Path, docs: int, sections: int, rounds: int) -> tuple[dict[str, object], list[list[object]]]:
    vocab, world = generate_world(docs, sections)
    documents: list[Document] = [(d.path, d.metadata, d.body) for d in world]
    bare_path = work / "bare-gen.sqlite"
    bare_s, rows = bare_build(bare_path, documents)
    index = SectionIndex(work / "gen.sqlite")
    # LOOKUP's own path (request, visibility, the table) over the generated index; the
    # store stays empty, since a body LOOKUP reads only the index
    service = Service(FileStore(work / "gen-store"), index=index)

    def lookup(query: str) -> object:
        response = service.handle(Request(Verb.LOOKUP, "/", {"query": query, "match": "body"}))
        assert response.status == "ok", response.body
        return response

    try:
        build_s, index_rows = build_generated(index, world)
        assert index_rows == rows, (index_rows, rows)
        queries = latency_queries(vocab, world, 50)
        bare_db = sqlite3.connect(str(bare_path))
        try:
            latency, seconds, busy = busy_cores(
                lambda: side_by_side(
                    {
                        "bare": bare_lookup(bare_db),
                        "lookup": lookup,
                        "search": lambda q: index.search(q, "/", limit=DEFAULT_LIMIT),
                    },
                    queries,
                    rounds,
                )
            )
        finally:
            bare_db.close()
    finally:
        common.close_service(service)  # and its index
    assert isinstance(latency, dict)
    bare_p50 = latency["bare"]["p50_ms"]
    results = {
        "documents": docs,
        "rows": rows,
        "modified": MODIFIED.isoformat(),
        "build": {"bare_s": round(bare_s, 3), "index_s": round(build_s, 3), "ratio": ratio(build_s, bare_s)},
        "lookup": {
            **latency,
            "ratio_lookup": ratio(latency["lookup"]["p50_ms"], bare_p50),
            "ratio_search": ratio(latency["search"]["p50_ms"], bare_p50),
            "busy_cores": busy,
            "seconds": round(seconds, 1),
        },
        "queries": queries,
    }
    label = f"generated {rows}"
    table = [
        [label, "index build (s)", round(bare_s, 3), round(build_s, 3), ratio(build_s, bare_s)],
        [
            label,
            "LOOKUP body p50 (ms)",
            bare_p50,
            latency["lookup"]["p50_ms"],
            ratio(latency["lookup"]["p50_ms"], bare_p50),
        ],
        [
            label,
            "index.search p50 (ms)",
            bare_p50,
            latency["search"]["p50_ms"],
            ratio(latency["search"]["p50_ms"], bare_p50),
        ],
    ]
    return results, table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=Path, default=common.PEPS)
    parser.add_argument("--docs", type=int, default=10_000, help="generated documents (about 10 sections each)")
    parser.add_argument("--sections", type=int, default=10)
    parser.add_argument(
        "--rounds", type=int, default=12, help="lookup rounds over every query (a multiple of 6: every order of 3 arms)"
    )
    parser.add_argument("--build-rounds", type=int, default=3, help="peps builds (and world loads) per arm")
    parser.add_argument("--skip-peps", action="store_true")
    parser.add_argument("--skip-generated", action="store_true")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1,000 generated documents, 2 rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.docs, args.rounds, args.build_rounds = min(args.docs, 1_000), 2, 1
    work = Path(tempfile.mkdtemp(prefix="demarkus-bench-engine-"))
    results: dict[str, object] = {}
    table: list[list[object]] = []
    try:
        if not args.skip_peps:
            results["peps"], rows = run_peps(work, args.world, args.rounds, args.build_rounds)
            table += rows
        if not args.skip_generated:
            results["generated"], rows = run_generated(work, args.docs, args.sections, args.rounds)
            table += rows
    finally:
        shutil.rmtree(work, ignore_errors=True)
    common.print_table(
        f"Against a bare FTS5 table of the same rows, same run (target: ratio <= {TARGET})",
        ["world", "what", "bare", "demarkus", "ratio", "<= 2x"],
        [[*row, verdict(float(str(row[-1])))] for row in table],
    )
    common.write_results(
        NAME,
        {
            "world": common.shown(args.world),
            "docs": args.docs,
            "sections": args.sections,
            "rounds": args.rounds,
            "build_rounds": args.build_rounds,
            "limit": DEFAULT_LIMIT,
            "scope_peps": SCOPE,
            "bare_query": BARE_QUERY,
        },
        results,
        keep=not args.quick,
    )


if __name__ == "__main__":
    main()
