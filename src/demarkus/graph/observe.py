"""Pure: one document's outgoing edges, read from its `rel-*` metadata and its body links.

Node identity is the canonical absolute URL `mark://<authority><path>` (no fragment,
default port dropped). Seen from the document `mark://w/adr/0005.md`:

    rel-supersedes: 0002.md                -> (mark://w/adr/0002.md, rel="supersedes")
    rel-depends-on: mark://o:6310/s.md#api -> (mark://o:6310/s.md, rel="depends-on",
                                               fragment="api")
    ## Context ... [setup](../guide.md#install)
                                           -> (mark://w/guide.md, rel="", label="setup",
                                               anchor="context", fragment="install")
    [RFC](https://example.org/rfc)         -> ("https://example.org/rfc", rel="")  external

Edges to other authorities and to external (non-mark) URLs are kept: they are lines in
the explore card and backlinks, never fetched. References to the document itself are
dropped. Repeats of one (target, rel) become one edge with a `count`; the first
occurrence with a label supplies label, anchor and fragment (else the first occurrence).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..markdown import extract_links, parse_relations
from ..markdown.links import links_from_parse
from ..markdown.sections import Outline, ParsedBody
from ..protocol import SCHEME, parse_mark_url

__all__ = ["Edge", "node_url", "observe_document"]

_MARK = f"{SCHEME}://"


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    """Canonical URL of the document the edge was read from."""
    target: str
    """Canonical mark:// URL, or an external URL as written (no fragment)."""
    rel: str
    """The predicate of a `rel-<predicate>` relation; "" for a plain body link."""
    label: str = ""
    """Link text of the first labelled occurrence; "" for relations."""
    anchor: str = ""
    """Anchor of the SOURCE's section holding that link; "" for relations and the preamble."""
    fragment: str = ""
    """Anchor in the TARGET (`doc.md#anchor`), "" when none."""
    count: int = 1
    """How many times (target, rel) occurs in the source."""

    @property
    def external(self) -> bool:
        """True when the target is not a mark:// URL (http:, mailto:, ...)."""
        return not self.target.lower().startswith(_MARK)


def node_url(url: str) -> str:
    """The node identity of `url`: canonical `mark://host[:port]/path`, fragment dropped.

    Strings that are not mark:// URLs (external targets) come back without their fragment.

    Raises:
        BadRequestError: `url` is a mark:// URL without a host or with a bad port.
    """
    if url.lower().startswith(_MARK):
        parsed = parse_mark_url(url)
        return parsed.authority + parsed.path
    return url.partition("#")[0]


def observe_document(
    url: str, metadata: Mapping[str, str], body: bytes, *, parsed: tuple[ParsedBody, Outline] | None = None
) -> list[Edge]:
    """The outgoing edges of the document at `url`, sorted by (target, rel). `parsed`: the
    body's parse with its inline text and its outline, when the caller made them already.

    Rejected relations (empty predicate, whitespace, external or invalid references) are
    skipped, as `parse_relations` reports them; they never fail an observation.

    Raises:
        BadRequestError: `url` is not a well-formed mark:// URL, or `body` is not UTF-8.
    """
    address = parse_mark_url(url)
    authority = address.authority
    source = authority + address.path
    found = _Edges(source)
    relations, _rejected = parse_relations(metadata, source)
    for relation in relations:
        target = relation.target if relation.authority else authority + relation.target
        found.add(target, relation.predicate, label="", anchor="", fragment=relation.fragment)
    links = extract_links(body, source) if parsed is None else links_from_parse(parsed[0], parsed[1], source)
    for link in links:
        target = link.target
        if not link.external and target.startswith("/"):
            target = authority + target
        found.add(target, "", label=link.label, anchor=link.section or "", fragment=link.fragment)
    return found.sorted()


class _Edges:
    """Aggregates occurrences into one edge per (target, rel)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.by_key: dict[tuple[str, str], Edge] = {}

    def add(self, target: str, rel: str, *, label: str, anchor: str, fragment: str) -> None:
        if target == self.source:
            return
        key = (target, rel)
        seen = self.by_key.get(key)
        if seen is None:
            self.by_key[key] = Edge(self.source, target, rel, label, anchor, fragment, 1)
        elif label and not seen.label:
            count = seen.count + 1
            self.by_key[key] = Edge(self.source, target, rel, label, anchor, fragment, count)
        else:
            self.by_key[key] = Edge(self.source, target, rel, seen.label, seen.anchor, seen.fragment, seen.count + 1)

    def sorted(self) -> list[Edge]:
        return [self.by_key[key] for key in sorted(self.by_key)]
