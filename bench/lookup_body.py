"""Body-match LOOKUP on the PEPs world, in process and over QUIC; and a budgeted
`mark_lookup` end to end (MCP tools over a QUIC authority).

Queries are generic phrases chosen for this bench (nothing from questions.json).

    .venv/bin/python -m bench.lookup_body [--iterations 30] [--quic-iterations 10]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

from demarkus.client import Client
from demarkus.graph import GraphStore
from demarkus.mcp.server import LocalResolver
from demarkus.mcp.tools import Tools
from demarkus.protocol import Request, Verb
from demarkus.service import Service
from demarkus.tls import ensure_dev_certificate

from . import common
from .common import load_world
from .lookup_catalog import WORLD

NAME = "lookup_body"
SCOPE = "/peps"
QUERIES = (
    "how are wheels tagged for linux platforms",
    "deprecation policy for standard library modules",
    "asynchronous generators and await",
    "string formatting with f-strings",
    "release manager responsibilities",
    "dictionary ordering guarantee",
    "type hints for callables",
    "packaging metadata fields",
    "garbage collection of reference cycles",
    "unicode identifiers normalization",
    "exception chaining syntax",
    "virtual environments site packages",
)


def in_process(root: Path, iterations: int) -> list[float]:
    service = Service.open(root)
    requests = [Request(Verb.LOOKUP, SCOPE, {"query": q, "match": "body"}) for q in QUERIES]
    for request in requests:
        assert service.handle(request).status == "ok"
    samples = []
    for _ in range(iterations):
        for request in requests:
            t0 = time.perf_counter()
            service.handle(request)
            samples.append(time.perf_counter() - t0)
    return samples


async def over_quic(url: str, cert: Path, iterations: int, budget: int) -> tuple[list[float], list[float], list[int]]:
    lookups: list[float] = []
    budgeted: list[float] = []
    sizes: list[int] = []
    async with Client(url, ca=cert, dial_host="127.0.0.1") as client:
        tools = Tools(LocalResolver(client, client.authority, GraphStore(None), scope=SCOPE))
        for query in QUERIES:
            assert (await client.lookup(SCOPE, query, match="body")).status == "ok"
        for _ in range(iterations):
            for query in QUERIES:
                t0 = time.perf_counter()
                await client.lookup(SCOPE, query, match="body")
                lookups.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                text = await tools.lookup(query, SCOPE, None, 3, "body", budget, False)
                budgeted.append(time.perf_counter() - t0)
                sizes.append(len(text.encode()))
    return lookups, budgeted, sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=Path, default=WORLD)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--quic-iterations", type=int, default=10)
    parser.add_argument("--budget", type=int, default=1500)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="demarkus-bench-body-"))
    try:
        home, root = tmp / "home", tmp / "store"
        cert, _ = ensure_dev_certificate(home / "tls")
        env = common.bench_env(home)
        print(f"loading {args.world} ...", file=sys.stderr, flush=True)
        load_world(args.world, root, env)
        local = in_process(root, args.iterations)
        serve = [*common.DEMARKUS, "serve", "--root", str(root), "--host", "127.0.0.1", "--port", "0"]
        with common.server_process(serve, env) as (_server, found):
            remote, budgeted, sizes = asyncio.run(over_quic(found.group(1), cert, args.quic_iterations, args.budget))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results = {
        "lookup_body_in_process": common.latency_summary_ms(local),
        "lookup_body_quic": common.latency_summary_ms(remote),
        "mark_lookup_budget_quic": common.latency_summary_ms(budgeted),
        "mark_lookup_budget_bytes_mean": round(sum(sizes) / len(sizes)),
    }
    common.print_table(
        f"LOOKUP match=body on {args.world.name}, scope {SCOPE} (ms)",
        ["path", "n", "p50", "p99"],
        [[k, v["n"], v["p50_ms"], v["p99_ms"]] for k, v in results.items() if isinstance(v, dict)],
    )
    common.write_results(
        NAME,
        {
            "world": common.shown(args.world),
            "scope": SCOPE,
            "queries": list(QUERIES),
            "budget": args.budget,
            "limit_budgeted": 3,
        },
        results,
    )


if __name__ == "__main__":
    main()
