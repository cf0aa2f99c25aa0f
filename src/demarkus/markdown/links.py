"""Body links with the anchor of the section they sit in, and reference resolution.

A reference (link destination or `rel-*` value) resolves against the document's own
path or mark:// URL like an HTML link (RFC 3986), then splits by authority:

    `/abs.md`, `rel.md`, `../x.md`   -> bare path, same authority
    `mark://<this authority>/x.md`   -> bare path, same authority (when the base is a mark:// URL)
    `mark://other:6310/x.md`         -> canonical URL (`mark://host`, port only when not 6309)
    `https://...`, `mailto:...`      -> external, kept as written

The fragment (`#anchor`) is always split off and kept separately. A path on the same
authority is the document's own path: its percent-escapes are decoded (`My%20note.md`
names `My note.md`, as a LIST link escapes it); another authority's URL keeps its escaped
form, the form identities are compared in.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from urllib.parse import unquote

from markdown_it.token import Token

from ..errors import BadRequestError
from ..protocol import SCHEME, parse_mark_url, resolve_reference
from .sections import Outline, ParsedBody, inline_text, outline_from_parse, parse_body

__all__ = ["Link", "Target", "extract_links", "links_from_parse", "resolve_target"]

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True, slots=True)
class Link:
    label: str
    """Link text, markup stripped."""
    target: str
    """Bare path (same authority), canonical mark:// URL (other authority), or the
    destination as written for other schemes; never with a fragment."""
    fragment: str
    """"" or the anchor after `#`."""
    section: str | None
    """Anchor of the innermost section the link sits in; None in the preamble."""
    external: bool
    """True for schemes other than mark:// (http:, mailto:, ...)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a reference points, seen from one document."""

    target: str
    """Bare path, canonical mark:// URL without fragment, or an external URL without fragment."""
    fragment: str
    authority: str | None
    """None for the document's own authority (and for external URLs), else `mark://host[:port]`."""
    external: bool


def resolve_target(base: str, reference: str) -> Target:
    """Resolve `reference` as written in the document at `base` (a bare path or mark:// URL).

    Raises:
        BadRequestError: `reference` or `base` is a mark:// URL without a host or with a bad port.
    """
    ref, _, fragment = reference.partition("#")
    scheme = _SCHEME.match(ref)
    if scheme and scheme.group().lower() != f"{SCHEME}:":
        return Target(target=ref, fragment=fragment, authority=None, external=True)
    resolved = resolve_reference(base, ref)
    if not resolved.lower().startswith(f"{SCHEME}://"):
        return Target(target=unquote(resolved), fragment=fragment, authority=None, external=False)
    url = parse_mark_url(resolved)
    if base.lower().startswith(f"{SCHEME}://") and parse_mark_url(base).authority == url.authority:
        return Target(target=unquote(url.path), fragment=fragment, authority=None, external=False)
    return Target(target=url.authority + url.path, fragment=fragment, authority=url.authority, external=False)


def extract_links(body: bytes, base: str) -> list[Link]:
    """Every link in `body`, in document order, resolved against `base`.

    Skipped: fragment-only and empty destinations (`#x`, `[x]()`), images, anything
    inside code, destinations markdown-it refuses (`javascript:` ...), and mark:// URLs
    without a host.

    Raises:
        BadRequestError: `body` is not UTF-8, or `base` is a malformed mark:// URL.
    """
    if base.lower().startswith(f"{SCHEME}://"):
        parse_mark_url(base)  # a bad base is the caller's error, not a reason to drop links
    parsed = parse_body(body, inline=True)
    return links_from_parse(parsed, outline_from_parse(parsed), base)


def links_from_parse(parsed: ParsedBody, outline: Outline, base: str) -> list[Link]:
    """`extract_links` from a parse already made (`parse_body(body, inline=True)`) and its
    outline: a caller that also indexes the body parses it once for both.

    Raises:
        ValueError: `parsed` was made without its inline text (`inline=False`).
        BadRequestError: `base` is a malformed mark:// URL.
    """
    if not parsed.inline:
        raise ValueError("links need a parse with its inline text (parse_body(body, inline=True))")
    if base.lower().startswith(f"{SCHEME}://"):
        parse_mark_url(base)  # a bad base is the caller's error, not a reason to drop links
    starts = [s.start for s in outline.sections]
    links: list[Link] = []
    line = 0
    for token in parsed.tokens:
        if token.type != "inline":
            continue
        if token.map:
            line = token.map[0]
        index = bisect_right(starts, parsed.line_starts[line]) - 1
        section = outline.sections[index].anchor if index >= 0 else None
        for href, label in _links_in(token.children or []):
            if not href or href.startswith("#"):
                continue
            try:
                target = resolve_target(base, href)
            except BadRequestError:
                continue
            links.append(
                Link(
                    label=label,
                    target=target.target,
                    fragment=target.fragment,
                    section=section,
                    external=target.external,
                )
            )
    return links


def _links_in(children: list[Token]) -> list[tuple[str, str]]:
    """(destination, label) of each link among one block's inline tokens."""
    found: list[tuple[str, str]] = []
    href: str | None = None
    label: list[Token] = []
    for child in children:
        if child.type == "link_open":
            href, label = str(child.attrGet("href") or ""), []
        elif child.type == "link_close" and href is not None:
            found.append((href, inline_text(label).strip()))
            href = None
        elif href is not None:
            label.append(child)
    return found
