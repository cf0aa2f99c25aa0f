"""Rewriting a body's text line by line outside code. Pure.

An importer that changes how links are written (`importer.site`, `importer.wikilink`)
must leave alone what markdown shows as text: fenced and indented code, HTML blocks and
code spans. Everything else, line endings included, comes back as it was.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator

from ..render import written_path
from .sections import parse_body

__all__ = [
    "Spans",
    "code_lines",
    "code_spans",
    "destination",
    "in_spans",
    "line_offsets",
    "link_destinations",
    "rewrite_outside_code",
    "split_lines",
    "swap_destinations",
]

Spans = list[tuple[int, int]]
"""Character ranges of a line's code spans: a match starting inside one is text."""

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
"""A line with its ending, as markdown-it counts lines (never at other characters
`str.splitlines` splits on)."""
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_TEXT_BLOCKS = frozenset({"fence", "code_block", "html_block"})
"""Blocks whose lines are text, not markdown: a link there is not a link."""
_UNLINKABLE = re.compile(r"[<>\t\n\r\f\v]")
"""Characters no link destination holds, even between `<` and `>`."""
_SPACED = re.compile(r"[ ()]")
"""Characters a link destination holds only between `<` and `>`."""
_INLINE = re.compile(r"(\]\(\s*<?)([^\s)<>]+)")
"""An inline link's destination, after `](` (and an optional `<`)."""
_DEFINITION = re.compile(r"^( {0,3}\[(?!\^)[^\]]+\]:[ \t]*<?)([^\s<>]+)")
"""A link reference definition's destination: `[label]: https://...` (a footnote's
`[^1]: text` is none)."""
_DESTINATIONS = re.compile(f"{_INLINE.pattern}|{_DEFINITION.pattern}", re.MULTILINE)


def rewrite_outside_code(body: str, wanted: Callable[[str], bool], rewrite: Callable[[str, Spans], str]) -> str:
    """`body` with `rewrite(line, code spans)` applied to each line outside code blocks and
    HTML blocks for which `wanted(line)` (a cheap test) holds; `body` itself when no line
    is wanted."""
    if not wanted(body):
        return body
    text_lines = code_lines(body)
    lines = split_lines(body)
    for number, line in enumerate(lines):
        if number not in text_lines and wanted(line):
            lines[number] = rewrite(line, code_spans(line))
    return "".join(lines)


def split_lines(body: str) -> list[str]:
    """The lines of `body`, each with its ending, numbered as markdown-it numbers them."""
    return [line for line in _LINE.findall(body) if line]


def line_offsets(lines: list[str]) -> list[int]:
    """The byte offset (UTF-8) at which each of `split_lines`' lines starts."""
    offsets, at = [], 0
    for line in lines:
        offsets.append(at)
        at += len(line.encode("utf-8"))
    return offsets


@functools.lru_cache(maxsize=4)
def code_lines(body: str) -> frozenset[int]:
    """Numbers of the lines of code blocks and HTML blocks in `body`. Kept for the last few
    bodies: an importer reads one body for its relations, then rewrites its links."""
    parsed = parse_body(body.encode("utf-8"), inline=False)
    return frozenset(
        line for token in parsed.tokens if token.type in _TEXT_BLOCKS and token.map for line in range(*token.map)
    )


def code_spans(line: str) -> Spans:
    """The character ranges of `line`'s code spans."""
    return [m.span() for m in _CODE_SPAN.finditer(line)]


def in_spans(position: int, spans: Spans) -> bool:
    """Whether `position` of a line lies inside one of its code spans."""
    return any(start <= position < end for start, end in spans)


def destination(path: str, fragment: str = "", *, bracketed: bool = False) -> str | None:
    """A link to `path` (relative, or `""` for the document itself) and its `#fragment` as a
    markdown destination: in the path, `%`, `#` and `?` escaped (a link is read with its
    escapes decoded, and would end its path there); between `<` and `>` when it holds a
    space or a parenthesis (unless it already stands between them, `bracketed`); None when
    no destination can hold it (a tab, a line break, `<` or `>`) or it is empty."""
    link = written_path(path) + (f"#{fragment}" if fragment else "")
    if not link or _UNLINKABLE.search(link):
        return None
    return f"<{link}>" if _SPACED.search(link) and not bracketed else link


def link_destinations(text: str) -> Iterator[str]:
    """Every destination `swap_destinations` would be given in `text`, code and all: a
    cheap look before `rewrite_outside_code` parses a body for its code blocks."""
    for match in _DESTINATIONS.finditer(text):
        yield match.group(2) or match.group(4)


def swap_destinations(line: str, spans: Spans, relative: Callable[[str], tuple[str, str] | None]) -> str:
    """`line` with each link destination (inline, or a reference definition's) outside its
    code spans for which `relative` gives a path (and fragment) written as that."""

    def swap(match: re.Match[str]) -> str:
        if in_spans(match.start(), spans):
            return match.group(0)
        local = relative(match.group(2))
        written = None if local is None else destination(*local, bracketed=match.group(1).endswith("<"))
        return match.group(0) if written is None else match.group(1) + written

    # a definition's destination opens its line, and what follows it is its title
    if _DEFINITION.match(line):
        return _DEFINITION.sub(swap, line, count=1)
    return _INLINE.sub(swap, line)
