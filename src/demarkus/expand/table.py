"""The lookup table as values: parsed once from a LOOKUP body, named through the caller's
resolver, compacted for a budgeted lookup, rendered once. Pure.

```
# Lookup matches for "q" in /docs                    the heading: its scope is named

| Path | Importance | Title | Tags | Snippet |        the header (Snippet: a body match)
|------|------------|-------|------|---------|
| /docs/a.md#x | 0.80 | A › X | adr, leases | ... |  one row per match: an escaped path,
                                                       then `#anchor` unescaped
```
Cells keep their text as the authority wrote it (escaped); only the first cell is read,
once, by the one escape-aware scanner here. Everything around the table (the envelope,
failed-world notes) is kept line for line, so rendering an unnamed, uncompacted table
gives back the very text it was parsed from.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..render import escape_cell

DITTO = "″"
"""Stands, in a budgeted table, for the document title of the row above."""
HEADING = "# Lookup matches for "
_SCOPE = '" in /'


@dataclass(frozen=True, slots=True)
class TableRow:
    """One row: the document as the tools name it, the anchor, and the other cells as written."""

    document: str
    """A bare path from the authority, or, once named, `/a.md` locally and `mark://w/a.md` on the gateway."""
    anchor: str = ""
    cells: tuple[str, ...] = ()
    """Importance, title, tags and (body match) snippet, escaped as written."""

    @property
    def location(self) -> str:
        return f"{self.document}#{self.anchor}" if self.anchor else self.document

    @property
    def importance(self) -> float:
        try:
            return float(self.cells[0])
        except (IndexError, ValueError):
            return 0.0


@dataclass(frozen=True, slots=True)
class Table:
    """A lookup table and the lines around it."""

    before: tuple[str, ...]
    """Lines before the heading (the envelope, the blank line that opens the body)."""
    title: str
    """The heading up to its scope: `# Lookup matches for "q" in `."""
    scope: str
    between: tuple[str, ...]
    columns: tuple[str, ...]
    rule: str
    rows: tuple[TableRow, ...]
    after: tuple[str, ...]
    """Lines after the last row."""

    @classmethod
    def parse(cls, text: str) -> Table | None:
        """The table of a LOOKUP body (or of a tool text holding one); None when there is none."""
        lines = text.split("\n")
        heading = next((i for i, line in enumerate(lines) if line.startswith(HEADING) and _SCOPE in line), None)
        if heading is None:
            return None
        header = next((i for i in range(heading + 1, len(lines)) if lines[i].startswith("| Path |")), None)
        if header is None or header + 1 >= len(lines):
            return None
        end = header + 2
        while end < len(lines) and lines[end].startswith("| "):
            end += 1
        title, _, scope = lines[heading].rpartition(_SCOPE)
        return cls(
            before=tuple(lines[:heading]),
            title=title + _SCOPE[:-1],
            scope="/" + scope,
            between=tuple(lines[heading + 1 : header]),
            columns=tuple(_cells(lines[header])),
            rule=lines[header + 1],
            rows=tuple(_row(line) for line in lines[header + 2 : end]),
            after=tuple(lines[end:]),
        )

    @property
    def snippets(self) -> bool:
        """Whether it is a body-match table (it has a Snippet column)."""
        return bool(self.columns) and self.columns[-1].strip() == "Snippet"

    def named(self, name: Callable[[str], str]) -> Table:
        """The scope and every row's document as `name` calls them (the caller's resolver)."""
        rows = tuple(replace(row, document=name(row.document)) for row in self.rows)
        return replace(self, scope=name(self.scope), rows=rows)

    def compact(self) -> Table:
        """The table as a budgeted lookup prints it, so no byte is paid for twice and none
        for what the evidence does not need: without its Snippet column (the evidence
        blocks show that text) and its Tags column (filter keys such as `status:final,
        type:standards-track`, the same on most rows of a corpus; a stale document's block
        names its status), and with a row on the same document as the row above printing
        `″ › Heading` instead of repeating the document's title. A catalog table (no
        Snippet column) is returned as is."""
        if not self.snippets:
            return self
        rows: list[TableRow] = []
        above: tuple[str, str] | None = None  # document and title prefix of the row above
        for row in self.rows:
            cells = row.cells[:-2]  # importance and title
            if len(cells) == 2:
                title = cells[1].strip()
                if above is not None and above[0] == row.document and title.startswith(above[1]):
                    cells = (cells[0].strip(), f"{DITTO} › {title[len(above[1]) :]}")
                else:
                    above = (row.document, title.split(" › ", 1)[0] + " › ")
            rows.append(replace(row, cells=cells))
        pipes = _pipes(self.rule)
        rule = self.rule[: pipes[-3] + 1] if len(pipes) >= 3 else self.rule
        return replace(self, columns=self.columns[:-2], rule=rule, rows=tuple(rows))

    def render(self) -> str:
        rows = [
            _line([escape_cell(row.document) + (f"#{row.anchor}" if row.anchor else ""), *row.cells])
            for row in self.rows
        ]
        lines = [*self.before, self.title + self.scope, *self.between, _line(self.columns), self.rule]
        return "\n".join([*lines, *rows, *self.after])


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _row(line: str) -> TableRow:
    cells = _cells(line)
    location = cells[0] if cells else ""
    hashes = _unescaped(location, "#")
    path, anchor = (location[: hashes[0]], location[hashes[0] + 1 :]) if hashes else (location, "")
    return TableRow(_unescape(path), anchor, tuple(cells[1:]))


def _cells(line: str) -> list[str]:
    """The cells of a table line as written: escapes kept, the one space of padding on each
    side taken off."""
    bounds = [0, *_pipes(line)]
    return [_unpad(line[start + 1 : end]) for start, end in itertools.pairwise(bounds)]


def _unpad(cell: str) -> str:
    cell = cell[1:] if cell.startswith(" ") else cell
    return cell[:-1] if cell.endswith(" ") else cell


def _pipes(line: str) -> list[int]:
    """Offsets of the cell separators of a table line (its leading `|` excluded)."""
    return [index for index in _unescaped(line, "|") if index > 0]


def _unescaped(text: str, char: str) -> list[int]:
    """Offsets of `char` in `text` where no backslash escapes it: the one scanner."""
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


def _unescape(cell: str) -> str:
    out: list[str] = []
    chars = iter(cell)
    for ch in chars:
        out.append(next(chars, "") if ch == "\\" else ch)
    return "".join(out)
