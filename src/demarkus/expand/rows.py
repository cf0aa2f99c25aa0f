"""Reading a rendered lookup table back into rows, and the fetch seam expansion uses. Pure."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class TableRow:
    """One data row of a lookup table: where it points."""

    path: str
    anchor: str = ""


@dataclass(frozen=True, slots=True)
class Fetched:
    """A document as the caller's backend returned it."""

    path: str
    body: bytes
    version: int | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)


FetchFn = Callable[[str], Awaitable[Fetched]]
"""Fetch a document by path with the caller's own token; raises DemarkusError on failure."""


def _unescape(cell: str) -> str:
    out: list[str] = []
    chars = iter(cell)
    for ch in chars:
        if ch == "\\":
            out.append(next(chars, ""))
        else:
            out.append(ch)
    return "".join(out)


def _split_location(cell: str) -> TableRow:
    """Split `escaped-path#anchor`: the anchor follows the first unescaped `#`."""
    escaped = False
    for index, ch in enumerate(cell):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "#":
            return TableRow(_unescape(cell[:index]), cell[index + 1 :])
    return TableRow(_unescape(cell))


def table_rows(table: str) -> list[TableRow]:
    """The first cell of every data row, in table (rank) order."""
    rows: list[TableRow] = []
    header_seen = False
    for line in table.splitlines():
        if not line.startswith("| "):
            continue
        if not header_seen:
            header_seen = True
            continue
        if line.startswith("|--") or line.startswith("|-"):
            continue
        first = line[2:]
        end = 0
        escaped = False
        while end < len(first):
            ch = first[end]
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif first.startswith(" | ", end) or first.startswith(" |", end) and end + 2 == len(first):
                break
            end += 1
        rows.append(_split_location(first[:end]))
    return rows


def _cells_end(line: str) -> list[int]:
    """Offsets of the unescaped ` | ` cell separators of a table line."""
    seps: list[int] = []
    escaped = False
    for index, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "|" and index > 0:
            seps.append(index)
    return seps


def drop_snippets(table: str) -> str:
    """The table without its Snippet column: with a budget, the evidence blocks show the
    text a snippet would preview, so the column would print the same bytes twice."""
    lines = table.split("\n")
    if not any(line.startswith("| Path |") and line.rstrip().endswith("| Snippet |") for line in lines):
        return table
    out: list[str] = []
    for line in lines:
        if line.startswith("|"):
            seps = _cells_end(line)
            if len(seps) >= 2:
                line = line[: seps[-2] + 1]
        out.append(line)
    return "\n".join(out)
