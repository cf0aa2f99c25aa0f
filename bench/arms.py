"""Two-arm benches: v0.1.0 against the current code, each arm in its own interpreter.

An arm is a `bench` module run as `python -m bench.<module>` with `PYTHONPATH` set to the
arm's `src`, so it imports that version's `demarkus`: the editable install of this tree
comes later on `sys.path` and cannot shadow it, and `own_demarkus` checks that it did not.
An arm prints the raw tool texts as JSON on stdout and scores nothing: the parent scores
both arms' texts with the current package, so one scorer (one `>>>` parser, one token
counter) judges both.

v0.1.0 is `git archive` of the commit in bench/BASELINE, so both arms run real code. That
file names one commit per line (`<commit> <name>`): v0.1.0 first, then earlier points other
benches compare against, such as the code before the performance work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .common import BENCH, PYTHON, REPO

BASELINE = "v0.1.0"
CURRENT = "current"
CURRENT_SRC = REPO / "src"


def named_commit(name: str) -> str:
    """The commit bench/BASELINE names `name` (a clone may not carry tags).

    Raises:
        KeyError: the file names no such commit.
    """
    for line in (BENCH / "BASELINE").read_text(encoding="utf-8").splitlines():
        commit, _, named = line.partition(" ")
        if named.strip() == name:
            return commit
    raise KeyError(f"bench/BASELINE names no commit {name!r}")


def baseline_commit() -> str:
    """The v0.1.0 commit."""
    return named_commit(BASELINE)


def commit_src(tmp: Path, commit: str) -> Path:
    """`commit`'s `src`, extracted under `tmp`."""
    tmp.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
    return tmp / "src"


def baseline_src(tmp: Path) -> Path:
    """v0.1.0's `src`, extracted under `tmp`."""
    return commit_src(tmp, baseline_commit())


def run(module: str, src: Path, *args: str) -> Any:
    """Run the arm `python -m bench.<module> ARGS` on the `demarkus` under `src`; its JSON."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)
    done = subprocess.run(
        [PYTHON, "-m", f"bench.{module}", *args], capture_output=True, text=True, env=env, cwd=REPO, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"arm bench.{module} on {src} exited {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def own_demarkus() -> Path:
    """In an arm: the `src` on PYTHONPATH, once checked to be where `demarkus` came from.

    Raises:
        RuntimeError: `demarkus` was imported from elsewhere (the editable install, say),
            so the arm would measure the wrong code.
    """
    import demarkus

    first = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    if not first:
        raise RuntimeError("an arm runs with PYTHONPATH set to its src (bench.arms.run does that)")
    src = Path(first).resolve()
    found = Path(demarkus.__file__).resolve()
    if not found.is_relative_to(src):
        raise RuntimeError(f"the arm imported demarkus from {found}, not from its PYTHONPATH {src}")
    return src


def answer(data: Any) -> None:
    """An arm's one output: `data` as JSON on stdout, in the order it was made."""
    json.dump(data, sys.stdout)
    sys.stdout.write("\n")
