"""Implementation hashes follow imports: on a tiny package made for the test (in tmp_path),
editing a module the entry imports changes the hash, editing one it does not import leaves
it as it was."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from demarkus.eval.errors import RunRefused
from demarkus.eval.implementation import MCP, entry_modules, files_hash, imported_files

TINY = {
    "__init__.py": "",
    "__main__.py": "raise SystemExit('the command ran')\n",
    "entry.py": "from . import used\n\n\ndef later():\n    from . import lazy\n",
    "used.py": "from .deep import VALUE\n",
    "deep.py": "VALUE = 1\n",
    "lazy.py": "LATER = 1\n",
    "unused.py": "UNUSED = 1\n",
}


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder of package `tiny`, importable by a fresh interpreter (PYTHONPATH)."""
    package = tmp_path / "site" / "tiny"
    package.mkdir(parents=True)
    for name, text in TINY.items():
        (package / name).write_text(text, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(package.parent))
    return package


def tiny_hash(entries: tuple[str, ...] = ("tiny.entry",)) -> str:
    return files_hash(*imported_files(sys.executable, "tiny", entries))


def test_the_files_are_those_the_entry_imports_at_any_depth(tiny: Path) -> None:
    root, files = imported_files(sys.executable, "tiny", ["tiny.entry"])
    assert root == tiny.resolve()
    assert sorted(path.name for path in files) == ["__init__.py", "deep.py", "entry.py", "used.py"]


def test_editing_an_imported_module_changes_the_hash_and_editing_another_does_not(tiny: Path) -> None:
    first = tiny_hash()
    assert tiny_hash() == first, "the same files hash the same"
    (tiny / "deep.py").write_text("VALUE = 2\n", encoding="utf-8")
    edited = tiny_hash()
    assert edited != first
    (tiny / "unused.py").write_text("UNUSED = 2\n", encoding="utf-8")
    (tiny / "lazy.py").write_text("LATER = 2\n", encoding="utf-8")
    assert tiny_hash() == edited, "lazy.py is imported only when later() runs; unused.py never"
    assert tiny_hash(("tiny.entry", "tiny.lazy")) != edited, "an entry of its own, it counts"


def test_a_main_module_is_located_not_run(tiny: Path) -> None:
    _, files = imported_files(sys.executable, "tiny", ["tiny.__main__"])
    assert sorted(path.name for path in files) == ["__init__.py", "__main__.py"]


def test_an_entry_the_interpreter_cannot_import_refuses_the_run(tiny: Path) -> None:
    with pytest.raises(RunRefused, match=r"cannot import tiny\.missing to hash them: ModuleNotFoundError"):
        imported_files(sys.executable, "tiny", ["tiny.missing"])


def test_the_mcp_part_is_what_the_mcp_command_imports() -> None:
    """The `mcp` command imports its server, tools and graph store inside the function."""
    root, files = imported_files(sys.executable, "demarkus", MCP)
    names = {path.relative_to(root).as_posix() for path in files}
    assert {"cli.py", "__main__.py", "mcp/server.py", "mcp/tools.py", "graph/__init__.py"} <= names
    assert "eval/runner.py" not in names and "server/quic.py" not in names
    assert entry_modules("oracle")["mcp"] == list(MCP)
    assert entry_modules("openai")["reader"] == ["demarkus.eval.openai_reader"]
