"""Sections of a markdown body: exact byte ranges, GitHub-style anchors, outline, opening.

A section starts at a heading line and runs to the next heading of the same or a
higher level (so it includes its sub-sections)::

    preface text      <- preamble: body[0 : first start], not a section
    # A               <- A.start
    text of A
    ## B              <- B.start = A.own_end        own_text(A) = body[A.start : A.own_end]
    text of B                                       text(A)     = body[A.start : A.end]
    # C               <- C.start = A.end = B.end = B.own_end
    text of C         <- C.end = C.own_end = len(body)

Headings are CommonMark ATX and setext headings (markdown-it-py `heading_open` tokens)
at the top level of the document or inside list items, where an outliner writes every
heading (Logseq's `- ## Usage`; a spec's `- #### name()`), as GitHub anchors them: never
`#` lines inside fenced or indented code or HTML blocks, nor inside blockquotes (a quoted
heading belongs to the quoted text, not to this document's outline). A heading in a list
item starts at the start of its line, marker included. Headings whose text is empty are
not sections; their bytes belong to the section before them.
A heading with text but an empty slug (`# !!!`, `# 🎉`) is anchored `section`
(`section-1`, ... when repeated), so every section stays addressable.

markdown-it reports 0-based *line* numbers; they are turned into byte offsets with a
table of line starts over the raw bytes, where a line ends at `\\r\\n`, `\\r` or `\\n`
(CommonMark's line endings, the same ones markdown-it normalises), never at the
other characters `str.splitlines()` splits on.

Speed: only the block structure is parsed, plus the inline text of headings that
need it; a 1 MiB document of mixed markdown takes about 0.3 s here. The cost is
markdown-it's block parser, so a pathological 0.8 MiB made of nothing but 100,000
headings takes about 2 s; made of 70,000 list items' headings (`- ## h1`), about 3 s, and
about 2 s when one list item holds them all (each token is walked once, see
`_block_starts`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from ..errors import BadRequestError

__all__ = [
    "Outline",
    "Section",
    "opening_paragraph",
    "outline_text",
    "parse_blocks",
    "parse_outline",
    "shown_title",
    "slugify",
]

EMPTY_SLUG_ANCHOR = "section"
"""Anchor of a heading whose slug is empty (`# !!!`, `# 🎉`): it still needs an
address, so it gets `section`, deduplicated like any other (`section-1`, ...)."""

_LINE_END = re.compile(rb"\r\n|\r|\n")
_PLAIN = re.compile(r"[^\n\\`*_\[\]!<&]*")
"""Heading text in which no CommonMark inline rule can fire: it is its own title."""


@dataclass(frozen=True, slots=True)
class Section:
    anchor: str
    """GitHub-style slug of the title, unique in the document."""
    title: str
    """Heading text with inline markup stripped."""
    level: int
    """1..6."""
    start: int
    """Byte offset of the start of the heading line."""
    end: int
    """Byte offset of the next heading of the same or a higher level, or the end of the body."""
    heading_end: int
    """Byte offset just after the heading line(s); for setext headings, after the underline."""
    own_end: int
    """Byte offset of the next heading of any level: the section without its sub-sections."""
    lines: int
    """Number of lines in [start, end); a final line without a line ending counts."""
    parent: str | None
    """Anchor of the enclosing section, None at the top."""
    in_list: bool = False
    """The heading sits in a list item (an outliner's bullet), not at the top level."""


@dataclass(frozen=True, slots=True)
class Outline:
    body: bytes
    sections: tuple[Section, ...]
    """In document order."""

    def find(self, anchor: str) -> Section | None:
        """The section named by `anchor`: `#` optional, case-insensitive; else by slugged
        text; else by the id its heading gives itself (`explicit_id`).

        `"#Problem-Statement"`, `"problem-statement"` and `"Problem Statement"` all find
        the section anchored `problem-statement`, and `"goals"` the one headed
        `## Aims {#goals}`.
        """
        wanted = anchor.strip().removeprefix("#")
        folded = wanted.lower()
        for section in self.sections:
            if section.anchor.lower() == folded:
                return section
        slug = slugify(wanted)
        for section in self.sections:
            if section.anchor == slug:
                return section
        for section in self.sections:
            if explicit_id(section.title) == folded:
                return section
        return None

    def text(self, section: Section) -> bytes:
        """The section with its sub-sections."""
        return self.body[section.start : section.end]

    def own_text(self, section: Section) -> bytes:
        """The section up to its first sub-section (or next heading of any level)."""
        return self.body[section.start : section.own_end]

    @property
    def preamble(self) -> bytes:
        """The bytes before the first section (the whole body when there is none)."""
        first = self.sections[0].start if self.sections else len(self.body)
        return self.body[:first]


_EXPLICIT_ID = re.compile(r"\{:?[ \t]*#([^\s{}]+)[^{}]*\}[ \t]*$")
"""`{#id}` closing a heading (`{#id .class}`, `{: #id }`)."""


def explicit_id(title: str) -> str | None:
    """The id a heading gives itself, lowercase: `## Aims {#goals}` is `goals`, as Pandoc,
    kramdown, Hugo, MkDocs, Docusaurus and VitePress write a heading's anchor, and as the
    documents of such a site link to it. The section keeps its GitHub-style anchor
    (`aims-goals`); the id also finds it.

    >>> explicit_id("计算属性缓存 vs 方法 {#computed-caching-vs-methods}")
    'computed-caching-vs-methods'
    """
    found = _EXPLICIT_ID.search(title)
    return found.group(1).lower() if found else None


def shown_title(title: str) -> str:
    """A heading's text as a site shows it: without the id it gives itself (`Aims` for
    `Aims {#goals}`), unless that is all it holds."""
    return _EXPLICIT_ID.sub("", title).strip() or title.strip()


def slugify(text: str) -> str:
    """GitHub-style slug: lowercase; Unicode letters, numbers, `_` and `-` kept; each
    whitespace character becomes `-`; everything else is dropped.

    >>> slugify("Problem Statement: v2 (draft)")
    'problem-statement-v2-draft'
    """
    out: list[str] = []
    for ch in text.lower():
        if ch in "_-":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
        elif unicodedata.category(ch)[0] in "LN":
            out.append(ch)
    return "".join(out)


def parse_outline(body: bytes) -> Outline:
    """Every heading of `body` (see the module docstring) as a `Section`, in document order.

    Raises:
        BadRequestError: `body` is not UTF-8.
    """
    return outline_from_parse(parse_body(body, inline=False))


def outline_text(outline: Outline, within: Section | None = None) -> str:
    """One line per section: `<2 spaces per (level-1)>- <title> (#<anchor>, <n> lines)`,
    the title as a site shows it (`shown_title`); with `within`, only the sections below
    that one, its children not indented."""
    sections, top = outline.sections, 1
    if within is not None:
        sections = tuple(s for s in sections if within.start < s.start and s.end <= within.end)
        top = within.level + 1
    return "".join(
        f"{'  ' * (s.level - top)}- {shown_title(s.title)} (#{s.anchor}, {s.lines} lines)\n" for s in sections
    )


def opening_paragraph(body: bytes) -> str:
    """The first top-level paragraph as raw markdown, trimmed; "" when there is none.

    Line endings inside the paragraph are normalised to `\\n`, because the result is
    text for a tool answer, not a byte range.

    Raises:
        BadRequestError: `body` is not UTF-8.
    """
    parsed = parse_body(body, inline=False)
    for token in parsed.tokens:
        if token.type == "paragraph_open" and token.level == 0 and token.map:
            first, last = token.map
            raw = body[parsed.line_starts[first] : parsed.line_starts[last]]
            return _LINE_END.sub(b"\n", raw).decode("utf-8").strip()
    return ""


def block_starts(body: bytes) -> list[int]:
    """Byte offsets where a top-level block or an item of a top-level list starts, in
    order: the places a long section can be cut without splitting a code fence, a
    table or a list item.

    Raises:
        BadRequestError: `body` is not UTF-8.
    """
    return _block_starts(parse_body(body, inline=False))


def parse_blocks(body: bytes) -> tuple[Outline, list[int]]:
    """`parse_outline` and `block_starts` from one parse (the parse is most of the cost).

    Raises:
        BadRequestError: `body` is not UTF-8.
    """
    parsed = parse_body(body, inline=False)
    return outline_from_parse(parsed), _block_starts(parsed)


def _block_starts(parsed: ParsedBody) -> list[int]:
    """A heading inside a list item is cut as a top-level one is: at its line, at each
    block after it in its item, and at each item of a list there (an outliner's bullets
    under a `- ## Usage`), up to the next heading, so no block runs across a section's
    start. Each token is walked once: up to the next heading, not to the item's end (one
    item holding thousands of headings would cost their square)."""
    tokens, offs = parsed.tokens, parsed.line_starts
    starts: set[int] = set()
    for token in tokens:
        if not token.map:
            continue
        if token.level == 0 or (token.type == "list_item_open" and token.level == 1):
            starts.add(offs[token.map[0]])
    for i, heading, lines in _headings(tokens):
        if not heading.level:
            continue
        starts.add(offs[lines[0]])
        for j in range(i + 3, len(tokens)):  # past heading_open, inline, heading_close
            token = tokens[j]
            if token.type == "heading_open" or (token.type == "list_item_close" and token.level < heading.level):
                break  # the next section's start, or the end of the heading's item
            if token.map and (
                token.level == heading.level or (token.type == "list_item_open" and token.level == heading.level + 1)
            ):
                starts.add(offs[token.map[0]])
    return sorted(starts)


def _headings(tokens: list[Token]) -> Iterator[tuple[int, Token, list[int]]]:
    """(index, `heading_open` token, its line map) of each heading of the outline: at the
    top level or in list items, none inside a blockquote."""
    quoted = 0
    for i, token in enumerate(tokens):
        if token.type == "blockquote_open":
            quoted += 1
        elif token.type == "blockquote_close":
            quoted -= 1
        elif token.type == "heading_open" and token.map and not quoted:
            yield i, token, token.map


# --- shared with links.py -----------------------------------------------------------------


class _DestinationsAsWritten(MarkdownIt):
    """CommonMark, but link destinations are kept as written (after backslash escapes and
    entities are decoded) instead of being percent-encoded for HTML: `café.md` stays
    `café.md`, so links and `rel-*` references resolve alike."""

    def normalizeLink(self, url: str) -> str:
        return url


# A leading `---` block is YAML front matter (a note written for Jekyll, Hugo or Obsidian,
# published as it is): part of the preamble, not a thematic break over a setext heading
# made of its keys.
_BLOCKS = MarkdownIt("commonmark").use(front_matter_plugin).disable("inline")
_FULL = _DestinationsAsWritten("commonmark").use(front_matter_plugin)
_FULL_BLOCKS = _DestinationsAsWritten("commonmark").use(front_matter_plugin).disable("inline")


@dataclass(frozen=True, slots=True)
class ParsedBody:
    """A body parsed by markdown-it, with the byte offset of every line start.

    `line_starts[i]` is the byte offset of 0-based line `i`; the last entry is always
    `len(body)`, so `line_starts[token.map[1]]` is valid for every block token.
    """

    body: bytes
    tokens: list[Token]
    env: dict[str, Any]
    line_starts: list[int]
    inline: bool
    """True when the inline children are parsed wherever a link can be (links need them)
    and for every heading."""


def parse_body(body: bytes, *, inline: bool) -> ParsedBody:
    """Parse `body`; with `inline=False` only the block structure (headings get their
    inline text parsed on demand by `outline_from_parse`); with `inline=True` also the
    inline text of headings and of the blocks holding a `[` or a `<`: a link (inline,
    reference or autolink) needs one, and most of a long document holds neither.

    Raises:
        BadRequestError: `body` is not UTF-8.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequestError(f"the body is not valid UTF-8 (byte {exc.start}); send markdown as UTF-8 text") from exc
    # A byte-order mark (files saved by some Windows editors) would make the first line
    # text rather than a heading; blocks are found by line, so dropping it moves no offset.
    text = text.removeprefix("\ufeff")
    env: dict[str, Any] = {}
    tokens = (_FULL_BLOCKS if inline else _BLOCKS).parse(text, env)
    if inline:
        for i, token in enumerate(tokens):
            if token.type == "inline" and (
                "[" in token.content or "<" in token.content or tokens[i - 1].type == "heading_open"
            ):
                token.children = []
                _FULL.inline.parse(token.content, _FULL, env, token.children)
    line_starts = [0]
    line_starts.extend(m.end() for m in _LINE_END.finditer(body))
    if line_starts[-1] != len(body):
        line_starts.append(len(body))
    return ParsedBody(body=body, tokens=tokens, env=env, line_starts=line_starts, inline=inline)


def outline_from_parse(parsed: ParsedBody) -> Outline:
    """Build the outline from a parse made by `parse_body`."""
    body, offs = parsed.body, parsed.line_starts
    # (level, title, start line, heading end line, in a list) of each non-empty heading
    found: list[tuple[int, str, int, int, bool]] = []
    tokens = parsed.tokens
    for i, token, lines in _headings(tokens):
        inline = tokens[i + 1]
        if parsed.inline:
            title = inline_text(inline.children or []).strip()
        elif _PLAIN.fullmatch(inline.content):
            title = inline.content.strip()
        else:
            children: list[Token] = []
            _BLOCKS.inline.parse(inline.content, _BLOCKS, parsed.env, children)
            title = inline_text(children).strip()
        if title:
            found.append((int(token.tag[1]), title, lines[0], lines[1], token.level > 0))

    last_line = len(offs) - 1
    # A section ends where the next heading of the same or a higher level starts.
    end_lines = [last_line] * len(found)
    open_: list[int] = []
    for k, (level, _, line, _, _) in enumerate(found):
        while open_ and found[open_[-1]][0] >= level:
            end_lines[open_.pop()] = line
        open_.append(k)

    anchors = _Anchors()
    sections: list[Section] = []
    ancestors: list[Section] = []
    for k, (level, title, line, head_end_line, in_list) in enumerate(found):
        while ancestors and ancestors[-1].level >= level:
            ancestors.pop()
        section = Section(
            anchor=anchors.take(slugify(title) or EMPTY_SLUG_ANCHOR),
            title=title,
            level=level,
            start=offs[line],
            end=offs[end_lines[k]],
            heading_end=offs[head_end_line],
            own_end=offs[found[k + 1][2]] if k + 1 < len(found) else len(body),
            lines=end_lines[k] - line,
            parent=ancestors[-1].anchor if ancestors else None,
            in_list=in_list,
        )
        sections.append(section)
        ancestors.append(section)
    return Outline(body=body, sections=tuple(sections))


def inline_text(children: list[Token]) -> str:
    """Text of inline tokens with the markup stripped: text, code spans, image alt text;
    line breaks become a space; raw HTML is dropped."""
    parts: list[str] = []
    for child in children:
        # text_special: an entity or backslash escape, already decoded (the core rule that
        # merges them into text does not run for headings parsed on demand)
        if child.type in ("text", "text_special", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(inline_text(child.children or []))
    return "".join(parts)


class _Anchors:
    """Hands out unique anchors: repeats get `-1`, `-2`, ...; generated ones count as taken
    ("Notes", "Notes", "Notes-1" -> notes, notes-1, notes-1-1)."""

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._counter: dict[str, int] = {}

    def take(self, slug: str) -> str:
        candidate = slug
        # Every suffix up to the counter is taken already, so resuming there gives the
        # same answer as searching from 1, without quadratic work on many repeats.
        while candidate in self._taken:
            self._counter[slug] = self._counter.get(slug, 0) + 1
            candidate = f"{slug}-{self._counter[slug]}"
        self._taken.add(candidate)
        return candidate
