"""Start demarkus as a real subprocess and wait (bounded) for its `listening on` line."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

LISTENING = re.compile(r"listening on (mark://\S+)")
REPO = Path(__file__).resolve().parents[2]
DEMARKUS = [sys.executable, "-m", "demarkus"]


def wait_for_line(
    proc: subprocess.Popen[str], pattern: re.Pattern[str], lines: queue.Queue[str | None], timeout: float = 60
) -> re.Match[str]:
    """Take stdout's lines from `lines` (filled by `pump`) until one matches; fail with what
    was printed if none does."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        if line is None:
            break
        seen.append(line)
        found = pattern.search(line)
        if found:
            return found
    proc.kill()
    stderr = proc.stderr.read() if proc.stderr else ""
    raise AssertionError(f"no line matching {pattern.pattern!r}; stdout={''.join(seen)!r} stderr={stderr[-2000:]!r}")


def pump(proc: subprocess.Popen[str]) -> tuple[threading.Thread, queue.Queue[str | None]]:
    """A thread that reads stdout to its end into a queue (None at the end), so the process
    never blocks on a full pipe. A thread, because select() on a buffered text stream misses
    lines that are already in Python's buffer."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader, lines


@contextmanager
def running(
    args: Sequence[str],
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    pattern: re.Pattern[str] = LISTENING,
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run a command that prints where it listens (`listening on mark://...`, or what
    `pattern` matches); yield the process and the URL (the pattern's first group).
    On the way out the process is stopped and its pipes are closed."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen(
        list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, cwd=cwd
    )
    reader, lines = pump(proc)
    try:
        url = wait_for_line(proc, pattern, lines).group(1)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        reader.join(timeout=10)  # stdout ends with the process
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DEMARKUS, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        input=stdin,
    )
