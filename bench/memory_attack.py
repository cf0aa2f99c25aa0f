"""Server memory and another client's latency under two attacks, the server before the
bounds on incoming requests (commit afb62fe) against the current tree, in one run.

Per tree, one `demarkus serve` subprocess over the PEPs world, three phases in order:

* quiet: a victim client's body-match LOOKUPs (no budget) with nothing else going on;
* flood: an attacker subprocess sends `PUBLISH /flood.md` followed by far more than
  MAX_REQUEST bytes (opening a new stream each time the server stops one) until it has put
  `--flood-mib` MiB on the wire, while the victim's lookups are timed;
* lookup attack: an attacker subprocess runs four concurrent body-match LOOKUPs over a list
  of large queries (about 3.5 KiB of distinct words each) and of queries of exactly
  MAX_QUERY_TERMS distinct rare-ish words, while the victim's lookups are timed.

The server's VmRSS is sampled from /proc every 20 ms; a server past `--rss-cap-mib` is
killed and reported as such. Everything is reported as ratios against the quiet phase of
the same process, with the absolute numbers beside them.

    .venv/bin/python -m bench.memory_attack [--flood-mib 256] [--lookups 50] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import common
from .lookup_body import QUERIES
from .lookup_catalog import WORLD

NAME = "memory_attack"
OLD_COMMIT = "afb62fe"
SCOPE = "/"
MIB = 1024 * 1024
SAMPLE_EVERY = 0.02
"""Seconds between two RSS samples of the server."""
LARGE_QUERY_BYTES = 3584
"""About 3.5 KiB of distinct words: the size that took the old server to 2.1 GiB."""
TERMS = 64
"""Distinct words in the queries the service accepts (protocol.MAX_QUERY_TERMS)."""
FLOOD_CHUNK = MIB
FLOOD_AHEAD = 4 * MIB
"""Bytes the flooding client keeps queued in its QUIC sender: enough to keep the path full,
little enough that the client's own memory stays small."""
DONE = re.compile(r"^\{\"attacker\"")


# --- the server under watch -------------------------------------------------------------


class Watch(threading.Thread):
    """Samples a process's VmRSS; kills it once it passes `cap` bytes."""

    def __init__(self, proc: asyncio.subprocess.Process, cap: int) -> None:
        super().__init__(daemon=True)
        self.proc, self.cap = proc, cap
        self.peak = 0
        self.killed = False
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            rss = self.rss()
            if rss is None:
                return
            self.peak = max(self.peak, rss)
            if rss > self.cap and not self.killed:
                self.killed = True
                self.proc.kill()

    def status(self, key: str) -> int | None:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError):
            pass
        return None

    def rss(self) -> int | None:
        return self.status("VmRSS")

    def mark(self) -> int:
        """Start a phase: the peak restarts from the current RSS, which is returned."""
        now = self.rss() or 0
        self.peak = now
        return now

    def stop(self) -> None:
        self._stop.set()


@dataclass
class Phase:
    name: str
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    rss_start: int = 0
    rss_peak: int = 0
    rss_after: int = 0
    seconds: float = 0.0
    attacker: dict[str, Any] = field(default_factory=dict)
    killed: bool = False


async def start_server(store: Path, env: dict[str, str]) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        *common.DEMARKUS,
        "serve",
        "--root",
        str(store),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        cwd=common.REPO,
    )
    assert proc.stdout is not None
    async with asyncio.timeout(common.STARTUP_TIMEOUT):
        while line := (await proc.stdout.readline()).decode():
            found = common.LISTENING.search(line)
            if found:
                return proc, found.group(1)
    raise RuntimeError("the server printed no `listening on` line")


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
        try:
            async with asyncio.timeout(common.STOP_TIMEOUT):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()


# --- the victim -------------------------------------------------------------------------


async def victim(
    client: Any, phase: Phase, *, count: int, until: asyncio.Future[Any] | None, watch: Watch, limit: float
) -> None:
    """Time lookups: `count` of them, or while `until` is pending (at least `count`)."""
    from demarkus.errors import TransportError

    started = time.perf_counter()
    i = 0
    while time.perf_counter() - started < limit and not watch.killed:
        if i >= count and (until is None or until.done()):
            break
        query = QUERIES[i % len(QUERIES)]
        i += 1
        t0 = time.perf_counter()
        try:
            response = await client.lookup(SCOPE, query, match="body")
        except TransportError:
            phase.errors += 1
            continue
        if response.status != "ok":
            phase.errors += 1
        phase.latencies.append(time.perf_counter() - t0)


async def attack(
    mode: str,
    url: str,
    cert: Path,
    env: dict[str, str],
    extra: Sequence[str],
    client: Any,
    phase: Phase,
    watch: Watch,
    lookups: int,
    limit: float,
) -> None:
    """Run an attacker subprocess while the victim is timed; the attacker holds its
    connection until the RSS after the phase is read."""
    proc = await asyncio.create_subprocess_exec(
        common.PYTHON,
        "-m",
        "bench.memory_attack",
        "--attacker",
        mode,
        "--url",
        url,
        "--cert",
        str(cert),
        *extra,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        cwd=common.REPO,
    )

    async def report() -> dict[str, Any]:
        assert proc.stdout is not None
        while line := (await proc.stdout.readline()).decode():
            if DONE.match(line):
                return dict(json.loads(line))
        return {"attacker": mode, "exited": proc.returncode}

    phase.rss_start = watch.mark()
    started = time.perf_counter()
    done = asyncio.ensure_future(report())
    try:
        await victim(client, phase, count=lookups, until=done, watch=watch, limit=limit)
        remaining = max(0.0, limit - (time.perf_counter() - started))
        finished, _ = await asyncio.wait([done], timeout=remaining)
        phase.seconds = time.perf_counter() - started
        phase.attacker = done.result() if finished else {"attacker": mode, "unfinished_after_s": limit}
        phase.rss_peak, phase.rss_after = watch.peak, watch.rss() or 0
        phase.killed = watch.killed
    finally:
        done.cancel()
        if proc.stdin is not None:
            proc.stdin.close()
        await stop(proc)


async def measure(
    store: Path, env: dict[str, str], cert: Path, queries_file: Path, args: argparse.Namespace
) -> dict[str, Any]:
    from demarkus.client import Client

    proc, url = await start_server(store, env)
    watch = Watch(proc, args.rss_cap_mib * MIB)
    watch.start()
    phases: list[Phase] = []
    attacker_env = common.bench_env(Path(env["DEMARKUS_HOME"]))
    try:
        async with Client(url, ca=cert, dial_host="127.0.0.1", answer_timeout=args.phase_limit) as client:
            for query in QUERIES:  # warm: the index pages the victim reads are in memory
                await client.lookup(SCOPE, query, match="body")
            quiet = Phase("quiet")
            quiet.rss_start = watch.mark()
            started = time.perf_counter()
            await victim(client, quiet, count=args.lookups, until=None, watch=watch, limit=args.phase_limit)
            quiet.seconds = time.perf_counter() - started
            quiet.rss_peak, quiet.rss_after = watch.peak, watch.rss() or 0
            phases.append(quiet)
            for name, mode, extra in (
                ("flood", "flood", ["--flood-mib", str(args.flood_mib)]),
                ("lookup attack", "lookups", ["--queries", str(queries_file)]),
            ):
                if watch.killed:
                    break
                phase = Phase(name)
                phases.append(phase)
                await attack(
                    mode, url, cert, attacker_env, extra, client, phase, watch, args.attack_lookups, args.phase_limit
                )
    finally:
        hwm = watch.status("VmHWM")
        watch.stop()
        await stop(proc)
    return {
        "phases": [summarise(p, phases[0]) for p in phases],
        "vm_hwm_mib": _mib(hwm or 0),
        "killed_at_cap": watch.killed,
    }


def summarise(phase: Phase, quiet: Phase) -> dict[str, Any]:
    lat = common.latency_summary_ms(phase.latencies)
    base = common.latency_summary_ms(quiet.latencies)
    return {
        "phase": phase.name,
        "lookups": lat,
        "lookup_errors": phase.errors,
        "p50_ratio": _ratio(lat["p50_ms"], base["p50_ms"]),
        "p99_ratio": _ratio(lat["p99_ms"], base["p99_ms"]),
        "rss_start_mib": _mib(phase.rss_start),
        "rss_peak_mib": _mib(phase.rss_peak),
        "rss_after_mib": _mib(phase.rss_after),
        "rss_growth_mib": _mib(phase.rss_peak - phase.rss_start),
        "rss_peak_ratio": _ratio(phase.rss_peak, quiet.rss_after),
        "seconds": round(phase.seconds, 2),
        "attacker": phase.attacker,
        "killed": phase.killed,
    }


def _mib(size: int) -> float:
    return round(size / MIB, 1)


def _ratio(value: float, base: float) -> float:
    return round(value / base, 2) if base else float("nan")


# --- the attackers (subprocesses) -------------------------------------------------------


async def flood(url: str, cert: Path, total: int) -> dict[str, Any]:
    """Send a refused PUBLISH and keep sending; when the server stops the stream, open the
    next one, until `total` bytes went out."""
    from aioquic.asyncio import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.quic import events

    from demarkus.protocol import parse_mark_url, parse_response
    from demarkus.tls import client_configuration

    class Flooder(QuicConnectionProtocol):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            self.progress = asyncio.Event()
            self.stopped: set[int] = set()
            self.chunks: dict[int, list[bytes]] = collections.defaultdict(list)
            self.statuses: collections.Counter[str] = collections.Counter()

        def datagram_received(self, data: bytes | str, addr: Any) -> None:
            super().datagram_received(data, addr)
            self.progress.set()

        def quic_event_received(self, event: events.QuicEvent) -> None:
            if isinstance(event, events.StopSendingReceived):
                self.stopped.add(event.stream_id)
            elif isinstance(event, events.StreamDataReceived):
                self.chunks[event.stream_id].append(event.data)
                if event.end_stream:
                    raw = b"".join(self.chunks.pop(event.stream_id))
                    self.statuses[parse_response(raw).status] += 1

    target = parse_mark_url(url)
    config = client_configuration(ca=cert, server_name=target.host)
    chunk = b"x" * FLOOD_CHUNK
    sent = streams = stopped = connections = 0
    statuses: collections.Counter[str] = collections.Counter()
    started = time.perf_counter()
    closing: list[asyncio.Task[Any]] = []
    while sent < total:  # a server that closes the connection gets a new one at once: the attacker persists
        connections += 1
        stack = contextlib.AsyncExitStack()
        flooder: Any = await stack.enter_async_context(
            connect("127.0.0.1", target.port, configuration=config, create_protocol=Flooder)
        )
        while sent < total and flooder._quic._close_event is None:
            stream_id = flooder._quic.get_next_available_stream_id()
            streams += 1
            flooder._quic.send_stream_data(stream_id, b"PUBLISH /flood.md\n")
            offered = 0
            stream = flooder._quic._streams[stream_id]
            while (
                stream_id not in flooder.stopped
                and flooder._quic._close_event is None
                and sent + stream.sender.highest_offset < total
            ):
                if offered < total - sent and len(stream.sender._buffer) < FLOOD_AHEAD:
                    flooder._quic.send_stream_data(stream_id, chunk)
                    offered += len(chunk)
                    flooder.transmit()
                    continue
                flooder.progress.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(flooder.progress.wait(), 30)
            sent += stream.sender.highest_offset
        stopped += len(flooder.stopped)
        statuses.update(flooder.statuses)
        if sent < total:
            closing.append(asyncio.ensure_future(stack.aclose()))  # no waiting out the closing period
        else:
            held = stack
    await asyncio.gather(*closing, return_exceptions=True)
    report = {
        "attacker": "flood",
        "bytes_sent_mib": _mib(sent),
        "streams": streams,
        "stopped_by_server": stopped,
        "connections": connections,
        "answers": dict(statuses),
        "seconds": round(time.perf_counter() - started, 2),
    }
    print(json.dumps(report), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # hold on
    await held.aclose()
    return report


async def lookup_attack(url: str, cert: Path, queries: list[str]) -> dict[str, Any]:
    """Four concurrent body-match LOOKUPs over `queries`, one pass."""
    from demarkus.client import Client
    from demarkus.errors import TransportError

    statuses: collections.Counter[str] = collections.Counter()
    pending = list(reversed(queries))
    started = time.perf_counter()
    async with Client(url, ca=cert, dial_host="127.0.0.1", answer_timeout=3600, retries=1) as client:

        async def worker() -> None:
            while pending:
                query = pending.pop()
                try:
                    statuses[(await client.lookup(SCOPE, query, match="body")).status] += 1
                except TransportError:
                    statuses["transport-error"] += 1

        await asyncio.gather(*(worker() for _ in range(4)))
        report = {
            "attacker": "lookups",
            "queries": len(queries),
            "answers": dict(statuses),
            "seconds": round(time.perf_counter() - started, 2),
        }
        print(json.dumps(report), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    return report


def attack_queries(world: Path, large: int, exact: int, seed: int = 7) -> dict[str, list[str]]:
    """Large queries (about 3.5 KiB of distinct words each) and queries of exactly TERMS
    distinct words, drawn from words found in 3 to 20 documents of the world: rare enough
    to be distinct, common enough that each still matches sections."""
    found: collections.Counter[str] = collections.Counter()
    with (world / "corpus.jsonl").open() as lines:
        for line in lines:
            text = json.loads(line)["versions"][-1].lower()
            found.update(set(re.findall(r"\b[a-z]{4,14}\b", text)))
    pool = sorted(w for w, n in found.items() if 3 <= n <= 20)
    rng = random.Random(seed)

    def big() -> str:
        words = rng.sample(pool, len(pool))
        out: list[str] = []
        size = 0
        for word in words:
            if size + len(word) + 1 > LARGE_QUERY_BYTES:
                break
            out.append(word)
            size += len(word) + 1
        return " ".join(out)

    return {"large": [big() for _ in range(large)], "exact": [" ".join(rng.sample(pool, TERMS)) for _ in range(exact)]}


def attacker_main(args: argparse.Namespace) -> None:
    if args.attacker == "flood":
        asyncio.run(flood(args.url, Path(args.cert), args.flood_mib * MIB))
    else:
        data = json.loads(Path(args.queries).read_text())
        queries = [q for pair in zip(data["large"], data["exact"], strict=True) for q in pair]
        asyncio.run(lookup_attack(args.url, Path(args.cert), queries))


# --- the run ----------------------------------------------------------------------------


def index_state() -> str:
    """Whether the index code measured differs from the commit (another change may land
    in the same tree)."""
    done = subprocess.run(
        ["git", "diff", "--stat", "--", "src/demarkus/index/"],
        cwd=common.REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "unchanged"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=Path, default=WORLD)
    parser.add_argument("--flood-mib", type=int, default=256)
    parser.add_argument("--lookups", type=int, default=50, help="victim lookups in the quiet phase")
    parser.add_argument(
        "--attack-lookups",
        type=int,
        default=20,
        help="least victim lookups in an attack phase (it goes on while the attack does)",
    )
    parser.add_argument("--large-queries", type=int, default=60)
    parser.add_argument("--exact-queries", type=int, default=60)
    parser.add_argument("--rss-cap-mib", type=int, default=3072)
    parser.add_argument("--phase-limit", type=float, default=300.0, help="seconds an attack phase may take")
    parser.add_argument("--old", default=OLD_COMMIT, help="the commit to compare with")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--attacker", choices=["flood", "lookups"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--cert", help=argparse.SUPPRESS)
    parser.add_argument("--queries", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attacker:
        attacker_main(args)
        return
    if args.quick:
        args.flood_mib, args.lookups, args.attack_lookups = 32, 10, 5
        args.large_queries = args.exact_queries = 8
        args.phase_limit = 60.0
    tmp = Path(tempfile.mkdtemp(prefix="demarkus-bench-attack-"))
    old_tree = tmp / "old"
    trees = {f"before ({args.old})": old_tree, "current tree": common.REPO}
    results: dict[str, Any] = {}
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(old_tree), args.old],
        cwd=common.REPO,
        check=True,
        capture_output=True,
    )
    try:
        home = tmp / "home"
        from demarkus.tls import ensure_dev_certificate

        cert, _ = ensure_dev_certificate(home / "tls")
        queries_file = tmp / "queries.json"
        queries_file.write_text(json.dumps(attack_queries(args.world, args.large_queries, args.exact_queries)))
        for label, tree in trees.items():
            env = common.bench_env(home)
            env["PYTHONPATH"] = str(tree / "src")
            store = tmp / f"store-{len(results)}"
            print(f"{label}: loading {args.world} ...", file=sys.stderr, flush=True)
            common.load_world(args.world, store, env)
            print(f"{label}: attacking ...", file=sys.stderr, flush=True)
            results[label] = asyncio.run(measure(store, env, cert, queries_file, args))
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(old_tree)], cwd=common.REPO, check=False, capture_output=True
        )
        subprocess.run(["git", "worktree", "prune"], cwd=common.REPO, check=False, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    rows = []
    for label, run in results.items():
        for p in run["phases"]:
            note = "killed at the RSS cap" if p["killed"] else _note(p["attacker"])
            rows.append(
                [
                    label,
                    p["phase"],
                    p["lookups"]["n"],
                    p["lookups"]["p50_ms"],
                    p["lookups"]["p99_ms"],
                    p["p50_ratio"],
                    p["p99_ratio"],
                    p["rss_peak_mib"],
                    p["rss_peak_ratio"],
                    p["rss_after_mib"],
                    note,
                ]
            )
    common.print_table(
        f"Victim LOOKUP match=body latency (ms) and server RSS (MiB) under attack; ratios against the quiet "
        f"phase of the same server (index code: {index_state()})",
        ["server", "phase", "n", "p50", "p99", "p50 x", "p99 x", "RSS peak", "RSS x", "RSS after", "attacker"],
        rows,
    )
    parameters = {
        key: getattr(args, key)
        for key in (
            "flood_mib",
            "lookups",
            "attack_lookups",
            "large_queries",
            "exact_queries",
            "rss_cap_mib",
            "phase_limit",
            "old",
        )
    }
    parameters.update(
        {
            "world": args.world.name,
            "scope": SCOPE,
            "victim_queries": list(QUERIES),
            "index_state": index_state(),
            "cpu_count": os.cpu_count(),
        }
    )
    common.write_results(NAME, parameters, results, keep=not args.quick)


def _note(report: dict[str, Any]) -> str:
    if not report:
        return ""
    if "unfinished_after_s" in report:
        return f"unfinished after {report['unfinished_after_s']:.0f} s"
    if report.get("attacker") == "flood":
        return (
            f"{report['bytes_sent_mib']} MiB sent on {report['streams']} streams over "
            f"{report.get('connections', 1)} connections, {report['stopped_by_server']} stopped, "
            f"{report['seconds']} s"
        )
    answers = ", ".join(f"{k} {v}" for k, v in sorted(report.get("answers", {}).items()))
    return f"{report.get('queries')} queries in {report.get('seconds')} s: {answers}"


if __name__ == "__main__":
    main()
