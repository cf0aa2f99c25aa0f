"""Obsidian's comments: text between `%%` marks, which the editor shows only while the
note is edited. Pure.

```
Shown. %%a reminder to myself%% Shown too.

%%
A block comment: every line up to the closing mark.
%%
```

A comment is not what the note says: imported, its words would answer searches and take a
lookup's room, and it may be what its author never meant to share. In a note read as the
editor writes it, comments are left out; a line that held nothing else goes with them.
Marks inside code (fenced or indented blocks, HTML blocks, code spans) are text, as the
editor shows them. A mark never closed is text too: the note keeps what follows it rather
than lose it to a stray `%%`.
"""

from __future__ import annotations

from ..markdown.rewrite import code_lines, code_spans, in_spans, split_lines

__all__ = ["drop_comments"]

MARK = "%%"


def drop_comments(text: str) -> str:
    """`text` without its comments (see the module docstring); `text` itself when it has
    none, or when only comments would be left: a note of comments only keeps them as its
    text, as a page of properties only does."""
    if MARK not in text:
        return text
    code = code_lines(text)
    out: list[str] = []
    held: list[str] = []  # the lines since a mark that is still open, as written
    before = ""  # the text before that mark, on its line
    for number, line in enumerate(split_lines(text)):
        if not held and (number in code or MARK not in line):
            out.append(line)
            continue
        kept, still_open = _outside(line, opened=bool(held))
        if still_open:
            before = before if held else kept
            held.append(line)
            continue
        kept = before + kept
        if kept.strip():
            out.append(kept)
        held, before = [], ""  # a line the comments took whole goes with them
    out.extend(held)  # never closed: text
    result = "".join(out)
    return result if result.strip() else text


def _outside(line: str, *, opened: bool) -> tuple[str, bool]:
    """The text of `line` outside comments (its ending included when the line ends outside
    one) and whether a comment is open at its end; `opened`: one is open where it starts.
    Outside a comment, a mark in a code span is text."""
    spans = [] if opened else code_spans(line)
    kept: list[str] = []
    at = 0
    while True:
        mark = line.find(MARK, at)
        while mark >= 0 and not opened and in_spans(mark, spans):
            mark = line.find(MARK, mark + 1)
        if mark < 0:
            if not opened:
                kept.append(line[at:])
            return "".join(kept), opened
        if not opened:
            kept.append(line[at:mark])
        opened = not opened
        at = mark + len(MARK)
