"""MyST's cross-reference targets made links to the places they name. Pure.

MyST (Jupyter Book, Sphinx with myst-parser, mystmd) names a place with a target line
before it (or a block's attributes, `{#install-steps}`), and any note of the project
links to it by that name alone::

    (install-steps)=
    ## Installing

    See [the steps](#install-steps), [](install-steps), <project:#install-steps>
    or {ref}`install-steps`.

As written, such a link names no document: `#install-steps` is no heading of the note
that holds it, and `install-steps` no file. Each one whose name a note of the folder
declares becomes a link to that place, relative to the note that holds it: the section of
the heading right after the target line (`installing.md#installing`), or, when a
paragraph or a figure follows it, the section holding it. A link with no text, or an
autolink, takes the heading's text (MyST shows it so), else the name.

Names are matched as Sphinx matches them, ignoring case and runs of spaces. A `#name` is
first a target of the note itself, then a heading of it (the link stays as written), then
a target of another note; of two notes declaring one name, the first in path order.
MyST's `{ref}` role (`` {ref}`install-steps` ``, `` {ref}`the steps <install-steps>` ``),
which markdown reads as text, becomes a link to the target's place as well. A name no
note declares, the other roles, and anything in code or HTML stay as written.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import BadRequestError, DemarkusError
from ..markdown.frontmatter import split_frontmatter
from ..markdown.rewrite import (
    Spans,
    code_lines,
    code_spans,
    destination,
    in_spans,
    line_offsets,
    link_destinations,
    rewrite_outside_code,
    split_lines,
    swap_destinations,
)
from ..markdown.sections import Outline, explicit_id, parse_outline, shown_title
from .note import PerFolder, PerNote, document_path, read_file
from .site import relative_to

__all__ = ["FolderTargets", "NoteTargets", "Place", "Targets", "targets_in"]

_TARGET = re.compile(r" {0,3}(?:\((.+)\)=|\{#([^\s{}]+)[^{}]*\})[ \t]*(?:\r\n|\r|\n)?")
"""A target line: `(name)=` alone on its line (as MyST's parser reads one), or a block's
attributes naming its id, `{#name}` (MyST's `attrs_block`)."""
_PROJECT = "project:"
"""The scheme MyST gives a reference inside the project (`project:#name`)."""
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_EMPTY = re.compile(r"\[\]\(\s*(<[^<>\r\n]*>|[^\s()<>]+)\s*\)")
"""A link with no text: `[](#name)`."""
_AUTOLINK = re.compile(r"<project:#([^<>\s]+)>")
_ROLE = re.compile(r"\{ref\}`([^`\r\n]+)`")
"""MyST's `{ref}` role: `` {ref}`name` `` or `` {ref}`its text <name>` ``."""
_ROLE_TEXT = re.compile(r"(.*\S)\s+<([^<>]+)>")
_WANTED = re.compile(r"\]\(|\]:|<project:#|\{ref\}`")
"""A line that may hold a link to a target (a cheap test)."""


@dataclass(frozen=True, slots=True)
class Place:
    """Where a target leads: a note of the folder (its path there), a section of it ("": its
    top) and the text a link with none shows (the heading's, else "")."""

    file: str
    anchor: str
    title: str = ""


def targets_in(body: str, file: str = "") -> dict[str, Place]:
    """The targets `body` (a note's text after its frontmatter, the note at `file` in its
    folder) declares, by name as matched (`name_of`); the first of two alike."""
    if ")=" not in body and "{#" not in body:
        return {}
    lines = split_lines(body)
    found = [
        (number, match.group(1) or match.group(2))
        for number, line in enumerate(lines)
        if (match := _TARGET.fullmatch(line))
    ]
    if found:  # the body is parsed only for a note that may declare one
        code = code_lines(body)
        found = [(number, name) for number, name in found if number not in code]
    if not found:
        return {}
    outline = parse_outline(body.encode("utf-8"))
    starts = [section.start for section in outline.sections]
    offsets = line_offsets(lines)
    places: dict[str, Place] = {}
    for number, name in found:
        places.setdefault(name_of(name), _place(outline, starts, offsets, lines, number, file))
    return places


def _place(outline: Outline, starts: list[int], offsets: list[int], lines: list[str], number: int, file: str) -> Place:
    """The place of the target on `lines[number]`: the heading the next block opens, else
    the section holding the line."""
    after = number + 1
    while after < len(lines) and (not lines[after].strip() or _TARGET.fullmatch(lines[after])):
        after += 1
    if after < len(lines):
        at = bisect.bisect_left(starts, offsets[after])
        if at < len(starts) and starts[at] == offsets[after]:
            section = outline.sections[at]
            return Place(file, section.anchor, shown_title(section.title))
    at = bisect.bisect_right(starts, offsets[number]) - 1
    return Place(file, outline.sections[at].anchor if at >= 0 else "")


def name_of(written: str) -> str:
    """A target's name as matched: lower case, runs of spaces as one (Sphinx's rule)."""
    return " ".join(written.split()).lower()


def _named(reference: str) -> tuple[str, bool] | None:
    """(name, written with `#`) a link destination names a target by: `#name`,
    `project:#name`, or a bare `name` with no scheme and no fragment; None otherwise."""
    if reference.startswith(_PROJECT):
        reference = reference[len(_PROJECT) :]
        if not reference.startswith("#"):
            return None
    if reference.startswith("#"):
        return (reference[1:], True) if len(reference) > 1 else None
    if "#" in reference or reference.startswith("/") or _SCHEME.match(reference):
        return None
    return reference, False


@dataclass(frozen=True, slots=True)
class Targets:
    """The targets the folder's notes declare, and the document folder its files go under."""

    places: Mapping[str, Place]
    prefix: str = "/"

    def document(self, reference: str, path: str) -> tuple[str, str] | None:
        """(document path, anchor) of the target `reference` names; None when it names none."""
        named = _named(reference.strip())
        place = None if named is None else self.places.get(name_of(named[0]))
        return None if place is None else self._located(place)

    def relations(self, body: str, path: str) -> dict[str, list[tuple[str, str]]]:
        """Always `{}`: a target declares no relation."""
        return {}

    def localize(self, body: str, path: str) -> str:
        """`body` (of the document at `path`) with every link to a target made a link to
        its place; unchanged when there is none."""
        if not self.places and ")=" not in body and "{#" not in body:
            return body
        own = targets_in(body)
        headings = functools.cache(lambda: _anchors(body))

        def place(reference: str) -> Place | None:
            named = _named(reference)
            if named is None:
                return None
            name, hashed = named
            key = name_of(name)
            if key in own:
                return own[key]
            if hashed and name.lower() in headings():
                return None
            return self.places.get(key)

        def relative(reference: str) -> tuple[str, str] | None:
            found = place(reference)
            if found is None:
                return None
            if found in own.values():  # the note's own: a link to its section
                return "", found.anchor
            return relative_to(self._located(found), path)

        def line(text: str, spans: Spans) -> str:
            text = _roles(text, spans, place, relative)
            for shown in (_EMPTY, _AUTOLINK):  # the spans are found again after each change
                text = _titled(shown, text, code_spans(text), place, relative)
            return swap_destinations(text, code_spans(text), relative)

        # a body is parsed for its code blocks only when a link of it may name a target
        if _ROLE.search(body) is None and _AUTOLINK.search(body) is None:
            if all(place(reference) is None for reference in link_destinations(body)):
                return body
        return rewrite_outside_code(body, lambda text: _WANTED.search(text) is not None, line)

    def _located(self, place: Place) -> tuple[str, str] | None:
        try:
            return document_path(place.file, self.prefix), place.anchor
        except DemarkusError:
            return None


def _titled(
    pattern: re.Pattern[str],
    text: str,
    spans: Spans,
    place: Callable[[str], Place | None],
    relative: Callable[[str], tuple[str, str] | None],
) -> str:
    """`text` with each link to a target that shows no text (`[](#name)` for `_EMPTY`,
    `<project:#name>` for `_AUTOLINK`) outside its code `spans` written with its place's
    title as its text, else its name."""

    def fill(match: re.Match[str]) -> str:
        if in_spans(match.start(), spans):
            return match.group(0)
        reference = match.group(1).strip("<>") if pattern is _EMPTY else f"#{match.group(1)}"
        named, found, local = _named(reference), place(reference), relative(reference)
        written = None if local is None else destination(*local)
        if named is None or found is None or written is None:
            return match.group(0)
        return f"[{_escaped(found.title or named[0])}]({written})"

    return pattern.sub(fill, text)


def _roles(
    text: str,
    spans: Spans,
    place: Callable[[str], Place | None],
    relative: Callable[[str], tuple[str, str] | None],
) -> str:
    """`text` with each `{ref}` role naming a target, outside code spans, written as a link
    to its place: with the role's own text, else the place's title, else the name (as
    MyST shows it)."""

    def link(match: re.Match[str]) -> str:
        if in_spans(match.start(), spans):
            return match.group(0)
        inner = match.group(1).strip()
        given = _ROLE_TEXT.fullmatch(inner)
        shown, name = (given.group(1), given.group(2).strip()) if given else ("", inner)
        found, local = place(name), relative(name)  # a label, never a heading of the note
        written = None if local is None else destination(*local)
        if found is None or written is None:
            return match.group(0)
        return f"[{_escaped(shown or found.title or name)}]({written})"

    return _ROLE.sub(link, text)


def _escaped(text: str) -> str:
    """`text` fit to be a link's text: its brackets escaped."""
    return text.replace("[", "\\[").replace("]", "\\]")


def _anchors(body: str) -> set[str]:
    """The anchors of the note's headings and the ids they give themselves, lower case."""
    try:
        outline = parse_outline(body.encode("utf-8"))
    except BadRequestError:
        return set()
    found = {section.anchor.lower() for section in outline.sections}
    return found | {given for section in outline.sections if (given := explicit_id(section.title))}


class NoteTargets(PerNote[Mapping[str, Place]]):
    """The targets each note of a folder declares. A note that cannot be read declares none."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, lambda file: _targets(file, file.relative_to(folder).as_posix()))


def _targets(file: Path, relative: str) -> dict[str, Place]:
    try:
        data = read_file(file)
    except BadRequestError:
        return {}
    if b")=" not in data and b"{#" not in data:
        return {}
    try:
        return targets_in(split_frontmatter(data.decode("utf-8")).body, relative)
    except (BadRequestError, UnicodeDecodeError):
        return {}


class FolderTargets(PerFolder[dict[str, Place]]):
    """The targets of a folder's notes: of two notes declaring one name, the first in path
    order has it."""

    def __init__(
        self,
        list_notes: Callable[[], Iterable[str]],
        targets_of: Callable[[Sequence[str]], Mapping[str, Mapping[str, Place]]],
    ) -> None:
        super().__init__(list_notes)
        self._targets_of = targets_of

    def _gather(self, files: Sequence[str]) -> dict[str, Place]:
        places: dict[str, Place] = {}
        for _, found in sorted(self._targets_of(files).items()):
            for name, place in found.items():
                places.setdefault(name, place)
        return places
