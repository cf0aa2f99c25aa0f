"""The gateway under load: concurrent callers issue budgeted lookups through a real
`demarkus gateway` (uvicorn on 127.0.0.1) for a fixed time, with the PEPs world served by
a QUIC authority subprocess and the demo world by a second one; in the middle the PEPs
authority is killed (SIGKILL) and later restarted on the same port.

Each caller has its own bearer token and MCP session (SDK HTTP client, this process) and
loops: three budgeted `mark_lookup` calls on the PEPs world (the world's own questions,
match=body, budget 1500, limit 5), then one on the demo world (budget 800). Reported per
phase (before the kill, outage, after recovery) and world: calls, errors, throughput,
p50/p99 latency; plus the time to recover, the error messages seen, and peak RSS of the
gateway and the authorities. Bounded: loopback only, every call has a timeout.

    .venv/bin/python -m bench.gateway_load [--callers 50] [--seconds 60] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from demarkus import auth
from demarkus.tls import ensure_dev_certificate
from demarkus.worlds import demo_world_path

from . import common

NAME = "gateway_load"
PEPS = common.PEPS
CALL_TIMEOUT = 60.0
DEMO_QUERIES = (
    "snapshot quorum restore",
    "lease heartbeat interval",
    "learner catch up rate promoted voter",
    "admin API port",
    "maximum job payload size",
    "retry backoff cap",
)


@dataclass(frozen=True)
class Sample:
    caller: int
    world: str
    started: float
    seconds: float
    ok: bool
    error: str = ""


def start_authority(root: Path, port: int, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [*common.DEMARKUS, "serve", "--root", str(root), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=log.open("a"),
        text=True,
        env=env,
        cwd=common.REPO,
    )
    found = common.wait_for_line(proc, common.LISTENING)
    return proc, int(found.group(1).rsplit(":", 1)[1])


def gateway_config(peps_port: int, demo_port: int, cert: Path, tokens: list[str], max_upstream: int) -> str:
    lines = [
        "[gateway]",
        "rate_per_minute = 100000",
        f"max_upstream = {max_upstream}",
        "upstream_wait = 10",
        "upstream_timeout = 5",
        "upstream_answer_timeout = 30",
    ]
    for world, port in (("peps", peps_port), ("demo", demo_port)):
        lines += [f"[worlds.{world}]", f'authority = "mark://localhost:{port}"', f'ca = "{cert}"', 'dial = "127.0.0.1"']
    for index, token in enumerate(tokens):
        lines += [f"[callers.caller{index:02d}]", f'hash = "{auth.hash_token(token)}"', 'read = ["peps", "demo"]']
    return "\n".join(lines) + "\n"


async def caller(
    index: int, url: str, token: str, queries: list[str], deadline: float, t0: float, samples: list[Sample]
) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=CALL_TIMEOUT)
    async with http, Client(streamable_http_client(url + "/", http_client=http)) as client:  # type: ignore[arg-type]
        turn = index  # callers start at different queries
        while time.monotonic() < deadline:
            if turn % 4 == 3:
                world, args = (
                    "demo",
                    {
                        "query": DEMO_QUERIES[turn % len(DEMO_QUERIES)],
                        "url": "mark://demo/",
                        "match": "body",
                        "limit": 5,
                        "budget": 800,
                    },
                )
            else:
                world, args = (
                    "peps",
                    {
                        "query": queries[turn % len(queries)],
                        "url": "mark://peps/peps",
                        "match": "body",
                        "limit": 5,
                        "budget": 1500,
                    },
                )
            turn += 1
            started = time.monotonic()
            try:
                result = await asyncio.wait_for(client.call_tool("mark_lookup", args), CALL_TIMEOUT)
                text = "".join(getattr(part, "text", "") for part in result.content)
                ok, error = not result.is_error, "" if not result.is_error else text
                if ok and not text.startswith("status: ok"):
                    ok, error = False, text[:200]
            except Exception as exc:  # a failed call is a result of this bench, not a crash
                ok, error = False, f"{type(exc).__name__}: {exc}"
            samples.append(Sample(index, world, started - t0, time.monotonic() - started, ok, error[:300]))


async def chaos(
    root: Path,
    port: int,
    env: dict[str, str],
    log: Path,
    state: dict[str, object],
    kill_at: float,
    restart_at: float,
    t0: float,
) -> None:
    """Kill the PEPs authority at kill_at and start it again (same port) at restart_at."""
    await asyncio.sleep(max(0.0, t0 + kill_at - time.monotonic()))
    proc: subprocess.Popen[str] = state["peps"]  # type: ignore[assignment]
    state["peak_peps_rss_mib"] = common.peak_rss_mib(proc.pid)
    state["peps_cpu_first"] = common.process_cpu_seconds(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    state["killed"] = time.monotonic() - t0
    await asyncio.sleep(max(0.0, t0 + restart_at - time.monotonic()))
    state["restart_begun"] = time.monotonic() - t0
    restarted, _ = await asyncio.to_thread(start_authority, root, port, env, log)
    state["peps"] = restarted
    state["restarted"] = time.monotonic() - t0


def summarize(chosen: list[Sample], span: float) -> dict[str, object]:
    ok = [s.seconds for s in chosen if s.ok]
    latency = common.latency_summary_ms(ok) if ok else {"p50_ms": None, "p99_ms": None}
    return {
        "seconds": round(span, 1),
        "calls": len(chosen),
        "ok": len(ok),
        "errors": len(chosen) - len(ok),
        "ok_per_s": round(len(ok) / max(span, 1e-9), 2),
        "p50_ms": latency["p50_ms"],
        "p99_ms": latency["p99_ms"],
    }


def started_in(samples: list[Sample], start: float, end: float) -> list[Sample]:
    return [s for s in samples if start <= s.started < end]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=Path, default=PEPS)
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--max-upstream", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="10 callers for 15 s (smoke run; results not kept)")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before the run, wait up to this long for other processes to go idle",
    )
    args = parser.parse_args()
    if args.quick:
        args.callers, args.seconds = 10, 15.0
    kill_at, restart_at = args.seconds / 3, args.seconds * 7 / 12
    queries = [q["question"] for q in json.loads((args.world / "questions.json").read_text())]

    tmp = Path(tempfile.mkdtemp(prefix="demarkus-bench-gateway-"))
    procs: list[subprocess.Popen[str]] = []
    state: dict[str, object] = {}
    try:
        home, peps_root, demo_root = tmp / "home", tmp / "peps", tmp / "demo"
        cert, _ = ensure_dev_certificate(home / "tls")
        env = common.bench_env(home)
        print(f"loading {args.world} and the demo world ...", file=sys.stderr, flush=True)
        load_seconds = common.load_world(args.world, peps_root, env) + common.load_world(
            demo_world_path(), demo_root, env
        )
        log = tmp / "authorities.log"
        peps, peps_port = start_authority(peps_root, 0, env, log)
        demo, demo_port = start_authority(demo_root, 0, env, log)
        procs += [peps, demo]
        state["peps"] = peps
        tokens = [auth.generate_token() for _ in range(args.callers)]
        config = tmp / "gateway.toml"
        config.write_text(gateway_config(peps_port, demo_port, cert, tokens, args.max_upstream), encoding="utf-8")
        access = tmp / "access.log"
        gateway = subprocess.Popen(
            [sys.executable, "-m", "demarkus.gateway.cli", "--config", str(config), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=access.open("w"),
            text=True,
            env=env,
            cwd=common.REPO,
        )
        procs.append(gateway)
        url = common.wait_for_line(gateway, common.GATEWAY_LISTENING).group(1)
        print(
            f"gateway at {url}; {args.callers} callers for {args.seconds:.0f} s; PEPs authority killed at "
            f"{kill_at:.0f} s, restarted at {restart_at:.0f} s",
            file=sys.stderr,
            flush=True,
        )

        samples: list[Sample] = []

        async def run() -> None:
            t0 = time.monotonic()
            deadline = t0 + args.seconds
            await asyncio.gather(
                chaos(peps_root, peps_port, env, log, state, kill_at, restart_at, t0),
                *(caller(i, url, tokens[i], queries, deadline, t0, samples) for i in range(args.callers)),
            )

        common.wait_for_quiet(args.wait_quiet)
        cpu_before = {
            name: common.process_cpu_seconds(p.pid)
            for name, p in (("gateway", gateway), ("demo", demo), ("peps", peps))
        }
        busy_before, own_before, drops_before = (
            common.system_busy_seconds(),
            time.process_time(),
            common.udp_receive_drops(),
        )
        wall = time.perf_counter()
        asyncio.run(run())
        wall = time.perf_counter() - wall
        drops = common.udp_receive_drops() - drops_before
        own_cpu = time.process_time() - own_before
        busy = common.system_busy_seconds() - busy_before
        restarted_peps: subprocess.Popen[str] = state["peps"]  # type: ignore[assignment]
        procs.append(restarted_peps)
        memory = {
            "gateway_peak_rss_mib": common.peak_rss_mib(gateway.pid),
            "peps_authority_peak_rss_mib": max(
                float(state.get("peak_peps_rss_mib", 0.0)), common.peak_rss_mib(restarted_peps.pid)
            ),  # type: ignore[arg-type]
            "demo_authority_peak_rss_mib": common.peak_rss_mib(demo.pid),
        }
        cpu = {
            f"{name}_cpu_s": round(common.process_cpu_seconds(p.pid) - cpu_before[name], 1)
            for name, p in (("gateway", gateway), ("demo", demo))
        }
        cpu["peps_cpu_s"] = round(
            float(state.get("peps_cpu_first", 0.0))
            - cpu_before["peps"]  # type: ignore[arg-type]
            + common.process_cpu_seconds(restarted_peps.pid),
            1,
        )
        cpu["bench_client_cpu_s"] = round(own_cpu, 1)
        cpu["machine_busy_cores"] = round(busy / wall, 2)
        cpu["udp_receive_drops"] = drops
        access_lines = access.read_text().count('"event": "tool"')
    finally:
        for proc in procs:
            common.stop_process(proc)
        shutil.rmtree(tmp, ignore_errors=True)

    killed, restarted = float(state["killed"]), float(state["restarted"])  # type: ignore[arg-type]
    after_restart = sorted(
        s.started + s.seconds for s in samples if s.world == "peps" and s.ok and s.started + s.seconds >= restarted
    )
    recovered = after_restart[0] if after_restart else args.seconds

    # Phases by each call's whole run: done before the kill; overlapping [kill, first PEPs
    # success after the restart]; started after that. Every call is in exactly one.
    def phase_of(s: Sample) -> str:
        if s.started + s.seconds <= killed:
            return "before kill"
        if s.started >= recovered:
            return "after recovery"
        return "outage"

    spans = {"before kill": killed, "outage": recovered - killed, "after recovery": args.seconds - recovered}
    table, results_phases = [], {}
    for phase, span in spans.items():
        for world in ("peps", "demo"):
            summary = summarize([s for s in samples if s.world == world and phase_of(s) == phase], span)
            results_phases[f"{phase} / {world}"] = summary
            table.append(
                [
                    phase,
                    world,
                    summary["calls"],
                    summary["errors"],
                    summary["ok_per_s"],
                    summary["p50_ms"],
                    summary["p99_ms"],
                ]
            )
    whole = {world: summarize([s for s in samples if s.world == world], args.seconds) for world in ("peps", "demo")}
    hit = [s for s in samples if s.world == "peps" and phase_of(s) == "outage"]
    hit_ids = {id(s) for s in hit}
    healthy_errors = [s for s in samples if not s.ok and id(s) not in hit_ids]
    steady = summarize([s for s in samples if phase_of(s) != "outage"], killed + args.seconds - recovered)
    errors: dict[str, int] = {}
    for s in samples:
        if not s.ok:
            key = (
                f"{s.world}: "
                + re.sub(r"\d+(\.\d+)? s ago", "N s ago", s.error.replace("Error executing tool mark_lookup: ", ""))[
                    :160
                ]
            )
            errors[key] = errors.get(key, 0) + 1
    everything = summarize(samples, args.seconds)
    timeline = []
    step = max(1.0, args.seconds / 12)
    edge = 0.0
    while edge < args.seconds:
        row: dict[str, object] = {"from_s": round(edge, 1)}
        for world in ("peps", "demo"):
            part = summarize(started_in([s for s in samples if s.world == world], edge, edge + step), step)
            row[world] = {k: part[k] for k in ("calls", "errors", "p50_ms", "p99_ms")}
        timeline.append(row)
        edge += step

    common.print_table(
        f"gateway_load: {args.callers} callers, budgeted mark_lookup for {args.seconds:.0f} s "
        f"(PEPs authority killed at {killed:.1f} s, restarted at {restarted:.1f} s, first PEPs success at {recovered:.1f} s)",
        ["phase", "world", "calls", "errors", "ok/s", "p50 ms", "p99 ms"],
        table
        + [
            [
                "whole run",
                w,
                whole[w]["calls"],
                whole[w]["errors"],
                whole[w]["ok_per_s"],
                whole[w]["p50_ms"],
                whole[w]["p99_ms"],
            ]
            for w in ("peps", "demo")
        ],
    )
    common.print_table(
        "timeline (by call start)",
        ["from s", "peps calls", "peps errors", "peps p50", "peps p99", "demo calls", "demo errors", "demo p99"],
        [
            [
                r["from_s"],
                r["peps"]["calls"],
                r["peps"]["errors"],
                r["peps"]["p50_ms"],
                r["peps"]["p99_ms"],  # type: ignore[index]
                r["demo"]["calls"],
                r["demo"]["errors"],
                r["demo"]["p99_ms"],
            ]
            for r in timeline
        ],  # type: ignore[index]
    )
    common.print_table("errors (message, count)", ["message", "count"], sorted(errors.items(), key=lambda kv: -kv[1]))
    common.print_table(
        "totals",
        ["measure", "value"],
        [
            ["calls, all", everything["calls"]],
            ["throughput, ok calls/s (whole run)", everything["ok_per_s"]],
            ["throughput, ok calls/s (outside the outage)", steady["ok_per_s"]],
            ["p50 / p99 ms (calls outside the outage)", f"{steady['p50_ms']} / {steady['p99_ms']}"],
            ["errors on calls the outage did not touch (target 0)", len(healthy_errors)],
            ["errors on PEPs calls overlapping the outage (expected)", everything["errors"] - len(healthy_errors)],  # type: ignore[operator]
            ["recovery: restart ready -> first PEPs success, s", round(recovered - restarted, 2)],
            *[[k, v] for k, v in memory.items()],
            *[[k, v] for k, v in cpu.items()],
            ["access-log tool lines", access_lines],
            ["world loads, s", round(load_seconds, 1)],
            ["wall, s", round(wall, 1)],
        ],
    )
    common.write_results(
        NAME,
        {
            "world": common.shown(args.world),
            "callers": args.callers,
            "seconds": args.seconds,
            "kill_at_s": kill_at,
            "restart_at_s": restart_at,
            "max_upstream": args.max_upstream,
            "upstream_timeout_s": 5,
            "upstream_answer_timeout_s": 30,
            "upstream_wait_s": 10,
            "call": "mark_lookup match=body limit=5: PEPs questions budget 1500 (3 of 4 calls), demo queries budget 800",
            "client": "mcp SDK streamable HTTP client per caller, in the bench process (same machine)",
        },
        {
            "phases": results_phases,
            "whole_run": whole,
            "all": everything,
            "outside_outage": steady,
            "errors_outside_outage": len(healthy_errors),
            "errors_in_outage": len([x for x in hit if not x.ok]),
            "errors": errors,
            "killed_at_s": round(killed, 2),
            "restarted_at_s": round(restarted, 2),
            "recovered_at_s": round(recovered, 2),
            "memory": memory,
            "cpu": cpu,
            "access_log_tool_lines": access_lines,
            "timeline": timeline,
        },
        keep=not args.quick,
    )


if __name__ == "__main__":
    main()
