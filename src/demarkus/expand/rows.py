"""Reading a rendered lookup table back into rows, and the fetch seam expansion uses. Pure."""

from __future__ import annotations

import itertools
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


def _unescaped(text: str, char: str) -> list[int]:
    """Offsets of `char` in `text` where no backslash escapes it."""
    found: list[int] = []
    escaped = False
    for index, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == char:
            found.append(index)
    return found


def _split_location(cell: str) -> TableRow:
    """Split `escaped-path#anchor`: the anchor follows the first unescaped `#`."""
    hashes = _unescaped(cell, "#")
    if hashes:
        return TableRow(_unescape(cell[: hashes[0]]), cell[hashes[0] + 1 :])
    return TableRow(_unescape(cell))


def _pipes(line: str) -> list[int]:
    """Offsets of the cell separators of a table line (its leading `|` excluded)."""
    return [index for index in _unescaped(line, "|") if index > 0]


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
        pipes = _pipes(line)
        cell_end = pipes[0] - 1 if pipes else len(line)
        rows.append(_split_location(line[2:cell_end]))
    return rows


DITTO = "″"
"""Stands, in a budgeted table, for the document title or tags of the row above."""


def _cells(line: str) -> list[str]:
    """The cells of a table line as written (escapes kept, padding stripped)."""
    bounds = [0, *_pipes(line)]
    return [line[start + 1 : end].strip() for start, end in itertools.pairwise(bounds)]


def compact_table(table: str) -> str:
    """The lookup table as a budgeted lookup prints it, so no byte is paid for twice:
    without its Snippet column (the evidence blocks show that text), and with a row on the
    same document as the row above printing `″ › Heading` and `″` instead of repeating the
    document's title and tags. A catalog table (no Snippet column) is returned as is."""
    lines = table.split("\n")
    if not any(line.startswith("| Path |") and line.rstrip().endswith("| Snippet |") for line in lines):
        return table
    out: list[str] = []
    header_seen = False
    above: tuple[str, str, str] | None = None  # path, title prefix, tags of the row above
    for line in lines:
        if not line.startswith("|"):
            above = None  # a row is only ever compared with the row just above it
            out.append(line)
            continue
        pipes = _pipes(line)
        if len(pipes) >= 2:
            line = line[: pipes[-2] + 1]
        if line.startswith("| Path |"):
            header_seen = True
        elif line.startswith("| ") and header_seen:
            cells = _cells(line)
            if len(cells) == 4:
                path = _split_location(cells[0]).path
                if above is not None and above[0] == path and cells[2].startswith(above[1]) and cells[3] == above[2]:
                    line = f"| {cells[0]} | {cells[1]} | {DITTO} › {cells[2][len(above[1]) :]} | {DITTO} |"
                else:
                    above = (path, cells[2].split(" › ", 1)[0] + " › ", cells[3])
        out.append(line)
    return "\n".join(out)
