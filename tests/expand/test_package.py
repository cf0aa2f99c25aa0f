"""The expansion package stays readable: small modules, each importing only the layers
before it (so the order of turns in select.py sits on top of everything else)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import demarkus.expand

PACKAGE = Path(demarkus.expand.__file__).parent
LAYERS = (
    "frames",
    "table",
    "parsecache",
    "document",
    "held",
    "relevance",
    "candidates",
    "ledger",
    "page",
    "show",
    "hop",
    "rows",
    "leftovers",
    "select",
)
MAX_LINES = 400


def test_every_module_is_a_layer_and_none_is_over_400_lines():
    modules = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules == set(LAYERS)
    for name in LAYERS:
        lines = (PACKAGE / f"{name}.py").read_text(encoding="utf-8").count("\n")
        assert lines <= MAX_LINES, f"expand/{name}.py has {lines} lines"


def test_a_module_imports_only_the_layers_before_it():
    for index, name in enumerate(LAYERS):
        tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                imported |= {node.module} if node.module else {alias.name for alias in node.names}
        later = imported - set(LAYERS[:index])
        assert not later, f"expand/{name}.py imports {sorted(later)}, which come after it"


def test_the_grammar_loads_without_the_selection():
    """The scorer and the oracle read results with `frames` only: their implementation
    hashes must not change when the selection does."""
    probe = "import sys, demarkus.expand.frames; print(sorted(m for m in sys.modules if m.startswith('demarkus.')))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['demarkus.expand', 'demarkus.expand.frames']"
