"""No module of the package imports itself back, directly or through others.

The import graph is read statically with `ast`, so a module need not be importable to be
checked. An edge goes from a module to every module of the package it names in an import
statement, wherever the statement stands (a function-level import runs too, only later);
`from X import n` names the submodule `X.n` when there is one, else `X`; relative imports
are resolved against the importing module's package. Imports under `if TYPE_CHECKING:` never
run and make no edge. The ancestors a module imports implicitly (the packages around it)
make no edge either: every module has them, and only an import the code asks for can be
moved to break a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of `package` under `root`."""
    modules: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement at or under `node`, except those only run for a type checker."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
        return
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        children: list[ast.AST] = list(node.orelse)
    else:
        children = list(ast.iter_child_nodes(node))
    for child in children:
        yield from _import_nodes(child)


def imports_of(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The modules of `modules` that module `name` (file `path`) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            if submodule in modules:
                found.add(submodule)
            elif base in modules:
                found.add(base)
    return found


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    modules = module_names(root, package)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle (first module repeated at the end) for every strongly connected group of
    modules that import each other, and for every module that imports itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(_cycle_in(graph, group) for group in groups)


def _cycle_in(graph: Mapping[str, set[str]], group: list[str]) -> list[str]:
    """The shortest cycle through the group's first module, by breadth-first search."""
    start, members = group[0], set(group)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for target in sorted(graph[node] & members):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if target not in previous:
                    previous[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {group}")


def write_package(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_walker_finds_cycles_through_function_level_and_relative_imports(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "def later():\n    from .sub.c import thing\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "from ..a import x\nthing = 1\n",
            "pkg/d.py": "import pkg.d\n",
        },
    )
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.b"] == {"pkg.sub.c"} and graph["pkg.sub.c"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"], ["pkg.d", "pkg.d"]]


def test_the_walker_ignores_imports_made_only_for_the_type_checker(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from typing import TYPE_CHECKING\nfrom . import b\n",
            "pkg/b.py": (
                "import typing\nif typing.TYPE_CHECKING:\n    from .a import A\nelse:\n    from . import c\n"
                "if TYPE_CHECKING:\n    import pkg.a\n"
            ),
            "pkg/c.py": "",
        },
    )
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.b"] == {"pkg.c"}
    assert cycles(graph) == []


def test_no_module_of_demarkus_is_part_of_an_import_cycle() -> None:
    found = cycles(import_graph(SRC, "demarkus"))
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)
