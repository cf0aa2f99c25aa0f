"""Fifty agents on one gateway: the code before the performance work against the current
code, side by side in one run.

Each arm is real code in its own processes: its `src` (a `git archive` of the commit named
`before-performance` in bench/BASELINE, or this tree's), its own `world load` of the PEPs
world, one QUIC authority and one `demarkus gateway` (uvicorn on 127.0.0.1), both started
with `PYTHONPATH` set to that `src`. The arms run one after the other, never together.

Callers are lean MCP clients in this process (one HTTP connection and one MCP session each:
initialize, then `tools/call` POSTs with JSON answers), so the load generator costs the
machine little. Every call is a budgeted `mark_lookup` (the world's questions, match=body,
limit 5, budget 1500); a call that errs, times out or answers without `status: ok` counts
as an error. Phases, per arm:

* **warm-up** (not reported): every caller opens its session and calls for a few seconds.
* **open loop**: each caller sends one call a second, on a fixed schedule spread across
  the second; a call's latency runs from its scheduled time, so a late start counts
  (no coordinated omission). p50/p99, errors, gateway peak RSS.
* **closed loop**: every caller calls again as soon as it is answered; throughput (ok
  calls/s) is the saturation the arm reaches. Gateway and authority CPU per call.
* **stall probe**: one caller alternates `mark_worlds` (no upstream request: how soon the
  gateway's event loop gets to it) and `mark_fetch` of the world's smallest document (a
  FETCH the authority answers on its own event loop) every 50 ms, first alone, then while
  BURST other callers send heavy lookups (limit 10, budget 4000) back to back. A lookup
  that held either event loop for its whole run would show in the probe's p99.

    .venv/bin/python -m bench.gateway_agents [--callers 50] [--open-seconds 60] [--closed-seconds 30]
    .venv/bin/python -m bench.gateway_agents --quick      # 10 callers, short phases; results not kept
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from demarkus import auth
from demarkus.tls import ensure_dev_certificate

from . import arms, common

NAME = "gateway_agents"
BEFORE = "before-performance"
CALL_TIMEOUT = 30.0
PROBE_EVERY = 0.05
BURST = 10
ANSWERED = ("status: ok", "status: unchanged")
"""How a successful answer starts (a repeated mark_fetch in a session says `unchanged`)."""
PROTOCOL = "2025-06-18"
LOOKUP = {"url": "mark://peps/peps", "match": "body", "limit": 5, "budget": 1500}
HEAVY = {"url": "mark://peps/peps", "match": "body", "limit": 10, "budget": 4000}
TARGETS = {"open_p99_ms": 250.0, "open_rss_mib": 200.0, "closed_ratio": 3.0}


class CallError(Exception):
    """A call the bench counts as failed (its message says why)."""


@dataclass
class Agent:
    """One caller: its own HTTP connection, bearer token and MCP session."""

    url: str
    token: str
    http: httpx2.AsyncClient | None = None
    session: str = ""
    next_id: int = 1

    async def open(self) -> None:
        self.http = httpx2.AsyncClient(timeout=CALL_TIMEOUT)
        response = await self._post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"},
                },
            }
        )
        self.session = response.headers.get("mcp-session-id", "")
        await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def close(self) -> None:
        if self.http is not None:
            await self.http.aclose()

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """The tool's text; CallError when the call failed in any way."""
        self.next_id += 1
        message = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        try:
            response = await asyncio.wait_for(self._post(message), CALL_TIMEOUT)
            answer = response.json()
        except (TimeoutError, httpx2.HTTPError, ValueError) as exc:
            raise CallError(f"{type(exc).__name__}: {exc}") from None
        if "error" in answer:
            raise CallError(str(answer["error"])[:200])
        result = answer["result"]
        text = "".join(part.get("text", "") for part in result.get("content", []))
        if result.get("isError") or not text.startswith(ANSWERED):
            raise CallError(text[:200])
        return text

    async def _post(self, message: dict[str, Any]) -> httpx2.Response:
        assert self.http is not None
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": PROTOCOL,
        }
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        response = await self.http.post(self.url, content=json.dumps(message), headers=headers)
        if response.status_code >= 400:
            raise CallError(f"HTTP {response.status_code}: {response.text[:200]}")
        return response


@dataclass(frozen=True)
class Sample:
    seconds: float
    ok: bool
    error: str = ""


def summary(samples: list[Sample], span: float) -> dict[str, Any]:
    ok = [s.seconds for s in samples if s.ok]
    latency = common.latency_summary_ms(ok) if ok else {"p50_ms": None, "p99_ms": None}
    errors = sorted({s.error for s in samples if not s.ok})
    return {
        "calls": len(samples),
        "errors": len(samples) - len(ok),
        "error_messages": errors[:3],
        "ok_per_s": round(len(ok) / max(span, 1e-9), 2),
        "p50_ms": latency["p50_ms"],
        "p99_ms": latency["p99_ms"],
    }


async def timed(call: Awaitable[str], started: float, samples: list[Sample]) -> None:
    try:
        await call
        samples.append(Sample(time.monotonic() - started, True))
    except CallError as exc:
        samples.append(Sample(time.monotonic() - started, False, str(exc)))


async def open_loop(agents: list[Agent], queries: list[str], seconds: float) -> list[Sample]:
    """Each agent one call a second on its own fixed schedule; latency from the schedule."""
    samples: list[Sample] = []
    t0 = time.monotonic() + 0.1

    async def one(index: int, agent: Agent) -> None:
        tick = 0
        while tick < seconds:
            due = t0 + tick + index / len(agents)
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            query = queries[(index + tick) % len(queries)]
            await timed(agent.call("mark_lookup", {"query": query, **LOOKUP}), due, samples)
            tick += 1

    await asyncio.gather(*(one(i, a) for i, a in enumerate(agents)))
    return samples


async def closed_loop(agents: list[Agent], queries: list[str], seconds: float, args: dict[str, Any]) -> list[Sample]:
    """Every agent calls again as soon as it is answered, until `seconds` have passed."""
    samples: list[Sample] = []
    deadline = time.monotonic() + seconds

    async def one(index: int, agent: Agent) -> None:
        turn = index
        while time.monotonic() < deadline:
            query = queries[turn % len(queries)]
            turn += 1
            await timed(agent.call("mark_lookup", {"query": query, **args}), time.monotonic(), samples)

    await asyncio.gather(*(one(i, a) for i, a in enumerate(agents)))
    return samples


async def probe(agent: Agent, seconds: float, small: str) -> dict[str, list[Sample]]:
    """`mark_worlds` and `mark_fetch` of `small`, in turn, every PROBE_EVERY seconds."""
    samples: dict[str, list[Sample]] = {"worlds": [], "fetch": []}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await timed(agent.call("mark_worlds", {}), time.monotonic(), samples["worlds"])
        await asyncio.sleep(PROBE_EVERY)
        await timed(agent.call("mark_fetch", {"url": small}), time.monotonic(), samples["fetch"])
        await asyncio.sleep(PROBE_EVERY)
    return samples


@dataclass
class Processes:
    gateway: subprocess.Popen[str]
    authority: subprocess.Popen[str]

    def cpu(self) -> dict[str, float]:
        return {
            "gateway": common.process_cpu_seconds(self.gateway.pid),
            "authority": common.process_cpu_seconds(self.authority.pid),
            "bench_client": time.process_time(),
        }


def cpu_per_call(before: dict[str, float], after: dict[str, float], calls: int) -> dict[str, float]:
    return {f"{name}_ms": round(1000 * (after[name] - before[name]) / max(calls, 1), 2) for name in before}


async def drive(
    url: str, tokens: list[str], queries: list[str], small: str, spans: dict[str, float], procs: Processes
) -> dict[str, Any]:
    agents = [Agent(url, token) for token in tokens]
    prober, others = agents[0], agents[1:]  # the prober is one of the callers in the loops
    await asyncio.gather(*(a.open() for a in agents))
    try:
        await closed_loop(agents, queries, spans["warm"], LOOKUP)
        results: dict[str, Any] = {}

        cpu, wall = procs.cpu(), time.monotonic()
        samples = await open_loop(agents, queries, spans["open"])
        span = time.monotonic() - wall
        results["open_loop"] = {
            **summary(samples, span),
            "offered_per_s": float(len(agents)),  # one call a second each
            "cpu_per_call": cpu_per_call(cpu, procs.cpu(), len(samples)),
            "gateway_peak_rss_mib": common.peak_rss_mib(procs.gateway.pid),
        }

        cpu, wall = procs.cpu(), time.monotonic()
        samples = await closed_loop(agents, queries, spans["closed"], LOOKUP)
        span = time.monotonic() - wall
        results["closed_loop"] = {
            **summary(samples, span),
            "cpu_per_call": cpu_per_call(cpu, procs.cpu(), len(samples)),
        }

        alone = await probe(prober, spans["probe"], small)
        during, heavy = await asyncio.gather(
            probe(prober, spans["probe"], small), closed_loop(others[:BURST], queries, spans["probe"], HEAVY)
        )
        results["stall_probe"] = {
            **{f"{tool}_alone": summary(alone[tool], spans["probe"]) for tool in alone},
            **{f"{tool}_during_burst": summary(during[tool], spans["probe"]) for tool in during},
            "heavy_calls": summary(heavy, spans["probe"]),
        }
        results["gateway_peak_rss_mib"] = common.peak_rss_mib(procs.gateway.pid)
        results["authority_peak_rss_mib"] = common.peak_rss_mib(procs.authority.pid)
        return results
    finally:
        await asyncio.gather(*(a.close() for a in agents))


def gateway_config(port: int, cert: Path, tokens: list[str]) -> str:
    lines = ["[gateway]", "rate_per_minute = 100000"]
    lines += ["[worlds.peps]", f'authority = "mark://localhost:{port}"', f'ca = "{cert}"', 'dial = "127.0.0.1"']
    for index, token in enumerate(tokens):
        lines += [f"[callers.caller{index:02d}]", f'hash = "{auth.hash_token(token)}"', 'read = ["peps"]']
    return "\n".join(lines) + "\n"


def smallest_document(world: Path) -> str:
    """The path of the document whose current version is shortest."""
    with (world / "corpus.jsonl").open(encoding="utf-8") as lines:
        documents = [json.loads(line) for line in lines if line.strip()]
    return str(min(documents, key=lambda d: (len(d["versions"][-1]), d["path"]))["path"])


def run_arm(name: str, src: Path, tmp: Path, world: Path, callers: int, spans: dict[str, float]) -> dict[str, Any]:
    """One arm: load, serve, drive the phases; its results."""
    home, root = tmp / name / "home", tmp / name / "store"
    cert, _ = ensure_dev_certificate(home / "tls")
    env = common.bench_env(home)
    env["PYTHONPATH"] = str(src)
    print(f"[{name}] loading {common.shown(world)} ...", flush=True)
    common.load_world(world, root, env)
    queries = [q["question"] for q in json.loads((world / "questions.json").read_text())]
    small = "mark://peps" + smallest_document(world)
    tokens = [auth.generate_token() for _ in range(callers)]
    config = tmp / name / "gateway.toml"
    serve = [*common.DEMARKUS, "serve", "--root", str(root), "--host", "127.0.0.1", "--port", "0"]
    with common.server_process(serve, env) as (authority, found):
        port = int(found.group(1).rsplit(":", 1)[1])
        config.write_text(gateway_config(port, cert, tokens), encoding="utf-8")
        gateway_args = [common.PYTHON, "-m", "demarkus.gateway.cli", "--config", str(config), "--port", "0"]
        with common.server_process(gateway_args, env, common.GATEWAY_LISTENING) as (gateway, listening):
            print(f"[{name}] {callers} callers on {listening.group(1)}", flush=True)
            return asyncio.run(
                drive(listening.group(1) + "/", tokens, queries, small, spans, Processes(gateway, authority))
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=Path, default=common.PEPS)
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--open-seconds", type=float, default=60.0)
    parser.add_argument("--closed-seconds", type=float, default=30.0)
    parser.add_argument("--arm", choices=[BEFORE, "now"], action="append", help="run only these arms")
    parser.add_argument("--quick", action="store_true", help="10 callers, short phases (smoke run; not kept)")
    args = parser.parse_args()
    spans = {"warm": 5.0, "open": args.open_seconds, "closed": args.closed_seconds, "probe": 10.0}
    if args.quick:
        args.callers = 10
        spans = {"warm": 2.0, "open": 5.0, "closed": 5.0, "probe": 3.0}
    chosen = args.arm or [BEFORE, "now"]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="demarkus-bench-agents-") as scratch:
        tmp = Path(scratch)
        for name in chosen:
            src = arms.commit_src(tmp / "before", arms.named_commit(BEFORE)) if name == BEFORE else arms.CURRENT_SRC
            results[name] = run_arm(name, src, tmp, args.world, args.callers, spans)
    report(results, args.callers)
    common.write_results(
        NAME,
        {
            "world": common.shown(args.world),
            "callers": args.callers,
            "spans_s": spans,
            "before": arms.named_commit(BEFORE),
            "lookup": LOOKUP,
            "heavy": HEAVY,
            "probe_every_s": PROBE_EVERY,
            "targets": TARGETS,
        },
        results,
        keep=not args.quick and len(chosen) == 2,
    )


def report(results: dict[str, Any], callers: int) -> None:
    rows = []
    for name, arm in results.items():
        o, c, p = arm["open_loop"], arm["closed_loop"], arm["stall_probe"]
        rows.append(
            [
                name,
                f"{o['p50_ms']} / {o['p99_ms']}",
                o["errors"],
                o["gateway_peak_rss_mib"],
                c["ok_per_s"],
                f"{c['cpu_per_call']['gateway_ms']} / {c['cpu_per_call']['authority_ms']}",
                f"{p['worlds_alone']['p99_ms']} / {p['worlds_during_burst']['p99_ms']}",
                f"{p['fetch_alone']['p99_ms']} / {p['fetch_during_burst']['p99_ms']}",
            ]
        )
    common.print_table(
        f"gateway_agents: {callers} callers, budgeted mark_lookup",
        [
            "arm",
            "open p50/p99 ms",
            "open errors",
            "gateway RSS MiB",
            "closed ok/s",
            "CPU ms/call gw / auth",
            "worlds p99 alone / burst",
            "fetch p99 alone / burst",
        ],
        rows,
    )
    if BEFORE in results and "now" in results:
        before, now = results[BEFORE]["closed_loop"]["ok_per_s"], results["now"]["closed_loop"]["ok_per_s"]
        ratio = round(now / max(before, 1e-9), 2)
        results["closed_ratio"] = ratio
        print(f"closed-loop throughput now / before: {ratio} (target >= {TARGETS['closed_ratio']})")


if __name__ == "__main__":
    main()
