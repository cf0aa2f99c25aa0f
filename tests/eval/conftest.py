"""The three arms of the evaluation, run once per session on the demo world with the oracle:

- A: the v0.1.0 MCP server (bench/BASELINE), policy graph-section-first-v1
- B: the v0.1.0 MCP server, policy graph-budget-first-v1
- C: this tree's MCP server, policy graph-budget-first-v1

The v0.1.0 server runs from a fast baseline environment: a venv without pip whose
site-packages hold `git archive <commit> src/demarkus` as package `demarkus`, plus a .pth
line naming this interpreter's site-packages so the dependencies resolve. A path line in a
.pth file is only appended to sys.path; the .pth files inside that directory (among them the
editable-install hook that points `demarkus` at this tree) are not processed, so `import
demarkus` in the baseline finds the v0.1.0 copy. `scripts/baseline-venv` builds the same
thing with a full pip install, which is too slow for every test run.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import site
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from demarkus.eval.runner import RunConfig, run_eval
from demarkus.worlds import demo_world_path

REPO = Path(__file__).resolve().parents[2]
BASELINE_FILE = REPO / "bench" / "BASELINE"
ARMS = {
    "A": ("graph-section-first-v1", True),
    "B": ("graph-budget-first-v1", True),
    "C": ("graph-budget-first-v1", False),
}
"""Arm -> (policy, runs the v0.1.0 MCP server)."""


def baseline_commit() -> str:
    """The baseline commit id (first field of bench/BASELINE), checked to be in this clone.

    Fails the test (not skips it) with what is missing: CI runs on a full clone.
    """
    if not BASELINE_FILE.is_file():
        pytest.fail(f"{BASELINE_FILE} is missing: it names the v0.1.0 baseline commit the eval arms A and B run")
    commit = BASELINE_FILE.read_text(encoding="utf-8").split()[0]
    git = shutil.which("git")
    if git is None:
        pytest.fail("git is not on PATH: the eval tests extract the v0.1.0 baseline (bench/BASELINE) with git archive")
    found = subprocess.run(
        [git, "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], check=False, capture_output=True
    )
    if found.returncode != 0:
        pytest.fail(
            f"baseline commit {commit} (bench/BASELINE) is not in the git history of {REPO}: "
            "clone with full history (e.g. `git fetch --unshallow`) so the eval tests can build v0.1.0"
        )
    return commit


def build_baseline(root: Path, commit: str) -> Path:
    """A venv at `root` running `demarkus` from `commit`; returns its bin/demarkus."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    site_packages = Path(purelib)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", commit, "src/demarkus"], check=True, capture_output=True
    ).stdout
    unpacked = root / "archive"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(unpacked, filter="data")
        else:  # Python < 3.11.4; the archive comes from this repository's own history
            tar.extractall(unpacked)
    (unpacked / "src" / "demarkus").rename(site_packages / "demarkus")
    shutil.rmtree(unpacked)
    dependencies = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (site_packages / "demarkus-dependencies.pth").write_text("".join(f"{p}\n" for p in dependencies), encoding="utf-8")
    script = root / "bin" / "demarkus"
    script.write_text('#!/bin/sh\nexec "$(dirname "$0")/python" -I -m demarkus "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    return script


@pytest.fixture(scope="session")
def baseline_commit_id() -> str:
    return baseline_commit()


@pytest.fixture(scope="session")
def baseline_bin(tmp_path_factory: pytest.TempPathFactory, baseline_commit_id: str) -> Path:
    """bin/demarkus of a v0.1.0 environment (see the module docstring)."""
    return build_baseline(tmp_path_factory.mktemp("baseline-v0.1.0"), baseline_commit_id)


@pytest.fixture(scope="session")
def arms(tmp_path_factory: pytest.TempPathFactory, baseline_bin: Path) -> dict[str, Path]:
    """Arm name -> its run folder (report.json, report.md, chart.png)."""
    out: dict[str, Path] = {}
    for name, (policy, baseline) in ARMS.items():
        folder = tmp_path_factory.mktemp(f"arm-{name}") / "run"
        lines: list[str] = []
        config = RunConfig(
            world=demo_world_path(),
            output=folder,
            policy=policy,
            mcp_bin=str(baseline_bin) if baseline else None,
            echo=lines.append,
        )
        asyncio.run(run_eval(config))
        (folder.parent / "progress.log").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        out[name] = folder
    return out
