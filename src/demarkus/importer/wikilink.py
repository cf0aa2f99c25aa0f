"""Wiki links made markdown links to the notes they name. Pure.

Obsidian, Foam, Logseq and basic-memory join notes with wiki links, which markdown does
not read as links::

    After [[Segment log]] came [[adr/Replicated log#Failover|failover]].

Nothing in a store follows `[[...]]`: explore and backlinks see no edge. Imported with
`--wikilinks`, each one that names a note of the folder becomes a markdown link to it,
relative to the note that holds it::

    After [Segment log](<Segment log.md>) came [failover](<adr/Replicated log.md#failover>).

A name is matched as those editors match it: without `.md`, ignoring case, against a
note's file name, or against the end of its path when it holds a `/`, else against the
aliases a note's frontmatter gives it; of several notes so named, the one in the linking
note's folder, else the one with the shortest path, else the first in path order. A
GitHub wiki's links are read too: its page files have hyphens for spaces (`[[Getting
Started]]` names `Getting-Started.md` when no note is named with the spaces), and it
writes the text first (`[[the guide|Getting Started]]`: read so when the first part names
no note and the second does). `#Heading` becomes the heading's anchor (its slug; of two
headings alike, the first), `#^block` the anchor of the section holding that block
(`blockref`; dropped when the note declares no such block), `|alias` is the link's text,
else the link as written. A
Logseq block reference, `((634fb3ee-...))`, becomes a link to the section holding the
block with the block's first line as its text (Logseq shows the block in its place), and
so does an embedded block, `{{embed ((...))}}` or Obsidian's `![[note#^id]]`; a markdown
link to one, `[text](((...)))`, keeps its text. An embed of a note (`![[Segment log]]`,
Logseq's `{{embed [[Segment log]]}}`, which those editors show in place) becomes a link
too: a reader fetches what it needs once, where a copy would print the same text twice.
A name no note has (an embedded picture, `![[map.png]]`), a wiki link inside a markdown
link's text (markdown reads no link inside another) and anything in code or HTML stay as
written. A relation written as a wiki link (`related: "[[Segment log]]"`, as Obsidian's
properties hold links) names the document, and so does a list item that is a typed link,
as basic-memory writes relations in the body::

    - depends_on [[Segment log]] (for the offsets)

declares `rel-depends-on` to that note: the predicate is the words before the link, lower
case, with `_` and spaces as `-`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import DemarkusError
from ..markdown.rewrite import Spans, destination, in_spans, rewrite_outside_code
from ..markdown.sections import slugify
from .blockref import UUID, Block
from .note import PerFolder, document_path, note_name, page_name

__all__ = ["FolderNames", "Names", "WikiLinks"]

_WIKI = re.compile(r"(!?)\[\[([^\[\]\r\n]+)\]\](\(?)")
"""A wiki link: an embed's `!`, the text between the brackets, and a `(` right after
(then the brackets are the text of a markdown link, `[[1]](url)`, not a wiki link)."""
_REFERENCE = re.compile(
    rf"{_WIKI.pattern}"
    rf"|\{{\{{embed[ \t]+\(\(({UUID})\)\)[ \t]*\}}\}}"  # Logseq's embedded block
    rf"|\]\(\(\(({UUID})\)\)\)"  # a markdown link to a block: `[text](((id)))`
    rf"|\(\(({UUID})\)\)"  # a block reference
    r"|\{\{embed[ \t]+\[\[([^\[\]\r\n]+)\]\][ \t]*\}\}"  # Logseq's embedded page
)
"""A wiki link (groups 1 to 3), or a Logseq block's id as an embed (4), a link's
destination (5) or a reference (6), or the name in Logseq's embed of a page (7)."""
_RELATION = re.compile(
    r" {0,3}[-*+][ \t]+([A-Za-z][A-Za-z0-9_ -]{0,63}?)[ \t]+\[\[([^\[\]\r\n]+)\]\](?:[ \t]+\([^()\r\n]*\))?[ \t]*\r?\n?"
)
"""A list item that is a typed link: `- <predicate words> [[name]]`, then an optional
`(context)`; nothing else on the line."""
_LINK_TEXT_END = re.compile(r"[^\[\]\r\n]*\]\(")
"""What follows a wiki link inside a markdown link's text (`[see [[B]] too](url)`): no
bracket, then the `](` that ends the text; a link inside a link's text is no link."""
_PREDICATE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_ESCAPE = re.compile(r"([\\\[\]<>`])")
"""What a link's text escapes: its brackets, and what could open a code span or raw HTML
across the `](` that closes it."""


@dataclass(frozen=True, slots=True)
class Names:
    """The folder's notes (their files: relative `/`-separated paths, `b.md` or `b.mdx`) by
    every name a wiki link may give them: the end of their path without `.md`,
    lower-cased, from the file name alone to the whole path (and its page name,
    `note.page_name`: `a/b` for Logseq's `a___b.md`), and (when no file is so named) an
    alias its frontmatter gives it; each name's notes best first."""

    notes: Mapping[str, tuple[str, ...]]
    aliased: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    blocks: Mapping[str, Mapping[str, Block]] = field(default_factory=dict)
    """Each note's block ids (lower-cased) and their blocks (`blockref`)."""
    owners: Mapping[str, str] = field(default_factory=dict)
    """Each block id -> the note declaring it (a Logseq id names one block of the whole
    graph; of two notes declaring it, the one with the shortest path)."""

    @classmethod
    def of(
        cls,
        files: Iterable[str],
        aliases: Mapping[str, Sequence[str]] | None = None,
        blocks: Mapping[str, Mapping[str, Block]] | None = None,
    ) -> Names:
        named: dict[str, list[str]] = {}
        aliased: dict[str, list[str]] = {}
        owners: dict[str, str] = {}
        for file in sorted(files, key=lambda file: (file.count("/"), file)):  # shortest path first
            for block_id in (blocks or {}).get(file, {}):
                owners.setdefault(block_id, file)
            parts = note_name(file)[: -len(".md")].lower().split("/")
            for start in range(len(parts)):
                named.setdefault("/".join(parts[start:]), []).append(file)
            page = page_name(file).lower()  # Logseq's file for the page `a/b`: `a___b.md`
            if page != parts[-1]:
                named.setdefault(page, []).append(file)
            for alias in (aliases or {}).get(file, ()):
                key = _key(alias)
                if key and "/" not in key and file not in aliased.get(key, ()):
                    aliased.setdefault(key, []).append(file)
        return cls(
            {name: tuple(files) for name, files in named.items()},
            {name: tuple(files) for name, files in aliased.items()},
            {file: found for file, found in (blocks or {}).items() if found},
            owners,
        )

    def find(self, name: str, near: str) -> str | None:
        """The note `name` names, seen from the note at `near` (both relative to the folder)."""
        key = _key(name)
        # a GitHub wiki names a page's file with hyphens for its spaces (`Getting-Started.md`)
        found = self.notes.get(key) or self.aliased.get(key, ()) or self.notes.get(key.replace(" ", "-"), ())
        if not found:
            return None
        here = posixpath.dirname(near)
        return next((note for note in found if posixpath.dirname(note) == here), found[0])


def _key(name: str) -> str:
    return name.strip().strip("/").lower().removesuffix(".md")


class FolderNames(PerFolder[Names]):
    """A folder's `Names`, from its list of notes and each note's aliases and block ids."""

    def __init__(
        self,
        list_notes: Callable[[], Iterable[str]],
        aliases_of: Callable[[Sequence[str]], Mapping[str, Sequence[str]]] | None = None,
        blocks_of: Callable[[Sequence[str]], Mapping[str, Mapping[str, Block]]] | None = None,
    ) -> None:
        super().__init__(list_notes)
        self._aliases_of = aliases_of
        self._blocks_of = blocks_of

    def _gather(self, files: Sequence[str]) -> Names:
        return Names.of(
            files,
            self._aliases_of(files) if self._aliases_of else None,
            self._blocks_of(files) if self._blocks_of else None,
        )


@dataclass(frozen=True, slots=True)
class WikiLinks:
    """The folder's note names and the document folder its files go under."""

    names: Names
    prefix: str = "/"

    def document(self, reference: str, path: str) -> tuple[str, str] | None:
        """(document path, anchor) named by `reference` when it is one wiki link,
        `[[name]]`, seen from the document at `path`; None otherwise."""
        match = _WIKI.fullmatch(reference.strip())
        if match is None or match.group(1) or match.group(3):
            return None
        written, alias = _split(match.group(2))
        found = self._target(written, path) or (self._target(alias, path) if alias else None)
        if found is None:
            return None
        target, anchor, _ = found
        return target or path, anchor

    def relations(self, body: str, path: str) -> dict[str, list[tuple[str, str]]]:
        """The typed relations `body` (of the document at `path`) declares as list items
        `- <predicate> [[name]]`: predicate -> (document path, anchor) of each target, in
        order, each once. An item outside code whose name a note of the folder has, other
        than the document itself."""
        declared: dict[str, list[tuple[str, str]]] = {}

        def collect(line: str, spans: Spans) -> str:
            match = _RELATION.fullmatch(line)
            if match is None or in_spans(match.start(2), spans):
                return line
            predicate = "-".join(match.group(1).lower().replace("_", " ").replace("-", " ").split())
            target = self.document(f"[[{match.group(2)}]]", path)
            if _PREDICATE.fullmatch(predicate) and target is not None and target[0] != path:
                targets = declared.setdefault(predicate, [])
                if target not in targets:
                    targets.append(target)
            return line

        rewrite_outside_code(body, lambda text: "[[" in text, collect)
        return declared

    def localize(self, body: str, path: str) -> str:
        """`body` (of the document at `path`) with every wiki link to a note of the folder
        and every reference to a block one declares made a markdown link; unchanged when it
        holds none."""
        return rewrite_outside_code(body, _may_refer, lambda line, spans: self._line(line, spans, path))

    def _line(self, line: str, spans: Spans, path: str) -> str:
        def swap(match: re.Match[str]) -> str:
            if in_spans(match.start(), spans):
                return match.group(0)
            if match.group(7) is not None:  # `{{embed [[name]]}}`: as `![[name]]`
                return self._wiki_link(match.group(7), path, embedded=True) or match.group(0)
            if match.group(2) is None:
                return self._block_link(match, path)
            if match.group(3) or _LINK_TEXT_END.match(line, match.end()):
                return match.group(0)
            return self._wiki_link(match.group(2), path, embedded=bool(match.group(1))) or match.group(0)

        return _REFERENCE.sub(swap, line)

    def _wiki_link(self, inner: str, path: str, *, embedded: bool) -> str | None:
        """The markdown link a wiki link's `inner` text (`name#heading|alias`) makes from
        the document at `path`; None when it names no note of the folder, or no link can be
        written to it. An embedded block shows its text in place: its first line is the
        link's text."""
        written, alias = _split(inner)
        found = self._target(written, path)
        if found is None and alias:  # a GitHub wiki writes the text first: `[[text|Page name]]`
            found, written, alias = self._target(alias, path), alias, written
        if found is None:
            return None
        target, anchor, shown = found
        link = posixpath.relpath(target, posixpath.dirname(path)) if target else ""
        written_link = destination(link, anchor)
        if written_link is None:
            return None
        text = _ESCAPE.sub(r"\\\1", (alias or (shown if embedded else "") or written).strip())
        return f"[{text}]({written_link})"

    def _block_link(self, match: re.Match[str], path: str) -> str:
        """A Logseq block's id (`_REFERENCE`'s groups 4 to 6) as a link to the section
        holding the block, with the block's first line as its text (a link to a block
        keeps its own); as written when no note of the folder declares it."""
        embed, destination_of, reference = match.group(4, 5, 6)
        block_id = (embed or destination_of or reference).lower()
        note = self.names.owners.get(block_id)
        if note is None:
            return match.group(0)
        block = self.names.blocks[note][block_id]
        try:
            target = document_path(note, self.prefix)
        except DemarkusError:
            return match.group(0)
        link = "" if target == path and block.anchor else posixpath.relpath(target, posixpath.dirname(path))
        written_link = destination(link, block.anchor)
        if written_link is None:
            return match.group(0)
        if destination_of:
            return f"]({written_link})"
        text = _ESCAPE.sub(r"\\\1", block.label or page_name(note))
        return f"[{text}]({written_link})"

    def _target(self, written: str, path: str) -> tuple[str, str, str] | None:
        """(document path, or "" for the note itself; anchor; the block's first line, or
        "") of the link written `name#heading` (alias removed) in the document at `path`;
        `#^block` names the section holding that block."""
        name, _, heading = written.partition("#")
        last = heading.split("#")[-1].strip()
        near = path[len(self.prefix.rstrip("/")) + 1 :]
        note = self.names.find(name, near) if name.strip() else near
        if note is None:
            return None
        if last.startswith("^"):  # a block: the section holding it
            block = self.names.blocks.get(note, {}).get(last[1:].lower())
            anchor, label = (block.anchor, block.label) if block is not None else ("", "")
        else:
            anchor, label = slugify(last), ""
        if not name.strip():
            return ("", anchor, label) if anchor else None
        try:
            return document_path(note, self.prefix), anchor, label
        except DemarkusError:
            return None


def _may_refer(text: str) -> bool:
    """Whether `text` may hold a wiki link or a block's id (a cheap test)."""
    return "[[" in text or "((" in text


def _split(inner: str) -> tuple[str, str]:
    """(`name#heading`, alias) of a wiki link's text; `\\|` is the pipe of a link in a table."""
    written, _, alias = inner.replace("\\|", "|").partition("|")
    return written, alias
