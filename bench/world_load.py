"""`demarkus world load` of the PEPs world into a fresh store, timed from outside.

Runs the CLI as a subprocess (one run), then reports wall seconds, documents/s and
versions/s, the child's CPU time, and the size of the resulting store.

    .venv/bin/python -m bench.world_load [--world DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from . import common

NAME = "world_load"
WORLD = common.PEPS
TIMEOUT = 600.0
LOADED = re.compile(r"loaded (\S+): (\d+) documents, (\d+) versions")


def tree_bytes(root: Path) -> tuple[int, int]:
    """(bytes in regular files, number of regular files) under root."""
    total = files = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
                files += 1
    return total, files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=Path, default=WORLD)
    parser.add_argument("--quick", action="store_true", help="accepted for run_all.sh; always one run")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before the run, wait up to this long for other processes to go idle",
    )
    args = parser.parse_args()
    manifest = json.loads((args.world / "manifest.json").read_text())
    corpus_bytes = (args.world / "corpus.jsonl").stat().st_size

    tmp = Path(tempfile.mkdtemp(prefix="demarkus-bench-worldload-"))
    try:
        root = tmp / "store"
        env = common.bench_env(tmp / "home")
        common.wait_for_quiet(args.wait_quiet)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy = common.system_busy_seconds()
        started = time.perf_counter()
        done = subprocess.run(
            [*common.DEMARKUS, "world", "load", str(args.world), "--root", str(root)],
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT,
            check=False,
            cwd=common.REPO,
        )
        seconds = time.perf_counter() - started
        busy = common.system_busy_seconds() - busy
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise RuntimeError(f"world load failed ({done.returncode}): {done.stderr[-2000:]}")
        found = LOADED.search(done.stderr)
        if found is None:
            raise RuntimeError(f"no `loaded ...` line in the CLI's output: {done.stderr[-1000:]!r}")
        documents, versions = int(found.group(2)), int(found.group(3))
        if documents != manifest["documents"] or versions != manifest["versions"]:
            raise RuntimeError(
                f"loaded {documents}/{versions}, manifest says {manifest['documents']}/{manifest['versions']}"
            )
        store_bytes, store_files = tree_bytes(root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    user = after.ru_utime - before.ru_utime
    system = after.ru_stime - before.ru_stime
    results = {
        "world_id": found.group(1),
        "documents": documents,
        "versions": versions,
        "seconds": round(seconds, 3),
        "documents_per_s": round(documents / seconds, 1),
        "versions_per_s": round(versions / seconds, 1),
        "ms_per_version": round(seconds / versions * 1000, 3),
        "child_user_cpu_s": round(user, 3),
        "child_system_cpu_s": round(system, 3),
        "background_cores": round(max(0.0, busy - user - system) / seconds, 2),
        "corpus_bytes": corpus_bytes,
        "store_bytes": store_bytes,
        "store_files": store_files,
    }
    common.print_table(
        f"demarkus world load {args.world} --root <fresh store> (1 run)",
        ["world", "documents", "versions", "seconds", "docs/s", "versions/s", "user s", "sys s", "store MiB"],
        [
            [
                results["world_id"],
                documents,
                versions,
                results["seconds"],
                results["documents_per_s"],
                results["versions_per_s"],
                results["child_user_cpu_s"],
                results["child_system_cpu_s"],
                round(store_bytes / 2**20, 1),
            ]
        ],
    )
    common.write_results(
        NAME,
        {
            "world": common.shown(args.world),
            "runs": 1,
            "wait_quiet_seconds": args.wait_quiet,
            "command": "python -m demarkus world load WORLD --root STORE",
            "notes": "wall time of the subprocess, including interpreter start-up and the manifest "
            "fingerprint check; CPU from getrusage(RUSAGE_CHILDREN)",
        },
        results,
    )


if __name__ == "__main__":
    main()
