"""A budgeted `mark_lookup` against the same lookup without a budget, in process, on the
PEPs world: what evidence selection adds once the documents' parses are cached.

Three arms, side by side in one run, each over the same generic queries (those of
`bench.lookup_body`; nothing from questions.json):

- **plain**: `mark_lookup` with no budget (the table only);
- **budget, cold**: with a budget, the process's parse cache emptied and a new caller
  before each query (every document fetched and parsed);
- **budget, warm**: with a budget, the second pass of one caller (parses cached, bodies
  held: a row's document is used as held when the lookup names its etag, a related one is
  asked for with `if-none-match`).

The target is warm <= 1.5 x plain (p50). The texts of the cold and warm arms must be
identical: caching changes no byte of what is selected.

    .venv/bin/python -m bench.lookup_budget [--iterations 5] [--budget 1500] [--limit 3]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from demarkus.expand.parsecache import PARSES
from demarkus.graph import GraphStore
from demarkus.mcp.server import LocalResolver
from demarkus.mcp.tools import Tools
from demarkus.service import Service

from . import common
from .lookup_body import QUERIES, SCOPE
from .lookup_catalog import WORLD

NAME = "lookup_budget"
TARGET = 1.5


async def measure(root: Path, authority: str, iterations: int, budget: int, limit: int) -> dict[str, object]:
    service = Service.open(root)

    def caller() -> Tools:
        return Tools(LocalResolver(service, authority, GraphStore(None), scope=SCOPE))

    async def one(tools: Tools, query: str, with_budget: int) -> tuple[float, str]:
        t0 = time.perf_counter()
        text = await tools.lookup(query, SCOPE, None, limit, "body", with_budget, False)
        return time.perf_counter() - t0, text

    samples: dict[str, list[float]] = {"plain": [], "budget, cold": [], "budget, warm": []}
    digests = {"budget, cold": hashlib.sha256(), "budget, warm": hashlib.sha256()}
    warm = caller()
    for query in QUERIES:  # the warm caller's first pass
        await one(warm, query, budget)
    plain = caller()
    for _ in range(iterations):
        for query in QUERIES:
            samples["plain"].append((await one(plain, query, 0))[0])
            PARSES.clear()
            seconds, text = await one(caller(), query, budget)
            samples["budget, cold"].append(seconds)
            digests["budget, cold"].update(text.encode())
            seconds, text = await one(warm, query, budget)
            samples["budget, warm"].append(seconds)
            digests["budget, warm"].update(text.encode())
    common.close_service(service)
    return {
        "latency": {arm: common.latency_summary_ms(values) for arm, values in samples.items()},
        "identical_texts": digests["budget, cold"].digest() == digests["budget, warm"].digest(),
        "warm_fetches": {
            "bodies": warm.held.bodies,
            "not_modified": warm.held.unchanged,
            "not_asked": warm.held.current,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=Path, default=WORLD)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--limit", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="demarkus-bench-budget-"))
    try:
        root = tmp / "store"
        print(f"loading {args.world} ...", file=sys.stderr, flush=True)
        common.load_world(args.world, root, common.bench_env(tmp / "home"))
        authority = json.loads((args.world / "manifest.json").read_text(encoding="utf-8"))["authority"]
        results = asyncio.run(measure(root, authority, args.iterations, args.budget, args.limit))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    latency = results["latency"]
    assert isinstance(latency, dict)
    plain = latency["plain"]["p50_ms"]
    ratios = {arm: round(v["p50_ms"] / plain, 2) for arm, v in latency.items()}
    results["ratio_p50_to_plain"] = ratios
    results["target_warm_to_plain"] = TARGET
    common.print_table(
        f"mark_lookup on {args.world.name}, scope {SCOPE}, limit {args.limit}, budget {args.budget} (ms)",
        ["arm", "n", "p50", "p99", "p50 / plain"],
        [[arm, v["n"], v["p50_ms"], v["p99_ms"], ratios[arm]] for arm, v in latency.items()],
    )
    verdict = "met" if ratios["budget, warm"] <= TARGET else "MISSED"
    print(f"\nwarm / plain {ratios['budget, warm']} (target <= {TARGET}: {verdict}); ", end="")
    print(f"cold and warm texts identical: {results['identical_texts']}; warm fetches: {results['warm_fetches']}")
    common.write_results(
        NAME,
        {"world": common.shown(args.world), "scope": SCOPE, "queries": list(QUERIES), "budget": args.budget},
        results,
    )


if __name__ == "__main__":
    main()
