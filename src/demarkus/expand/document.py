"""A fetched document as evidence selection reads it, and the fetcher that gets it. Pure
given the fetch function.

A document is fetched once per lookup and its body parsed once per process (`parsecache.py`):
its outline, the offsets where a long range may be cut, and the relations it declares. Nothing about it changes after
that; what of it is on the page is the page's business (`page.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from ..errors import DemarkusError
from ..markdown import PREFERRED, Outline, parse_relations
from ..protocol import parse_mark_url
from . import frames
from .parsecache import PARSES

MAX_FETCHES = 10
"""Documents one lookup may fetch, rows and related targets together."""
PARSE_INLINE_MAX = 64 << 10
"""Bodies up to this size are parsed on the caller's event loop (about 6 ms here); a larger
one, not parsed before, is parsed on a worker thread (a 1 MiB body takes about 100 ms)."""


@dataclass(frozen=True, slots=True)
class Fetched:
    """A document as the caller's backend returned it."""

    path: str
    body: bytes
    version: int | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)


FetchFn = Callable[[str], Awaitable[Fetched]]
"""Fetch a document by location with the caller's own token; raises DemarkusError on failure."""


@dataclass(frozen=True, slots=True)
class FetchFailed:
    """A location that could not be read: the page says so in a note."""

    location: str
    reason: str

    @property
    def note(self) -> str:
        return f"{frames.word(self.location)}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Target:
    """A same-authority document a relation points to: where the one hop may go."""

    predicate: str
    location: str
    fragment: str


@dataclass(frozen=True, eq=False)
class Document:
    """A fetched document, parsed once. Identity is the object: one per location per lookup."""

    location: str
    """How rows name it: `/a.md` locally, `mark://world/a.md` on the gateway."""
    fetched: Fetched
    outline: Outline
    cuts: tuple[int, ...]
    """Where a long range may be cut (block and list item starts)."""
    relation_lines: str
    """One `rel:` frame per declared relation, as printed after its first block."""
    relation_count: int
    targets: tuple[Target, ...]
    """Same-authority targets of the preferred predicates, in preference order."""
    successors: tuple[str, ...] = ()
    """Targets of its `superseded-by` relations, named as frames name them."""
    stale: str = ""
    """What its first block's header carries when its text is stale: ` (superseded by ...)`
    or ` (withdrawn)`; "" for a current document."""

    def stale_said_by(self, source: Document, predicate: str) -> bool:
        """Whether reaching it from `source` through `predicate` already says it is stale:
        its only successor `supersedes` it."""
        return predicate == "supersedes" and bool(self.successors) and set(self.successors) <= {source.location}

    @classmethod
    def read(cls, location: str, fetched: Fetched) -> Document:
        """Parse a fetched body.

        Raises:
            BadRequestError: the body is not UTF-8 text.
        """
        parsed = PARSES.get(fetched.body)
        pinned = str(frames.Location(location, fetched.version or None))
        lines, targets, successors = _relations(location, pinned, fetched.metadata)
        stale = frames.stale(successors, _stale_status(fetched.metadata))
        return cls(
            location,
            fetched,
            parsed.outline,
            parsed.cuts,
            "".join(lines),
            len(lines),
            tuple(targets),
            tuple(successors),
            stale,
        )

    @property
    def body(self) -> bytes:
        return self.fetched.body

    def loc(self, anchor: str = "") -> str:
        """The location a frame prints: pinned to the version, with the anchor if any."""
        return str(frames.Location(self.location, self.fetched.version or None, anchor))

    def text(self, start: int, end: int) -> str:
        return self.body[start:end].decode("utf-8", errors="replace")


def _relations(location: str, pinned: str, metadata: Mapping[str, str]) -> tuple[list[str], list[Target], list[str]]:
    """One frame per declared relation; the targets on the same authority the hop may
    follow (preferred predicates only, in preference order); and its successors (the
    targets of `superseded-by`), named as the frames name them."""
    prefix = parse_mark_url(location).authority if location.lower().startswith("mark://") else ""
    relations, _ = parse_relations(metadata, location)
    lines: list[str] = []
    follow: list[Target] = []
    successors: list[str] = []
    for rel in relations:
        shown = str(frames.Location(rel.target if rel.authority else prefix + rel.target, None, rel.fragment))
        lines.append(frames.relation(pinned, rel.predicate, shown))
        if rel.predicate == "superseded-by":
            successors.append(shown)
        if rel.authority is None and rel.predicate in PREFERRED:
            follow.append(Target(rel.predicate, prefix + rel.target, rel.fragment))
    follow.sort(key=lambda target: PREFERRED.index(target.predicate))
    return lines, follow, successors


def _stale_status(metadata: Mapping[str, str]) -> str:
    """The document's status when it marks stale text (`status: withdrawn`, or a tag
    `status:superseded`), lowercase; "" otherwise."""
    statuses = [metadata.get("status", "")]
    statuses += [
        tag.strip()[len("status:") :]
        for tag in metadata.get("tags", "").split(",")
        if tag.strip().lower().startswith("status:")
    ]
    for status in statuses:
        word = status.strip().lower()
        if word in frames.STALE_STATUSES:
            return word
    return ""


class Fetcher:
    """At most MAX_FETCHES documents, each fetched once, failures remembered."""

    def __init__(self, fetch: FetchFn) -> None:
        self._fetch = fetch
        self._got: dict[str, Document | FetchFailed] = {}
        self.order: list[str] = []
        """Locations asked for, in order (each once)."""

    @property
    def count(self) -> int:
        return len(self.order)

    def known(self, location: str) -> bool:
        return location in self._got

    def exhausted(self) -> bool:
        return self.count >= MAX_FETCHES

    def unknown(self, locations: set[str]) -> int:
        """How many of `locations` have not been asked for yet."""
        return len(locations - self._got.keys())

    async def get(self, location: str) -> Document | FetchFailed:
        if location not in self._got:
            self.order.append(location)
            try:
                fetched = await self._fetch(location)
                if len(fetched.body) > PARSE_INLINE_MAX and not PARSES.holds(fetched.body):
                    # A long parse runs beside the event loop, so other callers are not held up.
                    self._got[location] = await asyncio.to_thread(Document.read, location, fetched)
                else:
                    self._got[location] = Document.read(location, fetched)
            except DemarkusError as exc:
                self._got[location] = FetchFailed(location, str(exc))
        return self._got[location]
