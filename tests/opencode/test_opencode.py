"""OpenCode, the pinned release `scripts/bootstrap` installs, lists demarkus as connected from
the README's OpenCode snippet: a fresh home, no `OPENCODE_*` variables, no network, nothing
written outside its temporary directory (all checked under strace)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..e2e.processes import REPO
from ..snippets import DEMO_NOTES, DOCS, EXECUTABLE, read_snippets, substitute
from .syscalls import STRACE_OPTIONS, Trace, parse_trace

OPENCODE = REPO / ".venv" / "opencode" / "node_modules" / ".bin" / "opencode"
VERSION = json.loads((Path(__file__).with_name("package.json")).read_text(encoding="utf-8"))["dependencies"][
    "opencode-ai"
]
TIMEOUT = 120
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NOT_ON_DISK = ("/dev/null", "/dev/tty", "/dev/pts", "/proc")
"""Paths a process may write that leave nothing behind."""
PINNED_PLUGIN_LOCK = {"packages": {"": {"dependencies": {"@opencode-ai/plugin": VERSION}}}}


@dataclass(frozen=True)
class Isolated:
    """An OpenCode with nothing of this machine's: its own HOME and XDG directories, its
    own temporary directory and working directory, all under one temporary root."""

    root: Path
    env: dict[str, str]
    cwd: Path
    config: Path


def demarkus_command() -> Path:
    """The `demarkus` console script of the virtualenv running the tests (what a reader
    gets from `pip install`)."""
    command = Path(sys.executable).with_name("demarkus")
    assert command.exists(), f"no {command}: run scripts/bootstrap, which installs the package into .venv"
    return command


def isolate(root: Path) -> Isolated:
    """A fresh home for OpenCode under `root`. Two of OpenCode's background downloads are
    answered in advance, as a second run finds them, so that `opencode mcp list` needs no
    network: its model catalogue (`models.json`, refetched from models.opencode.ai when older
    than five minutes) and its plugin SDK (installed from the npm registry into a config
    directory whose `package-lock.json` does not list it yet)."""
    dirs = {name: root / name for name in ("home", "config", "data", "cache", "state", "tmp", "work")}
    for path in dirs.values():
        path.mkdir(parents=True)
    config = dirs["config"] / "opencode"
    (config / "node_modules").mkdir(parents=True)
    (config / "package-lock.json").write_text(json.dumps(PINNED_PLUGIN_LOCK), encoding="utf-8")
    (dirs["cache"] / "opencode").mkdir()
    (dirs["cache"] / "opencode" / "models.json").write_text("{}", encoding="utf-8")
    inherited = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENCODE", "XDG_", "DEMARKUS_")) and key not in ("HOME", "TMPDIR", "PWD")
    }
    env = {
        **inherited,
        "HOME": str(dirs["home"]),
        "XDG_CONFIG_HOME": str(dirs["config"]),
        "XDG_DATA_HOME": str(dirs["data"]),
        "XDG_CACHE_HOME": str(dirs["cache"]),
        "XDG_STATE_HOME": str(dirs["state"]),
        "TMPDIR": str(dirs["tmp"]),
        # Python's bytecode cache beside the checkout's sources is not OpenCode's doing
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return Isolated(root=root, env=env, cwd=dirs["work"], config=config / "opencode.json")


def run(args: list[str], isolated: Isolated) -> subprocess.CompletedProcess[str]:
    """Run in its own process group, killed whole (OpenCode and the MCP servers it started)
    if it outlives the timeout: a hang fails the test instead of stalling the suite."""
    proc = subprocess.Popen(
        args,
        cwd=isolated.cwd,
        env=isolated.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=10)
        raise AssertionError(
            f"{args[0]} did not finish in {TIMEOUT} s; stdout={stdout!r} stderr={stderr[-2000:]!r}"
        ) from None
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)


def opencode_mcp_list(config: dict[str, object], isolated: Isolated, strace: Path | None = None) -> str:
    """`opencode mcp list` with `config` as the user's opencode.json; its output without colours."""
    isolated.config.write_text(json.dumps(config, indent=2), encoding="utf-8")
    args = [str(OPENCODE), "mcp", "list"]
    if strace is not None:
        args = [str(strace), *STRACE_OPTIONS, "-o", str(isolated.root.parent / "strace.log"), *args]
    done = run(args, isolated)
    assert done.returncode == 0, f"opencode mcp list failed ({done.returncode}): {done.stdout}{done.stderr[-2000:]}"
    return ANSI.sub("", done.stdout)


@pytest.fixture(scope="module")
def opencode() -> Path:
    assert OPENCODE.exists(), f"no {OPENCODE}: scripts/bootstrap installs OpenCode from tests/opencode/package.json"
    return OPENCODE


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """A folder of markdown inside the test's directory (the demo world's sources): the MCP
    server imports it into a store under the fresh data directory, and nothing outside
    the test's directory may change."""
    return Path(shutil.copytree(DEMO_NOTES, tmp_path / "root" / "notes"))


def test_the_pinned_opencode_is_the_version_in_package_json(opencode: Path, tmp_path: Path):
    done = run([str(opencode), "--version"], isolate(tmp_path / "root"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == VERSION


def test_the_readme_snippets_start_one_command():
    commands = read_snippets().commands()
    assert commands["opencode"] == commands["mcpServers"] == commands["claude"], commands
    assert commands["opencode"][:2] == [EXECUTABLE, "mcp"]


def test_opencode_lists_demarkus_connected_from_the_readme_snippet_offline_and_contained(
    opencode: Path, notes: Path, tmp_path: Path
):
    strace = shutil.which("strace")
    assert strace, "strace is needed to watch OpenCode's files and sockets: apt-get install strace"
    isolated = isolate(notes.parent)
    config = substitute(read_snippets().opencode, {EXECUTABLE: str(demarkus_command()), DOCS: str(notes)})
    listed = opencode_mcp_list(config, isolated, strace=Path(strace))
    assert re.search(r"✓ demarkus\s+connected", listed), listed
    assert "1 server(s)" in listed, listed

    with (tmp_path / "strace.log").open(encoding="utf-8", errors="replace") as log:
        trace = parse_trace(log, cwd=str(isolated.cwd))
    assert_watched(trace, isolated, config["mcp"]["demarkus"]["command"][0])
    assert trace.internet() == [], f"OpenCode reached out: {trace.internet()}"
    outside = trace.changed_outside(str(isolated.root), *NOT_ON_DISK)
    assert outside == [], f"written outside {isolated.root}: {outside}"


def assert_watched(trace: Trace, isolated: Isolated, server: str) -> None:
    """The trace saw what it must have seen, so an empty verdict means something: OpenCode
    writing its database, and the MCP server it started."""
    assert trace.calls > 1000, f"only {trace.calls} calls traced"
    assert server in trace.executed, trace.executed
    data = str(Path(isolated.env["XDG_DATA_HOME"]) / "opencode")
    changed = sorted({change.path for change in trace.changes})
    assert any(path.startswith(data) for path in changed), changed[:50]


def test_opencode_ignores_the_mcp_servers_form(opencode: Path, notes: Path):
    """Why OpenCode has a snippet of its own: the generic form configures nothing there."""
    config = substitute(read_snippets().mcp_servers, {EXECUTABLE: str(demarkus_command()), DOCS: str(notes)})
    listed = opencode_mcp_list(config, isolate(notes.parent))
    assert "No MCP servers configured" in listed, listed
    assert "demarkus" not in listed, listed
