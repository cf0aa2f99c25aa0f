"""Implementation hashes: which installed files each part of a run is made of.

A part is named by its entry modules. A fresh interpreter imports them and lists the
files of every module of the package then in `sys.modules`, so the hash covers exactly
the code the entries import, at any depth, and nothing they do not. A module imported only
inside a function is loaded when the function runs, not by the import, so a part names it
as an entry of its own. The hash is sha256 over (path relative to the package, bytes) of
those files.

- `server`: the QUIC server and the service behind it.
- `mcp`: what `demarkus mcp` runs: the CLI, the modules its `mcp` command imports when it
  runs, and the package's `__main__` (located, not run: running it starts the command).
  It is imported by the python beside `--mcp-bin` when one is given (a baseline venv).
- `runner`: the runner's own modules: those it imports that the server part does not
  (it starts that server in-process).
- `reader`: the reader's module, with what it imports.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from .errors import RunRefused

PACKAGE = "demarkus"
SERVER = ("demarkus.server.quic",)
MCP = ("demarkus.cli", "demarkus.mcp.server", "demarkus.graph", "demarkus.mcp.tools", "demarkus.__main__")
"""`demarkus.cli` imports the graph store, the MCP server and the tools inside its `mcp` command."""
RUNNER = ("demarkus.eval.runner",)
READERS = {
    "oracle": "demarkus.eval.oracle",
    "openai": "demarkus.eval.openai_reader",
    "opencode": "demarkus.eval.opencode_reader",
}
"""Reader kind -> the module that defines it."""

_PROBE = """
import importlib, importlib.util, json, os, sys
package, entries = sys.argv[1], sys.argv[2:]
located = []
for name in entries:
    if name.rpartition(".")[2] == "__main__":
        located.append(importlib.util.find_spec(name).origin)
    else:
        importlib.import_module(name)
root = os.path.dirname(os.path.realpath(importlib.import_module(package).__file__))
files = located + [
    getattr(module, "__file__", None) or ""
    for name, module in list(sys.modules.items())
    if name == package or name.startswith(package + ".")
]
print(json.dumps({"root": root, "files": sorted({os.path.realpath(f) for f in files if f})}))
"""


def imported_files(python: str, package: str, entries: Sequence[str]) -> tuple[Path, list[Path]]:
    """The root folder of `package` as `python` imports it, and the files of every module
    of `package` loaded once `entries` are imported there.

    Raises:
        RunRefused: `python` cannot import the entries (the message quotes its error).
    """
    return _finish(_start(python, package, entries))


def _start(python: str, package: str, entries: Sequence[str]) -> tuple[subprocess.Popen[str], str]:
    """A probe running in the background (several run at once: each pays for its imports)."""
    command = [python, "-c", _PROBE, package, *entries]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return process, f"{python} cannot import {', '.join(entries) or package} to hash them"


def _finish(probe: tuple[subprocess.Popen[str], str]) -> tuple[Path, list[Path]]:
    process, failure = probe
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise RunRefused(f"{failure}: no answer within 120 s") from None
    if process.returncode != 0:
        raise RunRefused(f"{failure}: {(err.strip().splitlines() or ['no output'])[-1]}")
    found = json.loads(out.strip().splitlines()[-1])
    return Path(found["root"]), [Path(name) for name in found["files"]]


def files_hash(root: Path, files: Iterable[Path]) -> str:
    """sha256 over (path relative to `root`, bytes) of `files`, in path order."""
    digest = hashlib.sha256()
    for path in sorted(set(files)):
        rel = path.relative_to(root).as_posix().encode()
        data = path.read_bytes()
        digest.update(len(rel).to_bytes(4, "big") + rel + len(data).to_bytes(8, "big") + data)
    return "sha256-" + digest.hexdigest()


def mcp_python(mcp_bin: str | None) -> str:
    """The interpreter whose `demarkus` the MCP command runs: the one beside `mcp_bin` (its
    own venv for a baseline), else this one.

    Raises:
        RunRefused: there is no python beside `mcp_bin`.
    """
    if mcp_bin is None:
        return sys.executable
    python = Path(mcp_bin).parent / "python"
    if not python.exists():
        raise RunRefused(f"--mcp-bin {mcp_bin}: no python beside it ({python}); pass a venv's bin/demarkus")
    return str(python)


def package_dir() -> Path:
    """The `demarkus` package folder this interpreter imports."""
    return Path(__file__).resolve().parent.parent


def mcp_package_dir(mcp_bin: str | None) -> Path:
    """The `demarkus` package folder the MCP command runs (its own venv for a baseline).

    Raises:
        RunRefused: there is no python beside `mcp_bin`, or it cannot import `demarkus`.
    """
    return imported_files(mcp_python(mcp_bin), PACKAGE, ())[0]


def entry_modules(reader_kind: str) -> dict[str, list[str]]:
    """Part -> its entry modules, as recorded in the run spec."""
    return {"server": list(SERVER), "mcp": list(MCP), "runner": list(RUNNER), "reader": [READERS[reader_kind]]}


def implementation_hashes(reader_kind: str, mcp_bin: str | None) -> dict[str, str]:
    """server, mcp, runner and reader hashes of a run with reader `reader_kind`.

    Raises:
        RunRefused: an interpreter cannot import a part's entries.
    """
    here, there = sys.executable, mcp_python(mcp_bin)
    probes = [
        _start(here, PACKAGE, SERVER),
        _start(there, PACKAGE, MCP),
        _start(here, PACKAGE, RUNNER),
        _start(here, PACKAGE, (READERS[reader_kind],)),
    ]
    try:
        (root, server), (mcp_root, mcp), (_, runner), (_, reader) = (_finish(probe) for probe in probes)
    finally:
        for process, _ in probes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    return {
        "server": files_hash(root, server),
        "mcp": files_hash(mcp_root, mcp),
        "runner": files_hash(root, set(runner) - set(server)),
        "reader": files_hash(root, reader),
    }
