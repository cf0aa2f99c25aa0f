"""What counting hidden rows costs a LOOKUP, in process, on the PEPs world.

A LOOKUP by a caller who may not read every document in scope also counts the documents
it left out (`hidden: N`), one pass over the catalog. Without read grants nothing is
counted. This bench loads ../shared/worlds/peps once and times the same catalog and body
queries under four token setups:

* no token file (nothing is private, nothing counted: the cost of every lookup before);
* a read grant on /peps/pep-0*.md (the PEPs below 1000 are private), anonymous;
* a read grant on /** (everything private), anonymous: no row, every document counted;
* a read grant on /**, with its token: every row, nothing hidden.

Each setup also reports the count alone (`Service._hidden_documents`).

    .venv/bin/python -m bench.hidden_rows [--world DIR] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from demarkus import auth
from demarkus.protocol import Request, Verb, normalize_scope
from demarkus.service import Service

from . import common

NAME = "hidden_rows"
SCOPE = "/"
QUERIES = (
    ("catalog", "packaging"),
    ("catalog", "status:final"),
    ("catalog", "*"),
    ("body", "release schedule"),
    ("body", "string formatting"),
    ("body", "asynchronous generators"),
)
"""Generic topic words and tags, not taken from questions.json."""
TOKEN = "bench-reader-capability"
SETUPS = (
    ("no token file", None, None),
    ("read /peps/pep-0*.md, anonymous", "/peps/pep-0*.md", None),
    ("read /**, anonymous", "/**", None),
    ("read /**, with token", "/**", TOKEN),
)


def run_setup(root: Path, tokens: Path | None, token: str | None, iterations: int) -> dict[str, object]:
    service = Service.open(root, tokens=tokens, writable=False)
    try:
        requests = [
            Request(Verb.LOOKUP, SCOPE, {"query": q, "match": m, **({"auth": token} if token else {})})
            for m, q in QUERIES
        ]
        hidden = {}
        for (match, query), request in zip(QUERIES, requests, strict=True):  # warm-up
            response = service.handle(request)
            if response.status != "ok":
                raise RuntimeError(f"LOOKUP {query!r}: {response.status} {response.text[:200]!r}")
            hidden[f"{match}:{query}"] = int(response.metadata.get("hidden", "0"))
        lookups: list[float] = []
        counts: list[float] = []
        scope = normalize_scope(SCOPE)
        for _ in range(iterations):
            for request in requests:
                t0 = time.perf_counter()
                service.handle(request)
                lookups.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                service._hidden_documents(scope, service._readable(token))
                counts.append(time.perf_counter() - t0)
        return {
            "hidden": hidden,
            "lookup": common.latency_summary_ms(lookups),
            "count_alone": common.latency_summary_ms(counts),
        }
    finally:
        common.close_service(service)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=Path, default=common.PEPS)
    parser.add_argument("--iterations", type=int, default=40, help="passes over the queries per setup")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.iterations = 4

    tmp = Path(tempfile.mkdtemp(prefix="demarkus-bench-hidden-"))
    results: dict[str, dict[str, object]] = {}
    try:
        home, root = tmp / "home", tmp / "store"
        print(f"loading {args.world} ...", file=sys.stderr, flush=True)
        load_seconds = common.load_world(args.world, root, common.bench_env(home))
        for label, pattern, token in SETUPS:
            tokens = None
            if pattern is not None:
                tokens = tmp / f"tokens-{len(results)}.toml"
                auth.add_grant(tokens, "reader", TOKEN, [pattern], ["read"])
            results[label] = run_setup(root, tokens, token, args.iterations)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rows = []
    for label, result in results.items():
        lookup, alone = result["lookup"], result["count_alone"]
        hidden = result["hidden"]
        assert isinstance(lookup, dict) and isinstance(alone, dict) and isinstance(hidden, dict)
        rows.append([label, max(hidden.values()), lookup["p50_ms"], lookup["p99_ms"], alone["p50_ms"], alone["p99_ms"]])
    common.print_table(
        f"LOOKUP scope={SCOPE} on {args.world.name}, {len(QUERIES)} queries (catalog and body), latency in ms",
        ["setup", "hidden", "lookup p50", "lookup p99", "count p50", "count p99"],
        rows,
    )
    common.write_results(
        NAME,
        {
            "world": common.shown(args.world),
            "queries": QUERIES,
            "iterations": args.iterations,
            "load_seconds": round(load_seconds, 1),
        },
        results,
        keep=not args.quick,
    )


if __name__ == "__main__":
    main()
