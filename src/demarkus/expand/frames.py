"""The `>>>` frame grammar of a budgeted lookup: the one writer and the one parser. Pure.

After the table, every line that starts with `>>> ` is a frame:

```
>>> /a.md/v3#decision                                 a block: a blank line, the evidence, a blank line
>>> /b.md/v1 (via /a.md/v3 supersedes)                a related block, headed with the relation
>>> rel: /a.md/v3 supersedes /b.md                    one declared relation of an expanded document
>>> rel: /a.md/v3 declares 7 relations; fetch it to see them
>>> /a.md/v3#hashes: within /a.md/v3#checks above     a row already shown by an earlier block
>>> /c.md/v2#x: same text as /a.md/v3#y above         byte-identical text printed once
>>> note: did not fit: /d.md#x (~120 tokens) +2 more  what did not fit, with its size
>>> note: fetch limit of 10 documents reached; 2 not fetched
>>> note: expanded 2 of 3 rows and 1 related document; used 1432 of 1500 tokens
>>> note: weak match: the best row holds 1 of ...  the only line after a weak match's table
>>> note: ...                                         any other note (a failed fetch, a missing anchor)
```
Inside a block, `[…]` stands where text of its section is left out, `[#anchor shown
above]` and `[#anchor: same text as LOC above]` where an earlier block already shows it,
`[sub-sections not shown: #a, #b]` after a section printed without them, and a last line
`[… ~N tokens more: fetch LOC]` says how much of the block's range is not shown. A line
of evidence that starts with `>>>`, after any spaces, is written with one more leading
space (the parser takes it off again), so a frame is never forged by the text it frames
and every line reads back as it was. The location of a frame is
its first word; a location holding whitespace is written in angle brackets, as markdown
writes such a link (`</pages/My note.md/v1#usage>`), and is still one word.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

FRAME = ">>> "
STALE_STATUSES = ("superseded", "withdrawn", "replaced")
"""Statuses (the `status` key or a `status:` tag) under which a document is stale text."""
ELIDED = "[…]"
"""Where an excerpt leaves out text of its section."""

_GUARD = re.compile(r"(?m)^(?= *>>>)")
_GUARDED = re.compile(r" +>>>")
_SPACE = re.compile(r"\s")
_WORD = r"(?:<[^<>\n]*>|[^\s<]\S*)"
"""One location as frames write it: a bare word, or in angle brackets when it holds whitespace."""
_FIRST = re.compile(_WORD + ":?")
_VERSIONED = re.compile(r"\A(.+?)/v([1-9][0-9]*)\Z")
_VIA = re.compile(rf"\A({_WORD}) \(via ({_WORD}) (\S+)\)\Z")
_STALE = re.compile(r"\A(.+?) \((superseded by [^()]+|" + "|".join(STALE_STATUSES) + r")\)\Z")
_STUB = re.compile(rf"\A({_WORD}): (within|same text as) ({_WORD}) above\Z")
_UNLISTED = re.compile(rf"\Arel: ({_WORD}) declares ([0-9]+) relations; fetch it to see them\Z")
_RELATION = re.compile(rf"\Arel: ({_WORD}) ?(\S*) ?(.*)\Z")
_OMITTED = re.compile(rf"({_WORD}) \(~([0-9]+) tokens\)")
_TARGETS = re.compile(r"<[^<>\n]*>|[^\s,<](?:[^\s,]|,(?!\s))*")
_OMITTED_MORE = re.compile(r" \+([0-9]+) more\Z")
_OMITTED_COUNT = re.compile(r"\A([0-9]+) blocks?\Z")
_HIDDEN = re.compile(r"^\[sub-sections not shown: (#\S+(?:, #\S+)*)\]$", re.M)
_FETCH_LIMIT = re.compile(r"\Afetch limit of ([0-9]+) documents reached; ([0-9]+) not fetched\Z")
_CLOSING = re.compile(
    r"\Aexpanded ([0-9]+) of ([0-9]+) rows(?: and ([0-9]+) related documents?)?; used ([0-9]+) of ([0-9]+) tokens\Z"
)


# --- locations --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Location:
    """A frame's location: `path[/vN][#anchor]`, where the path may be a mark:// URL."""

    path: str
    version: int | None = None
    anchor: str = ""

    @classmethod
    def parse(cls, word: str) -> Location:
        if word.startswith("<") and word.endswith(">"):
            word = word[1:-1]
        location, _, anchor = word.partition("#")
        found = _VERSIONED.match(location)
        if found is None:
            return cls(location, None, anchor)
        return cls(found.group(1), int(found.group(2)), anchor)

    def __str__(self) -> str:
        pinned = f"{self.path}/v{self.version}" if self.version is not None else self.path
        return word(f"{pinned}#{self.anchor}" if self.anchor else pinned)


def targets(text: str) -> list[str]:
    """The locations a relation's target names: one, or several separated by `, `."""
    return _TARGETS.findall(text)


def word(location: str) -> str:
    """A location as frames write it: in angle brackets when it holds whitespace (once)."""
    if _SPACE.search(location) is None or location.startswith("<") and location.endswith(">"):
        return location
    return f"<{location}>"


# --- frames as values -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    """Evidence text of `location`; `via` is `(source, predicate)` for a related document."""

    location: Location
    text: str
    via: tuple[Location, str] | None = None
    stale: str = ""
    """The document's stale marker: `superseded by ...` or its status; "" for current text."""


@dataclass(frozen=True, slots=True)
class Relation:
    """One relation the subject declares; `target` as written (it may carry a #fragment
    or name another authority)."""

    subject: Location
    predicate: str
    target: str


@dataclass(frozen=True, slots=True)
class Unlisted:
    """The subject declares `count` relations that did not fit."""

    subject: Location
    count: int


@dataclass(frozen=True, slots=True)
class Within:
    """A row whose whole range the earlier block `covering` already shows."""

    location: Location
    covering: Location


@dataclass(frozen=True, slots=True)
class SameText:
    """A range whose text is byte-identical to the earlier block `first`."""

    location: Location
    first: Location


@dataclass(frozen=True, slots=True)
class Omitted:
    """What did not fit: `(location, tokens)` for the ones named, and how many more."""

    named: tuple[tuple[Location, int], ...]
    more: int


@dataclass(frozen=True, slots=True)
class FetchLimit:
    limit: int
    not_fetched: int


@dataclass(frozen=True, slots=True)
class Closing:
    """The last frame: how many rows and related documents printed, and the tokens used."""

    expanded: int
    rows: int
    related: int
    used: int
    budget: int


@dataclass(frozen=True, slots=True)
class Note:
    """Any other note: a failed fetch, a missing anchor, a table too large."""

    text: str


Frame = Block | Relation | Unlisted | Within | SameText | Omitted | FetchLimit | Closing | Note


# --- the writer -------------------------------------------------------------------------


def block(header: str, text: str) -> str:
    """A block frame: `header` is the location, followed by `(via ...)` for a related one."""
    return f"{FRAME}{header}\n\n{_GUARD.sub(' ', text).strip(chr(10))}\n\n"


def via(source: str, predicate: str) -> str:
    """What follows a related block's location."""
    return f" (via {source} {predicate})"


def stale(successors: Sequence[str], status: str) -> str:
    """What follows the header of a stale document's first block: its successors when it
    names them, else its status; "" for a current document."""
    if successors:
        return f" (superseded by {', '.join(successors)})"
    return f" ({status})" if status else ""


def line(text: str) -> str:
    return f"{FRAME}{text}\n"


def relation(subject: str, predicate: str, target: str) -> str:
    return line(f"rel: {subject} {predicate} {target}")


def unlisted(subject: str, count: int) -> str:
    return line(f"rel: {subject} declares {count} relations; fetch it to see them")


def within(location: str, covering: str) -> str:
    return line(f"{location}: within {covering} above")


def same_text(location: str, first: str) -> str:
    return line(f"{location}: same text as {first} above")


def note(text: str) -> str:
    return line(f"note: {text}")


def omission_label(location: str, tokens: int) -> str:
    """One entry of the omission note; `location` as rows and relations name it."""
    return f"{word(location)} (~{tokens} tokens)"


def omitted(labels: Sequence[str], count: int) -> str:
    """The omission note: the first `labels`, and how many of `count` are left unnamed."""
    more = count - len(labels)
    if labels:
        items = ", ".join(labels) + (f" +{more} more" if more else "")
    else:
        items = f"{more} block{'s' if more != 1 else ''}"
    return note(f"did not fit: {items}")


def weak_match(held: int, asked: int) -> str:
    return note(
        f"weak match: the best row holds {held} of the query's {asked} informative words; "
        "no evidence printed (the documents may not hold the answer: fetch a row to check, or ask with other words)"
    )


def fetch_limit(limit: int, not_fetched: int) -> str:
    return note(f"fetch limit of {limit} documents reached; {not_fetched} not fetched")


def closing(expanded: int, rows: int, related: int, used: int, budget: int) -> str:
    clause = f" and {related} related document{'s' if related != 1 else ''}" if related else ""
    return note(f"expanded {expanded} of {rows} rows{clause}; used {used} of {budget} tokens")


def shown_above(anchor: str) -> str:
    """Stands, inside a block, for an earlier block of the same document."""
    return f"[#{anchor} shown above]"


def same_text_above(anchor: str, first: str) -> str:
    """Stands, inside a block, for a section whose text an earlier block printed."""
    return f"[#{anchor}: same text as {first} above]"


def subsections_not_shown(anchors: Sequence[str]) -> str:
    return "[sub-sections not shown: " + ", ".join(f"#{anchor}" for anchor in anchors) + "]"


def rest(tokens: int, location: str) -> str:
    """The last line of a block that does not show all of its range."""
    return f"[… ~{tokens} tokens more: fetch {location}]"


# --- the parser -------------------------------------------------------------------------


def parse(text: str) -> list[Frame]:
    """Every frame of a lookup result, in order; lines before the first frame (the
    envelope and the table) are not frames."""
    frames: list[Frame] = []
    header: str | None = None
    lines: list[str] = []

    def close() -> None:
        if header is not None:
            frames.append(_block(header, "\n".join(lines).strip("\n")))

    for raw in text.split("\n"):
        if raw.startswith(FRAME):
            close()
            header, lines = None, []
            word = raw[len(FRAME) :]
            if _is_line(word):
                frames.append(_line(word))
            else:
                header = word
        elif header is not None:
            lines.append(raw[1:] if _GUARDED.match(raw) else raw)
    close()
    return frames


def hidden_subsections(block: Block) -> list[Location]:
    """The sub-sections `block` names as not shown (`[sub-sections not shown: #a, #b]`),
    as locations in the block's document and version, in order."""
    return [
        Location(block.location.path, block.location.version, anchor[1:])
        for found in _HIDDEN.finditer(block.text)
        for anchor in found.group(1).split(", ")
    ]


def blocks(text: str) -> list[Block]:
    """The evidence blocks of a lookup result, in order."""
    return [frame for frame in parse(text) if isinstance(frame, Block)]


def _is_line(word: str) -> bool:
    found = _FIRST.match(word)
    first = found.group() if found else word
    return first in ("note:", "rel:") or first.endswith(":")


def _block(header: str, text: str) -> Block:
    marker = _STALE.match(header)
    if marker is not None:
        header = marker.group(1)
    found = _VIA.match(header)
    via = None if found is None else (Location.parse(found.group(2)), found.group(3))
    location = Location.parse(header if found is None else found.group(1))
    return Block(location, text, via, marker.group(2) if marker is not None else "")


def _line(word: str) -> Frame:
    if word.startswith("note: "):
        return _note(word[len("note: ") :])
    found = _UNLISTED.match(word)
    if found is not None:
        return Unlisted(Location.parse(found.group(1)), int(found.group(2)))
    found = _RELATION.match(word)
    if found is not None:
        subject, predicate, target = found.groups()
        return Relation(Location.parse(subject), predicate, target)
    found = _STUB.match(word)
    if found is not None:
        location, other = Location.parse(found.group(1)), Location.parse(found.group(3))
        return Within(location, other) if found.group(2) == "within" else SameText(location, other)
    return Note(word)


def _note(text: str) -> Frame:
    if text.startswith("did not fit: "):
        items = text[len("did not fit: ") :]
        count = _OMITTED_COUNT.match(items)
        if count is not None:
            return Omitted((), int(count.group(1)))
        more = _OMITTED_MORE.search(items)
        named = tuple((Location.parse(m.group(1)), int(m.group(2))) for m in _OMITTED.finditer(items))
        return Omitted(named, int(more.group(1)) if more else 0)
    found = _FETCH_LIMIT.match(text)
    if found is not None:
        return FetchLimit(int(found.group(1)), int(found.group(2)))
    found = _CLOSING.match(text)
    if found is not None:
        expanded, rows, related, used, budget = found.groups()
        return Closing(int(expanded), int(rows), int(related or 0), int(used), int(budget))
    return Note(text)
