"""Typed relations declared in metadata: `rel-<predicate>: ref, ref, ...`.

    rel-supersedes: /adr/0002-metadata-alignment.md
    rel-depends-on: /architecture.md, mark://other-world/spec.md#api

Each reference resolves against the document's own path or URL exactly like a body
link (`links.resolve_target`). Bad references are reported, never raised, so one
sloppy document cannot fail a crawl or a load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from ..errors import BadRequestError
from ..protocol import SCHEME, parse_mark_url
from .links import Target, resolve_target

__all__ = [
    "EMPTY_PREDICATE",
    "EXTERNAL_REFERENCE",
    "INVALID_MARK_URL",
    "PREFERRED",
    "REL_PREFIX",
    "SELF_REFERENCE",
    "WHITESPACE_IN_REFERENCE",
    "Relation",
    "RejectedRelation",
    "parse_relations",
    "written_reference",
]

REL_PREFIX = "rel-"

PREFERRED = ("supersedes", "superseded-by", "depends-on", "implements", "derived-from")
"""Predicates that carry evidence rather than navigation, in preference order."""

EMPTY_PREDICATE = "empty predicate"
WHITESPACE_IN_REFERENCE = "whitespace in reference"
SELF_REFERENCE = "self reference"
EXTERNAL_REFERENCE = "external reference"
"""An `http:`, `mailto:` ... reference: a relation links documents, not web pages."""
INVALID_MARK_URL = "invalid mark URL"
"""A mark:// reference without a host or with a bad port."""


_UNWRITABLE = re.compile(r"[\s,%#?]")
"""What the path of a reference in a `rel-*` value cannot hold as itself: whitespace
(refused), a comma (it separates references), `%` (it starts an escape), `#` and `?`
(they end the path)."""


def written_reference(path: str, fragment: str = "") -> str:
    """A document path and its `#fragment` as a `rel-*` value holds them: in the path,
    whitespace, commas, `%`, `#` and `?` percent-escaped, which resolving decodes again
    (`/notes/My note.md` is written `/notes/My%20note.md`)."""
    written = _UNWRITABLE.sub(lambda match: quote(match.group(), safe=""), path)
    return written + (f"#{fragment}" if fragment else "")


@dataclass(frozen=True, slots=True)
class Relation:
    predicate: str
    """Without the `rel-` prefix."""
    target: str
    """Bare path (same authority) or canonical mark:// URL (other authority); no fragment."""
    fragment: str
    """"" or the anchor after `#`."""
    authority: str | None
    """None for the document's own authority, else `mark://host[:port]`."""
    raw: str
    """The reference as written (trimmed)."""


@dataclass(frozen=True, slots=True)
class RejectedRelation:
    key: str
    value: str
    """The whole value for an empty predicate, else the one rejected reference."""
    reason: str


def parse_relations(metadata: Mapping[str, str], base: str) -> tuple[list[Relation], list[RejectedRelation]]:
    """The relations declared in `metadata` by the document at `base`, and the rejects.

    Keys are read in sorted order, references in written order; empty pieces (a
    trailing comma) are skipped; a repeated (predicate, target, fragment) is kept once.

    Raises:
        BadRequestError: `base` is a malformed mark:// URL.
    """
    if base.lower().startswith(f"{SCHEME}://"):
        own_path = parse_mark_url(base).path
    else:
        own_path = base.partition("#")[0]
    relations: list[Relation] = []
    rejected: list[RejectedRelation] = []
    seen: set[tuple[str, str, str]] = set()
    for key in sorted(metadata):
        if not key.startswith(REL_PREFIX):
            continue
        value = metadata[key]
        predicate = key[len(REL_PREFIX) :]
        if not predicate:
            rejected.append(RejectedRelation(key=key, value=value, reason=EMPTY_PREDICATE))
            continue
        for piece in value.split(","):
            raw = piece.strip()
            if not raw:
                continue
            target = _resolve(base, own_path, raw)
            if isinstance(target, str):
                rejected.append(RejectedRelation(key=key, value=raw, reason=target))
                continue
            identity = (predicate, target.target, target.fragment)
            if identity in seen:
                continue
            seen.add(identity)
            relations.append(
                Relation(
                    predicate=predicate,
                    target=target.target,
                    fragment=target.fragment,
                    authority=target.authority,
                    raw=raw,
                )
            )
    return relations, rejected


def _resolve(base: str, own_path: str, raw: str) -> Target | str:
    """The target of one reference, or the reason it is rejected."""
    if any(ch.isspace() for ch in raw):
        return WHITESPACE_IN_REFERENCE
    try:
        target = resolve_target(base, raw)
    except BadRequestError:
        return INVALID_MARK_URL
    if target.external:
        return EXTERNAL_REFERENCE
    if target.authority is None and target.target == own_path:
        return SELF_REFERENCE
    return target
