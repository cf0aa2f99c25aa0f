"""The expansion package stays readable: small modules, each importing only the layers
before it (so the order of turns in select.py sits on top of everything else)."""

from __future__ import annotations

import ast
from pathlib import Path

import demarkus.expand

PACKAGE = Path(demarkus.expand.__file__).parent
LAYERS = (
    "frames",
    "table",
    "document",
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
