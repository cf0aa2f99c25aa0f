"""Links to a folder's published copy, made links to its own notes. Pure.

A folder of notes is often published on the web as well (a repository's file view, a
mirror), and its notes then name each other by those addresses::

    [the earlier design](https://github.com/org/repo/blob/main/design/b.md#goals)

Nothing can follow such a link inside a store: explore lists it as a web address and the
relation graph has no edge to `/design/b.md`. Imported with `--site
https://github.com/org/repo/blob/main/`, the link becomes a link to the note itself,
relative to the note that holds it (`b.md#goals` from `design/a.md`), so every tool
follows it; a relation written as such an address names the document. The rest of the
text is left as it is.

Only a markdown file is matched: `<site><path>.md`, with an optional `#fragment`, a path
inside the folder (no `..`, no query; percent-escapes decoded; a name that would need a
space or a bracket in the link is left as written). An address without `.md` may name
anything (a rendered page, an issue), so it stays a web link. Links in code blocks, code
spans and HTML blocks are text, and stay as written.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ..errors import BadRequestError, DemarkusError
from ..markdown.sections import parse_body
from .note import document_path

__all__ = ["Sites", "parse_site"]

_INLINE = re.compile(r"(\]\(\s*<?)([^\s)<>]+)")
"""An inline link's destination, after `](` (and an optional `<`)."""
_DEFINITION = re.compile(r"^( {0,3}\[[^\]]+\]:[ \t]*<?)([^\s<>]+)")
"""A link reference definition's destination: `[label]: https://...`."""
_UNSAFE = re.compile(r"[\s()<>]")
"""Characters a bare link destination cannot hold: such a link is left as written."""
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
"""A line with its ending, as markdown-it counts lines (never at other characters
`str.splitlines` splits on)."""
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_TEXT_BLOCKS = frozenset({"fence", "code_block", "html_block"})
"""Blocks whose lines are text, not markdown: a link there is not a link."""


def parse_site(url: str) -> str:
    """The site address as matched: an http(s) URL with a host, ending in `/`.

    Raises:
        BadRequestError: not an http or https URL with a host, or one with a query or
            fragment; the message says what to give.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadRequestError(
            f"--site {url!r} is not a web address; give the http(s) URL the folder is published at, "
            "e.g. https://github.com/org/repo/blob/main/"
        )
    if parts.query or parts.fragment:
        raise BadRequestError(f"--site {url!r} has a query or fragment; give the folder's address only")
    return url.strip().rstrip("/") + "/"


@dataclass(frozen=True, slots=True)
class Sites:
    """The web addresses a folder is published at (each ending in `/`, see `parse_site`)
    and the document folder its files go under."""

    urls: tuple[str, ...] = ()
    prefix: str = "/"

    def document(self, reference: str) -> str | None:
        """The document path (with its `#fragment`) that `reference` names under one of
        the sites, or None when it names none."""
        found = self._target(reference)
        if found is None:
            return None
        target, fragment = found
        return target + (f"#{fragment}" if fragment else "")

    def relative(self, reference: str, path: str) -> str | None:
        """`reference` as a link relative to the document at `path`, when it names a note
        under one of the sites; None otherwise."""
        found = self._target(reference)
        if found is None:
            return None
        target, fragment = found
        link = posixpath.relpath(target, posixpath.dirname(path)) + (f"#{fragment}" if fragment else "")
        return None if _UNSAFE.search(link) else link

    def _target(self, reference: str) -> tuple[str, str] | None:
        """(document path, fragment) of the note `reference` names under one of the sites."""
        for url in self.urls:
            if not reference.startswith(url):
                continue
            written, _, fragment = reference[len(url) :].partition("#")
            path = unquote(written)
            if not path.endswith(".md") or "?" in path or ".." in path.split("/"):
                continue
            try:
                return document_path(path, self.prefix), fragment
            except DemarkusError:
                continue
        return None

    def localize(self, body: str, path: str) -> str:
        """`body` (of the document at `path`) with every link to a note under one of the
        sites made relative; unchanged when there are no sites or no such links."""
        if not self.urls or not any(url in body for url in self.urls):
            return body
        parsed = parse_body(body.encode("utf-8"), inline=False)
        text_lines = {
            line for token in parsed.tokens if token.type in _TEXT_BLOCKS and token.map for line in range(*token.map)
        }
        lines = [line for line in _LINE.findall(body) if line]
        for number, line in enumerate(lines):
            if number not in text_lines and any(url in line for url in self.urls):
                lines[number] = self._line(line, path)
        return "".join(lines)

    def _line(self, line: str, path: str) -> str:
        spans = [m.span() for m in _CODE_SPAN.finditer(line)]

        def swap(match: re.Match[str]) -> str:
            if any(start <= match.start() < end for start, end in spans):
                return match.group(0)
            local = self.relative(match.group(2), path)
            return match.group(0) if local is None else match.group(1) + local

        # a definition's destination opens its line, and what follows it is its title
        if _DEFINITION.match(line):
            return _DEFINITION.sub(swap, line, count=1)
        return _INLINE.sub(swap, line)
