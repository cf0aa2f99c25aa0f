"""Shared helpers for the benchmarks: percentiles, plain tables, JSON results, subprocesses.

Every bench prints a plain-text table and writes JSON twice: `bench/out/<name>.json`
(git-ignored scratch) and `bench/results/<name>.json` (the committed copy of the latest run).
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
OUT = BENCH / "out"
RESULTS = BENCH / "results"
SHARED_WORLDS = REPO.parent / "shared" / "worlds"
"""The frozen worlds, in the `shared` folder beside the repository."""
PEPS = SHARED_WORLDS / "peps"
DEMO = REPO / "src" / "demarkus" / "worlds" / "demo"
GO = BENCH / "worlds" / "go"
"""Design documents without metadata, kept in the repository (`bench/worlds/go/README.md`)."""
LOGSEQ = BENCH / "worlds" / "logseq"
"""An outliner's graph, kept in the repository (`bench/worlds/logseq/README.md`)."""
VISIBLE_WORLDS = (PEPS, SHARED_WORLDS / "eth", SHARED_WORLDS / "rust", DEMO, GO, LOGSEQ)
"""Every world a change is judged on."""
PYTHON = sys.executable
"""Every subprocess runs this interpreter; a bench runs from the repository root as
`python -m bench.<name>`, and its bench subprocesses as `python -m bench.<module>`."""
DEMARKUS = [PYTHON, "-m", "demarkus"]
LISTENING = re.compile(r"listening on (mark://\S+)")
GATEWAY_LISTENING = re.compile(r"gateway listening on (http://\S+/mcp)")

STARTUP_TIMEOUT = 60.0
"""Seconds a server subprocess may take to print its `listening on` line."""
STOP_TIMEOUT = 10.0


# --- statistics -------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0..100), linear between the closest ranks (numpy's default)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * p / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99, mean and max of latencies given in seconds, reported in milliseconds."""
    ms = [s * 1000.0 for s in seconds]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 3),
        "p90_ms": round(percentile(ms, 90), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "mean_ms": round(sum(ms) / len(ms), 3) if ms else math.nan,
        "max_ms": round(max(ms), 3) if ms else math.nan,
    }


# --- output -----------------------------------------------------------------------------


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Plain text columns: left-aligned text, right-aligned numbers, two spaces apart."""
    cells = [[_cell(v) for v in row] for row in rows]
    numeric = [all(_is_number(row[i]) for row in rows if i < len(row)) and bool(rows) for i in range(len(headers))]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]) for i, v in enumerate(values)]
        return "  ".join(parts).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    print()
    print(title)
    print(format_table(headers, rows))
    sys.stdout.flush()


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value: object) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }
    try:
        from importlib.metadata import version

        info["aioquic"] = version("aioquic")
        info["demarkus"] = version("demarkus")
    except Exception:  # informational only
        pass
    info["git_commit"] = _git_commit()
    info["git_uncommitted_src"] = _git_uncommitted_src()
    return info


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _git_commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def _git_uncommitted_src() -> list[str] | None:
    """Files under src/ that differ from the commit (the numbers measured that tree)."""
    try:
        done = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return sorted(line[3:] for line in done.stdout.splitlines() if line.strip())


def shown(path: Path) -> str:
    """`path` as a result records it: relative to the repository when it lies beside or
    inside it (`../shared/worlds/peps`, `src/demarkus/worlds/demo`), so no machine's
    folders end up in committed results; else as given."""
    for candidate in (path.absolute(), path.resolve()):  # the first keeps a linked `shared`
        if candidate.is_relative_to(REPO.parent):
            return os.path.relpath(candidate, REPO)
    return str(path)


def write_results(name: str, parameters: Mapping[str, Any], results: Any, *, keep: bool = True) -> dict[str, Any]:
    """Write the run to bench/out/<name>.json and, when `keep`, to bench/results/<name>.json
    (the committed copy; smoke runs pass keep=False so they do not replace it). Return it."""
    document = {
        "name": name,
        "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine_info(),
        "parameters": dict(parameters),
        "results": results,
    }
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    folders = (OUT, RESULTS) if keep else (OUT,)
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{name}.json"
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, target)
    print("\nwrote " + " and ".join(f"{f.relative_to(REPO)}/{name}.json" for f in folders))
    return document


WORLD_LOAD_TIMEOUT = 600.0
"""Seconds `demarkus world load` may take (the largest visible world loads in under a minute)."""


def load_world(world: Path, root: Path, env: Mapping[str, str] | None = None) -> float:
    """Load a frozen world into a fresh store with `demarkus world load` (index and graph
    included); the seconds it took.

    Raises:
        RuntimeError: the load failed (the message ends with its error output).
    """
    started = time.perf_counter()
    done = subprocess.run(
        [*DEMARKUS, "world", "load", str(world), "--root", str(root)],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else None,
        timeout=WORLD_LOAD_TIMEOUT,
        check=False,
        cwd=REPO,
    )
    if done.returncode != 0:
        raise RuntimeError(f"world load {world} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.perf_counter() - started


def close_service(service: object) -> None:
    """Release what an in-process Service holds (its index database), when it has `close`."""
    close = getattr(service, "close", None)
    if callable(close):
        close()


# --- processes --------------------------------------------------------------------------


def bench_env(home: Path) -> dict[str, str]:
    """The environment for a child process: DEMARKUS_HOME set, quiet Python."""
    env = dict(os.environ)
    env["DEMARKUS_HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("DEMARKUS_AUTH", None)
    return env


def wait_for_line(
    proc: subprocess.Popen[str], pattern: re.Pattern[str], timeout: float = STARTUP_TIMEOUT
) -> re.Match[str]:
    """Read the child's stdout until a line matches `pattern` (bounded by `timeout`)."""
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            found = pattern.search(line)
            if found:
                return found
    stop_process(proc)
    stderr = proc.stderr.read() if proc.stderr else ""
    raise RuntimeError(
        f"{proc.args!r} printed no line matching {pattern.pattern!r} within {timeout:.0f} s; "
        f"stdout={''.join(seen)[-1000:]!r} stderr={stderr[-2000:]!r}"
    )


def stop_process(proc: subprocess.Popen[str]) -> None:
    """Terminate one child we started (by its pid), then kill it if it lingers."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@contextmanager
def server_process(
    args: Sequence[str], env: Mapping[str, str], pattern: re.Pattern[str] = LISTENING
) -> Iterator[tuple[subprocess.Popen[str], re.Match[str]]]:
    """Start a server subprocess, wait for its banner, yield (process, match); always stop it.

    stderr goes to a temporary file rather than a pipe, so a chatty server cannot block on a
    full pipe while the bench is running.
    """
    import tempfile

    err = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=err, text=True, env=dict(env), cwd=REPO)
    try:
        try:
            found = wait_for_line(proc, pattern)
        except RuntimeError as exc:
            err.seek(0)
            raise RuntimeError(f"{exc}; stderr file: {err.read()[-2000:]!r}") from None
        yield proc, found
    finally:
        stop_process(proc)
        err.close()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def peak_rss_mib(pid: int) -> float:
    """VmHWM: the process's peak resident set, in MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def system_busy_seconds() -> float:
    """CPU seconds all processes have used, summed over cores (Linux /proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(limit: float, threshold: float = 0.2, window: float = 1.0) -> float:
    """Wait (at most `limit` seconds) until the machine is idle: less than `threshold` cores
    busy over a `window`. Call it only while the bench and its servers are idle. Returns the
    last busy-cores sample; 0 `limit` returns at once."""
    deadline = time.monotonic() + limit
    cores = 0.0
    while time.monotonic() < deadline:
        before = system_busy_seconds()
        time.sleep(window)
        cores = (system_busy_seconds() - before) / window
        if cores < threshold:
            break
    return cores


def udp_receive_drops() -> int:
    """Datagrams the kernel dropped for full receive buffers, system-wide (Linux)."""
    try:
        lines = [ln.split() for ln in Path("/proc/net/snmp").read_text().splitlines() if ln.startswith("Udp:")]
        return int(lines[1][lines[0].index("RcvbufErrors")])
    except (OSError, IndexError, ValueError):
        return 0


def fmt_ratio_verdict(ratio: float, target: float) -> str:
    return "PASS" if ratio >= target else "MISS"
