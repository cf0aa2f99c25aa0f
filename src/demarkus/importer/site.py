"""Links to a folder's published copy, made links to its own notes. Pure.

A folder of notes is often published on the web as well (a repository's file view, a
site built from it), and its notes then name each other by those addresses::

    [the earlier design](https://github.com/org/repo/blob/main/design/b.md#goals)
    [the earlier design](https://docs.example.org/design/b.html)

Nothing can follow such a link inside a store: explore lists it as a web address and the
relation graph has no edge to `/design/b.md`. Imported with `--site
https://github.com/org/repo/blob/main/`, the link becomes a link to the note itself,
relative to the note that holds it (`b.md#goals` from `design/a.md`), so every tool
follows it; a relation written as such an address names the document. The rest of the
text is left as it is. `--site URL=FOLDER` says the address is that of a folder inside
the imported one (`https://golang.org/design/=design`).

A markdown file, `<site><path>.md` with an optional `#fragment`, is matched by its name.
A page a site generator renders from a note (`b.html`, `b/`, `b`, and a folder's
`index.md` or `README.md` as `index.html` or `folder/`) is matched only when the note it
would be rendered from exists in the folder, since such an address may name anything
else (an issue, an image, a listing). In both, the path is inside the folder (no `..`, no
query; percent-escapes decoded; a name with a space or a parenthesis is written between
`<` and `>`, one no link can hold is left as written). Links in code blocks, code spans
and HTML blocks are text, and stay as written.

A site's own pages name each other without its address, by the page's path (`Pages`,
with no option: VitePress and Docusaurus write `[x](/guide/intro#setup)`), and such a
link becomes a link to the note by the same rules.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

from ..errors import BadRequestError, DemarkusError
from ..markdown.rewrite import (
    Spans,
    code_spans,
    destination,
    in_spans,
    link_destinations,
    rewrite_outside_code,
    swap_destinations,
)
from .note import document_path, markdown_suffix, note_name

__all__ = ["Pages", "Site", "Sites", "parse_site", "relative_to", "rendered_from"]


class Site(NamedTuple):
    """One address the folder is published at (ending in `/`) and the folder inside the
    imported one that it shows (`""` for the whole folder, else ending in `/`)."""

    url: str
    folder: str = ""


def parse_site(text: str) -> Site:
    """The site as matched, from `URL` or `URL=FOLDER`: an http(s) URL with a host, ending
    in `/`, and a folder inside the imported one (an `=` in the address itself is written
    `%3D`).

    Raises:
        BadRequestError: not an http or https URL with a host, one with a query or
            fragment, or a folder outside the imported one; the message says what to give.
    """
    url, _, folder = text.strip().partition("=")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadRequestError(
            f"--site {text!r} is not a web address; give the http(s) URL the folder is published at, "
            "e.g. https://github.com/org/repo/blob/main/"
        )
    if parts.query or parts.fragment:
        raise BadRequestError(f"--site {text!r} has a query or fragment; give the folder's address only")
    inside = posixpath.normpath(folder.strip().strip("/") or ".")
    if inside == ".." or inside.startswith("../"):
        raise BadRequestError(
            f"--site {text!r} names a folder outside the one imported; after `=` give a folder inside it, "
            "e.g. https://example.org/design/=design"
        )
    return Site(url.strip().rstrip("/") + "/", "" if inside == "." else f"{inside}/")


def rendered_from(page: str) -> tuple[str, ...]:
    """The notes (paths relative to the site's folder, best first) a site generator
    renders as the page at `page`: `b.html` and `b` from `b.md`, `b/` from `b/index.md`,
    `b/_index.md` (a Hugo section's page), `b/README.md` or `b.md` (MkDocs, Hugo, Jekyll,
    mdBook and Docusaurus name pages so); `b.md` too from `b.md`, `b.mdx` or
    `b.markdown`, the note's own file."""
    if markdown_suffix(page) is not None:
        return (note_name(page),)
    for ext in (".html", ".htm"):
        if page.endswith(ext):
            stem = page[: -len(ext)]
            folder, _, name = stem.rpartition("/")
            return (f"{stem}.md", *(_indexes(f"{folder}/" if folder else "")[1:] if name == "index" else ()))
    if not page or page.endswith("/"):
        return (*_indexes(page), *((f"{page[:-1]}.md",) if page else ()))
    return (f"{page}.md", *_indexes(f"{page}/"))


def _indexes(folder: str) -> tuple[str, str, str]:
    """The notes a generator renders as the page of `folder` (empty, or ending in `/`)."""
    return (f"{folder}index.md", f"{folder}_index.md", f"{folder}README.md")


@dataclass(frozen=True, slots=True)
class Sites:
    """The web addresses a folder is published at, the document folder its files go
    under, and (to match a rendered page) what tells whether a path of the folder, such
    as `design/b.md`, is one of its notes; without it only `.md` addresses match."""

    sites: tuple[Site, ...] = ()
    prefix: str = "/"
    is_note: Callable[[str], bool] | None = None

    def __post_init__(self) -> None:
        # the most specific address first: of two that match, the longer names the note
        object.__setattr__(self, "sites", tuple(sorted(self.sites, key=lambda site: -len(site.url))))

    def document(self, reference: str, path: str = "") -> tuple[str, str] | None:
        """(document path, fragment) that `reference` names under one of the sites, or
        None when it names none (wherever it is written: `path` is unused)."""
        return self._target(reference)

    def relations(self, body: str, path: str) -> dict[str, list[tuple[str, str]]]:
        """Always `{}`: a web address declares no relation in the body."""
        return {}

    def relative(self, reference: str, path: str) -> tuple[str, str] | None:
        """(path relative to the document at `path`, fragment) of the note `reference`
        names under one of the sites; None when it names none."""
        return relative_to(self._target(reference), path)

    def _target(self, reference: str) -> tuple[str, str] | None:
        """(document path, fragment) of the note `reference` names under one of the
        sites: a web address, or a path from a site's root (`/guide/b`), which a page of
        the site reads against the site's own scheme and host. Such a path may as well
        be a document path, so it names a note only when the folder holds it."""
        rooted = reference.startswith("/") and not reference.startswith("//")
        if rooted and self.is_note is None:
            return None
        for site in self.sites:
            address = _origin(site.url) + reference if rooted else reference
            if not address.startswith(site.url):
                continue
            written, _, fragment = address[len(site.url) :].partition("#")
            page = unquote(written)
            if "?" in page or page.startswith("/") or ".." in page.split("/"):
                continue
            if page.endswith(".md") and not rooted:
                file: str | None = site.folder + page
            elif self.is_note is not None:
                notes = (site.folder + note for note in rendered_from(page))
                file = next((note for note in notes if self.is_note(note)), None)
            else:
                continue
            if file is None:
                continue
            try:
                return document_path(file, self.prefix), fragment
            except DemarkusError:
                continue
        return None

    def localize(self, body: str, path: str) -> str:
        """`body` (of the document at `path`) with every link to a note under one of the
        sites made relative; unchanged when there are no sites or no such links."""
        if not self.sites:
            return body
        return rewrite_outside_code(
            body,
            lambda text: any(site.url in text for site in self.sites) or _ROOTED_LINK.search(text) is not None,
            lambda line, spans: self._line(line, spans, path),
        )

    def _line(self, line: str, spans: Spans, path: str) -> str:
        return swap_destinations(line, spans, lambda reference: self.relative(reference, path))


@dataclass(frozen=True, slots=True)
class Pages:
    """Links a folder's notes write as the pages a site generator renders from them, made
    links to the notes (always: such a link names no document of the store as written)::

        [computed properties](/guide/essentials/computed#computed-caching-vs-methods)
        [shallowRef()](./reactivity-advanced#shallowref)
        [the install guide](../install.html)

    VitePress and Docusaurus pages link so, with no `.md`: `/guide/essentials/computed`
    is the page of `guide/essentials/computed.md`. A link without a scheme whose path is
    not a `.md` file becomes a link to the note `rendered_from` its page, when that note
    exists in the folder: relative to the note that holds it, or, for a `/...` path, to
    the document path it names, as every absolute path does (the folder's top when it is
    imported without a prefix, as a site's root is). Any other (an image, a page of
    something else, a path outside the folder or its prefix, one with a query) stays as
    written."""

    prefix: str
    is_note: Callable[[str], bool]

    def document(self, reference: str, path: str) -> tuple[str, str] | None:
        """(document path, fragment) of the note the page `reference` names from `path`."""
        page = self._page(reference, path)
        if page is None:
            return None
        written, fragment = page
        file = next((note for note in rendered_from(written) if self.is_note(note)), None)
        if file is None:
            return None
        try:
            return document_path(file, self.prefix), fragment
        except DemarkusError:
            return None

    def relations(self, body: str, path: str) -> dict[str, list[tuple[str, str]]]:
        """Always `{}`: a page's address declares no relation in the body."""
        return {}

    def localize(self, body: str, path: str) -> str:
        """`body` (of the document at `path`) with every link to a note's page, and every
        Hugo `ref` to a note, made a link to the note; unchanged when there is none."""

        def relative(reference: str) -> tuple[str, str] | None:
            return relative_to(self.document(reference, path), path)

        def line(text: str, spans: Spans) -> str:
            swapped = swap_destinations(text, spans, relative)
            return self._refs(swapped, spans if swapped == text else code_spans(swapped), path)

        # most links to a page name none of the folder's notes (an image, a download): a
        # body is parsed for its code blocks only when one does
        if _REF.search(body) is None and all(self.document(page, path) is None for page in link_destinations(body)):
            return body
        return rewrite_outside_code(
            body, lambda text: _PAGE_LINK.search(text) is not None or _REF.search(text) is not None, line
        )

    def _refs(self, line: str, spans: Spans, path: str) -> str:
        """`line` with each link destination outside its code spans that is a Hugo `ref`
        or `relref` shortcode naming a note (`[b]({{< ref "guide/b.md#x" >}})`) written as
        that note's path."""

        def swap(match: re.Match[str]) -> str:
            if in_spans(match.start(), spans):
                return match.group(0)
            local = relative_to(self._ref(match.group(2) or match.group(3), path), path)
            written = None if local is None else destination(*local)
            return match.group(0) if written is None else match.group(1) + written

        return _REF.sub(swap, line)

    def _ref(self, written: str, path: str) -> tuple[str, str] | None:
        """(document path, fragment) of the note a Hugo `ref` names from the note at
        `path`: a path from the content folder (the folder imported) when it starts with
        `/`, else from the note's own folder and then from the content folder, with or
        without `.md`, as Hugo looks it up."""
        target, _, fragment = written.partition("#")
        for base in ("",) if target.startswith("/") else (posixpath.dirname(self._in_folder(path)), ""):
            page = _page_inside(posixpath.join(base, target.lstrip("/")))
            if page is None:
                continue
            file = next((name for name in rendered_from(page) if self.is_note(name)), None)
            if file is not None:
                try:
                    return document_path(file, self.prefix), fragment
                except DemarkusError:
                    return None
        return None

    def _page(self, reference: str, path: str) -> tuple[str, str] | None:
        """(page inside the folder, fragment) that `reference` names from the note at
        `path`, or None for a link with a scheme, a query or a `.md` file, or one outside
        the folder."""
        if _SCHEME.match(reference) or reference.startswith(("#", "//")):
            return None
        written, _, fragment = reference.partition("#")
        page = unquote(written)
        if not page or "?" in page or page.endswith(".md"):
            return None
        top = self.prefix.rstrip("/") + "/"
        if page.startswith("/"):  # a document path, as every absolute path is
            if not page.startswith(top):
                return None  # outside the prefix the folder goes under
            inside = _page_inside(page[len(top) :])
        else:
            inside = _page_inside(posixpath.join(posixpath.dirname(self._in_folder(path)), page))
        return None if inside is None else (inside, fragment)

    def _in_folder(self, path: str) -> str:
        """The path inside the folder of the note whose document is at `path`."""
        top = self.prefix.rstrip("/") + "/"
        return path[len(top) :] if path.startswith(top) else path.lstrip("/")


def _page_inside(joined: str) -> str | None:
    """`joined` (a page's path joined to a folder of the folder imported) normalised, `/`
    kept at its end; None when it leads out of the folder."""
    norm = posixpath.normpath(joined) if joined else "."
    if norm == ".." or norm.startswith(("../", "/")):
        return None
    return "" if norm == "." else norm + ("/" if joined.endswith("/") else "")


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_PAGE_LINK = re.compile(
    r"(?:\]\(\s*<?|^ {0,3}\[(?!\^)[^\]]+\]:[ \t]*<?)(?![A-Za-z][A-Za-z0-9+.-]*:|#|//)[^\s)<>#?]*(?<!\.md)(?:[\s)#>]|$)",
    re.MULTILINE,
)
"""An inline link's or a definition's destination that may be a page's: no scheme, no
`.md` file, no query (a cheap test)."""


_REF = re.compile(r'(\]\(\s*)(?:\{\{<\s*(?:rel)?ref\s+"([^"\n]*)"\s*>\}\}|\{\{%\s*(?:rel)?ref\s+"([^"\n]*)"\s*%\}\})')
"""An inline link's destination written as Hugo's `ref` or `relref` shortcode of a path:
`]({{< ref "guide/b.md#x" >}}` (or `{{% ... %}}`)."""
_ROOTED_LINK = re.compile(r"(?:\]\(\s*<?|^ {0,3}\[(?!\^)[^\]]+\]:[ \t]*<?)/(?!/)", re.MULTILINE)
"""An inline link's or a definition's destination that is a path from the root (a cheap test)."""


def _origin(url: str) -> str:
    """The scheme and host of `url` (`https://docs.example.org`), against which a page
    reads a path from the root."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def relative_to(found: tuple[str, str] | None, path: str) -> tuple[str, str] | None:
    """(path relative to the document at `path`, fragment) of a (document path, fragment)."""
    if found is None:
        return None
    target, fragment = found
    return posixpath.relpath(target, posixpath.dirname(path)), fragment
