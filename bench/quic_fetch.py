"""FETCH over QUIC: demarkus against a bare aioquic echo server, one connection each.

Measures, with client and server in separate processes (one core each):

* a 2 KiB document fetched over ONE connection by 1, 16 and 64 concurrent streams
  (closed loop: each worker sends its next request when the previous answer arrived):
  requests/s, p50 and p99 latency, and CPU per request on each side;
* the same shape against `bench.echo_server` (same QuicConfiguration, certificate and
  ALPN, a fixed 2 KiB-body answer, no parsing or store), and our throughput as a ratio of
  the echo's (target >= 0.8, PASS/MISS per row);
* a diagnostic third row per concurrency: the bare client against the demarkus server,
  which splits the gap into server-side and client-side cost;
* a 1 MiB FETCH, sequential, MiB/s (demarkus and echo) and their ratio (target >= 0.9).

    .venv/bin/python -m bench.quic_fetch [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol

from demarkus.client import Client
from demarkus.protocol import Request, Verb, encode_request, encode_response
from demarkus.service import Service
from demarkus.tls import client_configuration, ensure_dev_certificate

from . import common

NAME = "quic_fetch"
SMALL_PATH, SMALL_SIZE = "/bench/2k.md", 2048
LARGE_PATH, LARGE_SIZE = "/bench/1m.md", 1024 * 1024
CONCURRENCY = (1, 16, 64)
TARGET_RATIO = 0.8
"""demarkus req/s over the echo's, 2 KiB FETCH, at every concurrency."""
LARGE_TARGET_RATIO = 0.9
"""demarkus MiB/s over the echo's, 1 MiB FETCH."""
PHASE_TIMEOUT = 60.0
ECHO_LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)")


def markdown_body(size: int, title: str) -> bytes:
    head = f"# {title}\n\n".encode()
    para = (
        b"Versioned markdown served over the Mark Protocol. Each paragraph of this bench "
        b"document is plain prose so that nothing in the body is special to the parser.\n\n"
    )
    return (head + para * (size // len(para) + 1))[: size - 1] + b"\n"


# --- one measured phase -----------------------------------------------------------------


@dataclass
class Phase:
    label: str
    concurrency: int
    requests: int
    seconds: float
    latencies: list[float]
    server_cpu: float
    client_cpu: float
    drops: int
    background: float
    """CPU cores busy with other processes during the phase (noise on a shared machine)."""

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def row(self) -> dict[str, float | int | str]:
        lat = common.latency_summary_ms(self.latencies)
        return {
            "target": self.label,
            "concurrency": self.concurrency,
            "requests": self.requests,
            "seconds": round(self.seconds, 4),
            "requests_per_s": round(self.rps, 1),
            **lat,
            "server_cpu_us_per_req": round(self.server_cpu / self.requests * 1e6, 1),
            "client_cpu_us_per_req": round(self.client_cpu / self.requests * 1e6, 1),
            "background_cores": round(self.background, 2),
        }


async def closed_loop(send: Callable[[], Awaitable[None]], concurrency: int, total: int) -> tuple[float, list[float]]:
    """`concurrency` workers share `total` requests; returns (wall seconds, latencies)."""
    latencies: list[float] = []
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            await send()
            latencies.append(time.perf_counter() - started)

    began = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), PHASE_TIMEOUT)
    return time.perf_counter() - began, latencies


async def measure(
    label: str, send: Callable[[], Awaitable[None]], concurrency: int, total: int, warmup: int, server_pid: int
) -> Phase:
    await closed_loop(send, concurrency, warmup)
    drops, busy = common.udp_receive_drops(), common.system_busy_seconds()
    cpu_server, cpu_client = common.process_cpu_seconds(server_pid), time.process_time()
    seconds, latencies = await closed_loop(send, concurrency, total)
    server_cpu = common.process_cpu_seconds(server_pid) - cpu_server
    client_cpu = time.process_time() - cpu_client
    others = common.system_busy_seconds() - busy - server_cpu - client_cpu
    return Phase(
        label,
        concurrency,
        total,
        seconds,
        latencies,
        server_cpu,
        client_cpu,
        common.udp_receive_drops() - drops,
        max(0.0, others) / seconds,
    )


# --- the two clients --------------------------------------------------------------------


@contextlib.asynccontextmanager
async def bare_connection(port: int, ca: Path) -> AsyncIterator[QuicConnectionProtocol]:
    config = client_configuration(ca=ca, server_name="localhost")
    async with connect("127.0.0.1", port, configuration=config) as protocol:
        yield protocol


def bare_sender(protocol: QuicConnectionProtocol, path: str, expect_at_least: int) -> Callable[[], Awaitable[None]]:
    """One stream per request with nothing but aioquic: write, FIN, read to EOF."""
    data = encode_request(Request(Verb.FETCH, path, {}))

    async def send() -> None:
        reader, writer = await protocol.create_stream()
        writer.write(data)
        writer.write_eof()
        answer = await reader.read()
        if len(answer) < expect_at_least or b"\nstatus: ok\n" not in answer[:4096]:
            raise RuntimeError(f"unexpected answer to {path}: {answer[:120]!r} ({len(answer)} bytes)")

    return send


def client_sender(client: Client, path: str, size: int) -> Callable[[], Awaitable[None]]:
    async def send() -> None:
        response = await client.fetch(path)
        if response.status != "ok" or len(response.body) != size:
            raise RuntimeError(f"FETCH {path}: {response.status} {response.text[:200]!r}")

    return send


# --- the run ----------------------------------------------------------------------------


def prepare_store(root: Path) -> int:
    """Publish the two documents in-process; return the wire size of the 2 KiB answer."""
    service = Service.open(root, trusted=True)
    try:
        for path, size in ((SMALL_PATH, SMALL_SIZE), (LARGE_PATH, LARGE_SIZE)):
            body = markdown_body(size, f"Bench document of {size} bytes")
            response = service.handle(Request(Verb.PUBLISH, path, {"tags": "bench"}, body))
            if response.status not in ("created", "ok"):
                raise RuntimeError(f"publishing {path}: {response.status} {response.text}")
        answer = service.handle(Request(Verb.FETCH, SMALL_PATH, {}))
        return len(encode_response(answer))
    finally:
        common.close_service(service)


def widen_receive_buffer(protocol: QuicConnectionProtocol, size: int) -> None:
    """Give the bench client's UDP socket a larger receive buffer (0 leaves the default).

    With the kernel default (208 KiB here) a burst of 64 answers overflows the client's
    socket, the kernel drops datagrams and QUIC loss recovery dominates the numbers. The
    same client-side setting applies to every target, so the comparison stays fair.
    """
    if size > 0:
        sock = protocol._transport.get_extra_info("socket")  # type: ignore[union-attr]
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)


async def run(
    args: argparse.Namespace, home: Path, demarkus_pid: int, url: str, echo_pid: int, echo_port: int
) -> dict[str, object]:
    cert = home / "tls" / "dev-cert.pem"
    demarkus_port = int(url.rsplit(":", 1)[1])
    small = {1: args.n1, 16: args.n16, 64: args.n64}
    rows: list[dict[str, object]] = []
    for concurrency in CONCURRENCY:
        total = small[concurrency]
        warmup = max(50, concurrency * 4)
        # Interleave the targets, round after round, so that background noise on a shared
        # 2-core machine spreads over all of them; report each target's best and median round.
        rounds: dict[str, list[Phase]] = {"demarkus": [], "echo": [], "bare->demarkus": []}
        for _ in range(args.rounds):
            common.wait_for_quiet(args.wait_quiet)
            async with bare_connection(echo_port, cert) as protocol:
                widen_receive_buffer(protocol, args.rcvbuf)
                rounds["echo"].append(
                    await measure(
                        "echo", bare_sender(protocol, SMALL_PATH, SMALL_SIZE), concurrency, total, warmup, echo_pid
                    )
                )
            common.wait_for_quiet(args.wait_quiet)
            async with Client(url, ca=cert, dial_host="127.0.0.1") as client:
                widen_receive_buffer(await client._connection(), args.rcvbuf)
                rounds["demarkus"].append(
                    await measure(
                        "demarkus",
                        client_sender(client, SMALL_PATH, SMALL_SIZE),
                        concurrency,
                        total,
                        warmup,
                        demarkus_pid,
                    )
                )
            common.wait_for_quiet(args.wait_quiet)
            async with bare_connection(demarkus_port, cert) as protocol:
                widen_receive_buffer(protocol, args.rcvbuf)
                rounds["bare->demarkus"].append(
                    await measure(
                        "bare->demarkus",
                        bare_sender(protocol, SMALL_PATH, SMALL_SIZE),
                        concurrency,
                        total,
                        warmup,
                        demarkus_pid,
                    )
                )
        for label in ("demarkus", "echo", "bare->demarkus"):
            phases = rounds[label]
            best = max(phases, key=lambda p: p.rps)
            row = best.row()
            row["median_requests_per_s"] = round(statistics.median(p.rps for p in phases), 1)
            row["rounds_requests_per_s"] = [round(p.rps, 1) for p in phases]
            row["udp_receive_drops"] = sum(p.drops for p in phases)
            rows.append(row)
        print(
            f"  {concurrency:>2} streams: demarkus {rows[-3]['requests_per_s']} req/s, "
            f"echo {rows[-2]['requests_per_s']} req/s (best of {args.rounds})",
            file=sys.stderr,
            flush=True,
        )

    common.wait_for_quiet(args.wait_quiet)
    async with Client(url, ca=cert, dial_host="127.0.0.1") as client, bare_connection(echo_port, cert) as protocol:
        widen_receive_buffer(await client._connection(), args.rcvbuf)
        widen_receive_buffer(protocol, args.rcvbuf)
        large = await large_fetches(
            {
                "demarkus": (client_sender(client, LARGE_PATH, LARGE_SIZE), demarkus_pid),
                "echo": (bare_sender(protocol, LARGE_PATH, LARGE_SIZE), echo_pid),
            },
            args.large,
        )
    return {"small": rows, "large": large}


async def large_fetches(
    targets: dict[str, tuple[Callable[[], Awaitable[None]], int]], count: int
) -> list[dict[str, object]]:
    """`count` sequential 1 MiB fetches per target on one connection each, alternating
    between the targets fetch by fetch so that drift on the machine hits both alike."""
    for send, _pid in targets.values():  # warm-up: congestion window and flow control
        await asyncio.wait_for(send(), PHASE_TIMEOUT)
    latencies: dict[str, list[float]] = {name: [] for name in targets}
    client_cpu = dict.fromkeys(targets, 0.0)
    server_cpu = {name: -common.process_cpu_seconds(pid) for name, (_send, pid) in targets.items()}
    busy = common.system_busy_seconds()
    began = time.perf_counter()
    for _ in range(count):
        for name, (send, _pid) in targets.items():
            cpu, started = time.process_time(), time.perf_counter()
            await asyncio.wait_for(send(), PHASE_TIMEOUT)
            latencies[name].append(time.perf_counter() - started)
            client_cpu[name] += time.process_time() - cpu
    wall = time.perf_counter() - began
    for name, (_send, pid) in targets.items():
        server_cpu[name] += common.process_cpu_seconds(pid)
    others = common.system_busy_seconds() - busy - sum(server_cpu.values()) - sum(client_cpu.values())
    rows: list[dict[str, object]] = []
    for name in targets:
        seconds = sum(latencies[name])
        rows.append(
            {
                "target": name,
                "fetches": count,
                "seconds": round(seconds, 3),
                "mib_per_s": round(count * LARGE_SIZE / 2**20 / seconds, 2),
                **common.latency_summary_ms(latencies[name]),
                "server_cpu_s": round(server_cpu[name], 3),
                "client_cpu_s": round(client_cpu[name], 3),
                "background_cores": round(max(0.0, others) / wall, 2),
            }
        )
    return rows


def report(results: dict[str, object]) -> tuple[list[dict[str, object]], dict[str, object]]:
    """Print the tables; returns the 2 KiB ratios (one per concurrency) and the 1 MiB one."""
    rows = results["small"]
    assert isinstance(rows, list)
    common.print_table(
        f"FETCH {SMALL_SIZE} B body over one connection (best round; median req/s of all rounds)",
        [
            "target",
            "streams",
            "req/s",
            "median req/s",
            "p50 ms",
            "p99 ms",
            "srv us/req",
            "cli us/req",
            "drops",
            "bg cores",
        ],
        [
            [
                r["target"],
                r["concurrency"],
                r["requests_per_s"],
                r["median_requests_per_s"],
                r["p50_ms"],
                r["p99_ms"],
                r["server_cpu_us_per_req"],
                r["client_cpu_us_per_req"],
                r["udp_receive_drops"],
                r["background_cores"],
            ]
            for r in rows
        ],
    )
    ratios: list[dict[str, object]] = []
    for concurrency in CONCURRENCY:
        ours = next(r for r in rows if r["target"] == "demarkus" and r["concurrency"] == concurrency)
        echo = next(r for r in rows if r["target"] == "echo" and r["concurrency"] == concurrency)
        ratio = float(ours["requests_per_s"]) / float(echo["requests_per_s"])
        median = float(ours["median_requests_per_s"]) / float(echo["median_requests_per_s"])
        ratios.append(
            {
                "concurrency": concurrency,
                "demarkus_rps": ours["requests_per_s"],
                "echo_rps": echo["requests_per_s"],
                "ratio": round(ratio, 3),
                "median_ratio": round(median, 3),
                "target": TARGET_RATIO,
                "verdict": common.fmt_ratio_verdict(ratio, TARGET_RATIO),
            }
        )
    common.print_table(
        f"demarkus / echo throughput, best round against best round (target >= {TARGET_RATIO})",
        ["streams", "demarkus req/s", "echo req/s", "ratio", "median ratio", "verdict"],
        [
            [r["concurrency"], r["demarkus_rps"], r["echo_rps"], r["ratio"], r["median_ratio"], r["verdict"]]
            for r in ratios
        ],
    )
    large = results["large"]
    assert isinstance(large, list)
    common.print_table(
        f"FETCH {LARGE_SIZE} B body, sequential on one connection per target (alternating)",
        ["target", "fetches", "MiB/s", "p50 ms", "max ms", "srv cpu s", "cli cpu s", "bg cores"],
        [
            [
                r["target"],
                r["fetches"],
                r["mib_per_s"],
                r["p50_ms"],
                r["max_ms"],
                r["server_cpu_s"],
                r["client_cpu_s"],
                r["background_cores"],
            ]
            for r in large
        ],
    )
    ours_large = next(r for r in large if r["target"] == "demarkus")
    echo_large = next(r for r in large if r["target"] == "echo")
    large_ratio = float(ours_large["mib_per_s"]) / float(echo_large["mib_per_s"])
    large_median = float(echo_large["p50_ms"]) / float(ours_large["p50_ms"])
    large_ratios: dict[str, object] = {
        "demarkus_mib_per_s": ours_large["mib_per_s"],
        "echo_mib_per_s": echo_large["mib_per_s"],
        "ratio": round(large_ratio, 3),
        "median_ratio": round(large_median, 3),
        "target": LARGE_TARGET_RATIO,
        "verdict": common.fmt_ratio_verdict(large_ratio, LARGE_TARGET_RATIO),
    }
    common.print_table(
        f"demarkus / echo MiB/s, 1 MiB FETCH (target >= {LARGE_TARGET_RATIO}; median ratio: echo p50 / demarkus p50)",
        ["demarkus MiB/s", "echo MiB/s", "ratio", "median ratio", "verdict"],
        [[large_ratios[key] for key in ("demarkus_mib_per_s", "echo_mib_per_s", "ratio", "median_ratio", "verdict")]],
    )
    worst = max([float(r["background_cores"]) for r in rows] + [float(r["background_cores"]) for r in large])
    if worst > 0.25:
        print(
            f"\nnote: other processes kept up to {worst:.2f} cores busy during a reported phase; "
            "on a 2-core machine that slows both ends, rerun on a quiet machine"
        )
    return ratios, large_ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run with few requests")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds per concurrency")
    parser.add_argument("--n1", type=int, default=800, help="requests per round at 1 stream")
    parser.add_argument("--n16", type=int, default=2400, help="requests per round at 16 streams")
    parser.add_argument("--n64", type=int, default=2400, help="requests per round at 64 streams")
    parser.add_argument(
        "--rcvbuf",
        type=int,
        default=4 << 20,
        help="SO_RCVBUF of the bench client's socket in bytes (0: kernel default)",
    )
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before each phase, wait up to this long for other processes to go idle "
        "(for shared machines; 0: do not wait)",
    )
    parser.add_argument("--large", type=int, default=10, help="sequential 1 MiB fetches")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.n1, args.n16, args.n64, args.large = 1, 100, 200, 300, 2

    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="demarkus-bench-fetch-"))
    try:
        home, root = tmp / "home", tmp / "store"
        root.mkdir(parents=True)
        cert, key = ensure_dev_certificate(home / "tls")
        response_bytes = prepare_store(root)
        env = common.bench_env(home)
        serve = [*common.DEMARKUS, "serve", "--root", str(root), "--host", "127.0.0.1", "--port", "0"]
        echo = [common.PYTHON, "-m", "bench.echo_server", "--cert", str(cert), "--key", str(key)]
        with (
            common.server_process(serve, env) as (server, found),
            common.server_process(echo, env, ECHO_LISTENING) as (echo_server, echo_found),
        ):
            url = found.group(1)
            results = asyncio.run(run(args, home, server.pid, url, echo_server.pid, int(echo_found.group(1))))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ratios, large_ratio = report(results)
    elapsed = time.perf_counter() - started
    print(f"\ntotal wall time {elapsed:.1f} s")
    parameters = {
        "small_body_bytes": SMALL_SIZE,
        "small_response_wire_bytes": response_bytes,
        "large_body_bytes": LARGE_SIZE,
        "concurrency": list(CONCURRENCY),
        "requests": {"1": args.n1, "16": args.n16, "64": args.n64},
        "rounds": args.rounds,
        "client_so_rcvbuf": args.rcvbuf,
        "wait_quiet_seconds": args.wait_quiet,
        "large_fetches": args.large,
        "target_ratio": TARGET_RATIO,
        "large_target_ratio": LARGE_TARGET_RATIO,
        "quick": args.quick,
        "notes": "closed loop over one QUIC connection; server and echo are separate processes; "
        "each row is the best of the rounds (median also recorded); CPU from /proc (server) and "
        "process_time (client); drops = UDP RcvbufErrors from /proc/net/snmp during the phases",
    }
    common.write_results(
        NAME,
        parameters,
        {**results, "ratios": ratios, "large_ratio": large_ratio, "wall_seconds": round(elapsed, 1)},
        keep=not args.quick,
    )


if __name__ == "__main__":
    main()
