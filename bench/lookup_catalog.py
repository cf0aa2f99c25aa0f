"""LOOKUP in catalog mode on the PEPs world: in process (Service.handle) and over QUIC.

Loads ../shared/worlds/peps into a temporary store once (`demarkus world load`), then
runs a fixed list of generic queries (topic words, tags; nothing from the world's
questions) and reports p50/p99 latency per query and over all queries:

* in process: `Service.handle(Request(LOOKUP, "/", {query, match: catalog}))`, no sockets;
* over QUIC: a `demarkus serve` subprocess and one `Client` connection, sequential requests.

    .venv/bin/python -m bench.lookup_catalog [--world DIR] [--quick]
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
from demarkus.protocol import Request, Response, Verb
from demarkus.service import Service
from demarkus.tls import ensure_dev_certificate

from . import common

NAME = "lookup_catalog"
WORLD = common.PEPS
SCOPE = "/"
QUERIES = (
    "packaging",
    "typing",
    "release schedule",
    "status:final",
    "status:rejected",
    "status:draft",
    "type:informational",
    "topic:governance",
    "syntax",
    "import",
    "unicode",
    "asynchronous",
    "generators",
    "dictionary",
    "string formatting",
    "installation",
    "security",
    "deprecation",
    "performance",
    "*",
)
"""Generic topic words and tags chosen for this bench, not taken from questions.json."""


def lookup_request(query: str) -> Request:
    return Request(Verb.LOOKUP, SCOPE, {"query": query, "match": "catalog"})


def check(query: str, response: Response) -> int:
    if response.status != "ok":
        raise RuntimeError(f"LOOKUP {query!r}: {response.status} {response.text[:300]!r}")
    return int(response.metadata.get("matches", "0"))


def bench_in_process(
    root: Path, iterations: int
) -> tuple[float, dict[str, list[float]], dict[str, int], dict[str, int]]:
    started = time.perf_counter()
    service = Service.open(root)  # untrusted, no token store: public reads, as `serve` runs
    opened = time.perf_counter() - started
    latencies: dict[str, list[float]] = {q: [] for q in QUERIES}
    matches: dict[str, int] = {}
    sizes: dict[str, int] = {}
    requests = {q: lookup_request(q) for q in QUERIES}
    try:
        for query in QUERIES:  # one warm-up pass
            response = service.handle(requests[query])
            matches[query] = check(query, response)
            sizes[query] = len(response.body)
        for _ in range(iterations):  # round-robin over the queries, so drift hits them all alike
            for query in QUERIES:
                t0 = time.perf_counter()
                service.handle(requests[query])
                latencies[query].append(time.perf_counter() - t0)
    finally:
        common.close_service(service)
    return opened, latencies, matches, sizes


async def bench_quic(url: str, cert: Path, iterations: int) -> tuple[dict[str, list[float]], dict[str, int]]:
    latencies: dict[str, list[float]] = {q: [] for q in QUERIES}
    matches: dict[str, int] = {}
    async with Client(url, ca=cert, dial_host="127.0.0.1") as client:
        for query in QUERIES:  # warm-up: handshake and one pass
            matches[query] = check(query, await client.lookup(SCOPE, query, match="catalog"))
        for _ in range(iterations):
            for query in QUERIES:
                t0 = time.perf_counter()
                response = await client.lookup(SCOPE, query, match="catalog")
                latencies[query].append(time.perf_counter() - t0)
                if response.status != "ok":
                    raise RuntimeError(f"LOOKUP {query!r}: {response.status}")
    return latencies, matches


def _others(busy: float, own: float, server_cpu: float, started: float) -> float:
    """CPU cores used by processes other than the bench and its server since `started`."""
    used = common.system_busy_seconds() - busy - (time.process_time() - own) - server_cpu
    return round(max(0.0, used) / (time.perf_counter() - started), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=Path, default=WORLD)
    parser.add_argument("--iterations", type=int, default=100, help="in-process passes over the queries")
    parser.add_argument("--quic-iterations", type=int, default=40, help="QUIC passes over the queries")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before each phase, wait up to this long for other processes to go idle",
    )
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.quic_iterations = 10, 5

    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="demarkus-bench-lookup-"))
    try:
        home, root = tmp / "home", tmp / "store"
        cert, _key = ensure_dev_certificate(home / "tls")
        env = common.bench_env(home)
        print(f"loading {args.world} ...", file=sys.stderr, flush=True)
        load_seconds = common.load_world(args.world, root, env)
        common.wait_for_quiet(args.wait_quiet)
        busy, own, t0 = common.system_busy_seconds(), time.process_time(), time.perf_counter()
        opened, local, matches, sizes = bench_in_process(root, args.iterations)
        background = {"in_process": _others(busy, own, 0.0, t0)}
        serve = [*common.DEMARKUS, "serve", "--root", str(root), "--host", "127.0.0.1", "--port", "0"]
        t0 = time.perf_counter()
        with common.server_process(serve, env) as (server, found):
            ready = time.perf_counter() - t0
            common.wait_for_quiet(args.wait_quiet)
            busy, own, t0 = common.system_busy_seconds(), time.process_time(), time.perf_counter()
            server_cpu = common.process_cpu_seconds(server.pid)
            remote, remote_matches = asyncio.run(bench_quic(found.group(1), cert, args.quic_iterations))
            server_cpu = common.process_cpu_seconds(server.pid) - server_cpu
            background["quic"] = _others(busy, own, server_cpu, t0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    if remote_matches != matches:
        raise RuntimeError(f"QUIC and in-process answers differ: {remote_matches} != {matches}")

    rows = []
    for query in QUERIES:
        lo, re_ = common.latency_summary_ms(local[query]), common.latency_summary_ms(remote[query])
        rows.append(
            {
                "query": query,
                "matches": matches[query],
                "body_bytes": sizes[query],
                "in_process": lo,
                "quic": re_,
            }
        )
    all_local = [v for q in QUERIES for v in local[q]]
    all_remote = [v for q in QUERIES for v in remote[q]]
    overall = {
        "in_process": common.latency_summary_ms(all_local),
        "quic": common.latency_summary_ms(all_remote),
    }
    common.print_table(
        f"LOOKUP match=catalog scope={SCOPE} on {args.world.name} (latency in ms)",
        ["query", "rows", "local p50", "local p99", "quic p50", "quic p99"],
        [
            [
                r["query"],
                r["matches"],
                r["in_process"]["p50_ms"],
                r["in_process"]["p99_ms"],
                r["quic"]["p50_ms"],
                r["quic"]["p99_ms"],
            ]
            for r in rows
        ]
        + [
            [
                "(all queries)",
                "",
                overall["in_process"]["p50_ms"],
                overall["in_process"]["p99_ms"],
                overall["quic"]["p50_ms"],
                overall["quic"]["p99_ms"],
            ]
        ],
    )
    common.print_table(
        "set-up",
        ["step", "value"],
        [
            ["world load (CLI), s", round(load_seconds, 2)],
            ["Service.open (catalog build), s", round(opened, 3)],
            ["serve: start to listening, s", round(ready, 2)],
            ["background cores, in-process phase", background["in_process"]],
            ["background cores, QUIC phase", background["quic"]],
        ],
    )
    elapsed = time.perf_counter() - started
    print(f"\ntotal wall time {elapsed:.1f} s")
    common.write_results(
        NAME,
        {
            "world": common.shown(args.world),
            "scope": SCOPE,
            "match": "catalog",
            "queries": list(QUERIES),
            "in_process_iterations": args.iterations,
            "quic_iterations": args.quic_iterations,
            "quick": args.quick,
            "wait_quiet_seconds": args.wait_quiet,
            "notes": "sequential requests; in process = Service.handle on an untrusted Service (public "
            "reads, like `serve` without tokens); QUIC = demarkus Client to a serve subprocess",
        },
        {
            "queries": rows,
            "overall": overall,
            "world_load_seconds": round(load_seconds, 2),
            "service_open_seconds": round(opened, 3),
            "server_ready_seconds": round(ready, 2),
            "background_cores": background,
            "wall_seconds": round(elapsed, 1),
        },
        keep=not args.quick,
    )


if __name__ == "__main__":
    main()
