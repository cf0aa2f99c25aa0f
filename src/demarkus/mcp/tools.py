"""The MCP tools as plain async methods over a `Resolver`: text in, text out.

The same `Tools` serves the local stdio server (one authority) and the gateway (many
worlds): only the resolver differs, so their texts are the same byte for byte. Failures
the caller can fix raise `ToolFailure`; answers such as `not-found` are texts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from ..access import HIDDEN, hidden_count, hidden_note
from ..backend import Backend
from ..errors import BadRequestError, DemarkusError
from ..expand.document import Fetched, FetchFn
from ..expand.held import HeldDocuments
from ..expand.parsecache import PARSES
from ..expand.select import Selection, select_evidence
from ..expand.table import Table
from ..graph import GraphStore, observe_document
from ..graph.card import (
    render_backlinks,
    render_opening,
    render_outbound,
    render_outline_section,
    render_relations,
    render_siblings,
    render_siblings_unavailable,
)
from ..graph.export import EXPORT_PATH, parse_export
from ..markdown import extract_links, opening_paragraph, outline_text, parse_outline
from ..protocol import (
    INFORMATIVE,
    INFORMATIVE_WORDS,
    ROW_ETAGS,
    Response,
    Status,
    parse_informative,
    parse_informative_words,
    parse_mark_url,
    parse_row_etags,
)
from .text import (
    FETCH_KEYS,
    FETCH_VERBOSE_KEYS,
    LOOKUP_KEYS,
    OUTLINE_THRESHOLD,
    count_lines,
    envelope,
    outline_body,
    section_not_found,
    section_outline_body,
    unchanged_notice,
)

log = logging.getLogger(__name__)

MAX_BUDGET = 100_000
"""A budget above this is a mistake rather than a wish; the tool says so."""
SEED_INTERVAL = 300.0
"""Seconds before an authority's `/graph.md` is asked for again (the reference's five
minutes); an unchanged export then costs one `not-modified` answer."""
LIST_KEYS = ("entries", "complete", "next-cursor")
VERSIONS_KEYS = ("total", "current", "chain-valid", "chain-error")
WRITE_KEYS = ("version", "modified", "archived", "your-version", "server-version")


class ToolFailure(Exception):
    """A tool call the caller must correct; the message says how."""


def check_lookup_arguments(budget: int, match: str | None, limit: int | None) -> None:
    """The checks every lookup tool makes before asking an authority.

    Raises:
        ToolFailure: a negative or absurd budget, an unknown match, a limit below 1.
    """
    if budget < 0:
        raise ToolFailure(f"budget {budget} is negative; pass 0 for the table alone or a token count such as 1500")
    if budget > MAX_BUDGET:
        raise ToolFailure(
            f"budget {budget} is larger than {MAX_BUDGET} tokens; ask for what you can read, e.g. 1500, and fetch more later"
        )
    if match not in (None, "", "catalog", "body"):
        raise ToolFailure(f"match `{match}` is unknown; use `catalog` (tags and titles) or `body` (section text)")
    if limit is not None and limit < 1:
        raise ToolFailure(f"limit {limit} is below 1; omit it for 10 rows or pass 1 to 1000")


@dataclass(frozen=True, slots=True)
class Target:
    """Where a tool URL points: which backend, which path, and how to name it."""

    backend: Backend
    path: str
    anchor: str
    url: str
    """The location as tool texts print it (bare path locally, mark://world/path on the gateway)."""
    node: str
    """Canonical absolute URL: the identity in the relation graph."""
    token: str | None


class Resolver(Protocol):
    default_scope: str
    """Where a lookup without url searches."""
    token_advice: str
    """How this surface's caller gets a read token, for the `hidden` line."""

    def resolve(self, url: str) -> Target: ...

    def graph(self, target: Target) -> GraphStore: ...

    def within(self, target: Target) -> str | None:
        """The URL graph answers are confined to (None: no narrowing)."""
        ...

    def name(self, scope: Target, path: str) -> str:
        """How tool texts name `path` on the authority `scope` is on: a bare path locally,
        `mark://world/path` on the gateway."""
        ...


def _now() -> datetime:
    return datetime.now(UTC)


def _raise_for_bad_request(response: Response) -> None:
    if response.status == Status.BAD_REQUEST:
        try:
            response.raise_for_status()
        except DemarkusError as exc:
            raise ToolFailure(str(exc)) from exc


def _hidden_extra(response: Response, target: Target, noun: tuple[str, str], where: str, advice: str) -> dict[str, str]:
    """The envelope's `hidden` line when the answer left rows out for lack of a read token."""
    count = hidden_count(response.metadata)
    if not count:
        return {}
    return {HIDDEN: hidden_note(count, noun, where, carried=bool(target.token), advice=advice)}


def _without_hidden(metadata: Mapping[str, str]) -> Mapping[str, str]:
    """The metadata less the bare `hidden` count, which the `hidden` line says in words."""
    return {k: v for k, v in metadata.items() if k != HIDDEN} if HIDDEN in metadata else metadata


def _shown(metadata: Mapping[str, str]) -> Mapping[str, str]:
    """A lookup's metadata as the tool prints it: less the `hidden` count and the row
    etags (for the fetcher only)."""
    return _without_hidden({k: v for k, v in metadata.items() if k != ROW_ETAGS})


def catalog_reason(query: str, otherwise: str = "this authority has no body match") -> str:
    """Why a body-match lookup came back as a catalog answer: `*` is always one (it lists
    documents); `otherwise` the authority has no body match."""
    return "`*` lists documents, not sections" if query.strip() == "*" else otherwise


class Tools:
    """One instance per MCP session: it remembers which documents it returned in full."""

    def __init__(self, resolver: Resolver, held: HeldDocuments | None = None) -> None:
        self.resolver = resolver
        self._returned: dict[str, tuple[str, str]] = {}
        self.held = held if held is not None else HeldDocuments()
        """What the lookups fetched, asked for again with `if-none-match` (a gateway's
        callers share theirs: see `expand.held`)."""

    def _resolve(self, url: str) -> Target:
        try:
            return self.resolver.resolve(url)
        except DemarkusError as exc:
            raise ToolFailure(str(exc)) from exc

    async def _read(self, url: str, verbose: bool) -> tuple[Target, Response, str | None]:
        """Fetch the document at `url` with the caller's token and learn its edges; the third
        item is the tool answer when it is not there to read (not found, archived, ...)."""
        target = self._resolve(url)
        response = await target.backend.fetch(target.path, token=target.token)
        _raise_for_bad_request(response)
        await self._observe(target, response)
        if response.status != Status.OK:
            return (
                target,
                response,
                envelope(
                    response.status,
                    response.metadata,
                    response.text,
                    keys=FETCH_KEYS,
                    verbose=verbose,
                    verbose_keys=FETCH_VERBOSE_KEYS,
                ),
            )
        return target, response, None

    async def _observe(self, target: Target, response: Response) -> None:
        """Record the document's outgoing edges; a document that is gone loses them."""
        if response.status in (Status.NOT_FOUND, Status.ARCHIVED):
            self.resolver.graph(target).forget(target.node)
            return
        if response.status != Status.OK:
            return
        try:
            edges = observe_document(target.node, response.metadata, response.body)
        except BadRequestError:  # not UTF-8 text: nothing to learn from it
            return
        title = response.metadata.get("title", "")
        version = int(response.metadata.get("version", "0") or 0)
        self.resolver.graph(target).observe(target.node, title=title, version=version, edges=edges, observed_at=_now())

    async def _seed(self, target: Target) -> None:
        """Take in the edges `target`'s authority publishes, at most once per
        `SEED_INTERVAL`, so the graph knows the documents linking to one this session has not
        read them from. It never fails a tool: without an export (an older authority, an
        unreachable one) the graph holds what this session read."""
        graph = self.resolver.graph(target)
        authority = parse_mark_url(target.node).authority
        etag = graph.seed_due(authority, time.monotonic(), SEED_INTERVAL)
        if etag is None:
            return
        try:
            response = await target.backend.fetch(EXPORT_PATH, token=target.token, if_none_match=etag or None)
            if response.status != Status.OK:
                return
            export = parse_export(response.text, authority)
        except DemarkusError as exc:
            log.warning("the graph export of %s could not be read: %s", authority, exc)
            return
        if export is None:  # a document of that name, not an export
            return
        if export.omitted:
            log.info("the graph export of %s left out %d edges (its size limit)", authority, export.omitted)
        graph.seed(export.titles, export.edges)
        graph.seeded(authority, response.metadata.get("etag", ""))

    # --- mark_fetch -----------------------------------------------------------------------

    async def fetch(self, url: str, force: bool = False, verbose: bool = False) -> str:
        target, response, unreadable = await self._read(url, verbose)
        if unreadable is not None:
            return unreadable
        meta = response.metadata
        try:
            response.body.decode("utf-8")
        except UnicodeDecodeError:
            return envelope(
                response.status,
                meta,
                "this document is not UTF-8 text and cannot be shown; fetch it with another client\n",
                keys=FETCH_KEYS,
                verbose=verbose,
                verbose_keys=FETCH_VERBOSE_KEYS,
                extra={"mode": "binary"},
            )
        outline = parse_outline(response.body)
        if target.anchor:
            section = outline.find(target.anchor)
            if section is None:
                raise ToolFailure(section_not_found(target.anchor, target.url, [s.anchor for s in outline.sections]))
            whole = outline.text(section)
            keys = {"section": f"#{section.anchor}"}
            if len(whole) >= OUTLINE_THRESHOLD and section.own_end < section.end and not force:
                # as a large document answers with its outline: a large section's own text
                # and the map of its sub-sections, not every sub-section's text
                keys |= {"mode": "outline", "size": f"{len(whole)} bytes, {count_lines(whole)} lines"}
                text = section_outline_body(target.url, outline, section)
            else:
                text = whole.decode("utf-8")
            return envelope(
                response.status,
                meta,
                text,
                keys=FETCH_KEYS,
                verbose=verbose,
                verbose_keys=FETCH_VERBOSE_KEYS,
                extra=keys,
            )
        identity = (meta.get("version", ""), meta.get("etag", ""))
        earlier = self._returned.get(target.node)
        extra: dict[str, str] = {}
        if earlier is not None and not force:
            if earlier == identity:
                lines = {"version": identity[0], "etag": identity[1]}
                return envelope("unchanged", lines, unchanged_notice(identity[0]), keys=("version", "etag"))
            extra["note"] = f"changed since this session's earlier fetch (v{earlier[0]} -> v{identity[0]})"
        if len(response.body) >= OUTLINE_THRESHOLD and not force:
            extra["mode"] = "outline"
            extra["size"] = f"{len(response.body)} bytes, {count_lines(response.body)} lines"
            return envelope(
                response.status,
                meta,
                outline_body(target.url, outline),
                keys=FETCH_KEYS,
                verbose=verbose,
                verbose_keys=FETCH_VERBOSE_KEYS,
                extra=extra,
            )
        self._returned[target.node] = identity
        return envelope(
            response.status,
            meta,
            response.text,
            keys=FETCH_KEYS,
            verbose=verbose,
            verbose_keys=FETCH_VERBOSE_KEYS,
            extra=extra,
        )

    # --- mark_lookup ----------------------------------------------------------------------

    async def lookup(
        self,
        query: str,
        url: str | None = None,
        filter: str | None = None,
        limit: int | None = None,
        match: str | None = None,
        budget: int = 0,
        verbose: bool = False,
    ) -> str:
        text, _ = await self.lookup_selection(query, url, filter, limit, match, budget, verbose)
        return text

    async def lookup_selection(
        self,
        query: str,
        url: str | None = None,
        filter: str | None = None,
        limit: int | None = None,
        match: str | None = None,
        budget: int = 0,
        verbose: bool = False,
    ) -> tuple[str, Selection | None]:
        """The lookup's text, and with a budget the selection behind its evidence."""
        check_lookup_arguments(budget, match, limit)
        target = self._resolve(url if url is not None else self.resolver.default_scope)
        if target.anchor:
            raise ToolFailure(f"the lookup scope {url} cannot have an #anchor; pass a directory such as / or /docs")
        response = await self._ask_lookup(target, query, filter, limit, match, budget > 0)
        _raise_for_bad_request(response)
        extra = _hidden_extra(
            response, target, ("document", "documents"), f"under {target.url}", self.resolver.token_advice
        )
        if match == "body" and response.ok and response.metadata.get("match") != "body":
            extra["note"] = f"answered from the catalog: {catalog_reason(query)}"
        table = Table.parse(response.text) if response.status == Status.OK else None
        body = response.text
        if table is not None:
            # Rows are named as the caller names documents; with a budget, the evidence
            # shows what the snippets preview, so the table drops that column, and ditto
            # marks stand for a title and tags repeated from the row above.
            table = table.named(lambda path: self.resolver.name(target, path))
            body = (table.compact() if budget > 0 else table).render()
        meta = _shown(response.metadata)
        text = envelope(response.status, meta, body, keys=LOOKUP_KEYS, verbose=verbose, extra=extra)
        if budget <= 0 or table is None:
            return text, None
        # The budget covers the whole result: envelope and table included.
        informative = parse_informative(response.metadata.get(INFORMATIVE))
        fetcher = self._fetcher(self._etags(target, response))
        telling = parse_informative_words(response.metadata.get(INFORMATIVE_WORDS))
        selection = await select_evidence(text, table.rows, query, budget, fetcher, informative, telling)
        return text + selection.text, selection

    async def _ask_lookup(
        self, target: Target, query: str, filter: str | None, limit: int | None, match: str | None, etags: bool
    ) -> Response:
        """The authority's LOOKUP answer for `target`, with the caller's token; `etags`: ask
        for the etags of its documents (`row-etags`), for the fetcher."""
        return await target.backend.lookup(
            target.path,
            query,
            filter=filter,
            limit=limit,
            match=match or None,
            token=target.token,
            row_etags=etags,
        )

    def _etags(self, target: Target, response: Response) -> dict[str, str]:
        """The etags a LOOKUP answer named (`row-etags`), by the names the fetcher is given."""
        named = parse_row_etags(response.metadata.get(ROW_ETAGS))
        return {self.resolver.name(target, path): etag for path, etag in named.items()}

    def _fetcher(self, current: Mapping[str, str] | None = None) -> FetchFn:
        """Fetch documents by the name the tools print, with the caller's own token and
        resolver: scope never widens. `current`: etags the lookup's answer named, by that
        name; a document held with its etag is not asked for again."""

        async def fetch(location: str) -> Fetched:
            still = self.held.still(location, (current or {}).get(location))
            if still is not None:
                return still
            target = self.resolver.resolve(location)
            etag = self.held.etag(location)
            response = await target.backend.fetch(target.path, token=target.token, if_none_match=etag)
            if response.status == Status.NOT_MODIFIED and etag is not None:
                reused = self.held.reuse(location, etag)
                if reused is not None:
                    return reused
                # another caller's fetch replaced or dropped it meanwhile: ask for the body
                response = await target.backend.fetch(target.path, token=target.token)
            if response.status != Status.OK:
                response.raise_for_status()
                raise BadRequestError(f"{location} answered {response.status}")
            version = response.metadata.get("version")
            # Callers holding the same version hold one body: the parse cache's, once parsed.
            body = PARSES.shared(response.body)
            fetched = Fetched(location, body, int(version) if version else None, response.metadata)
            self.held.keep(location, response.metadata.get("etag"), fetched)
            return fetched

        return fetch

    # --- mark_explore ---------------------------------------------------------------------

    async def explore(
        self,
        url: str,
        direction: str = "both",
        relations: Sequence[str] | None = None,
        page_size: int = 10,
        cursor: str | None = None,
        verbose: bool = False,
    ) -> str:
        if direction not in ("incoming", "outgoing", "both"):
            raise ToolFailure(f"direction `{direction}` is unknown; use incoming, outgoing or both")
        if relations is not None and len(relations) > 20:
            raise ToolFailure("at most 20 relations may be named; omit the argument for all")
        if not 1 <= page_size <= 100:
            raise ToolFailure(f"page_size {page_size} must be between 1 and 100")
        target, response, unreadable = await self._read(url, verbose)
        if unreadable is not None:
            return unreadable
        meta = response.metadata
        await self._seed(target)
        graph = self.resolver.graph(target)
        try:
            page = graph.neighborhood(
                target.node,
                direction=direction,
                relations=list(relations) if relations is not None else None,
                page_size=page_size,
                cursor=cursor,
                within=self.resolver.within(target),
            )
        except (DemarkusError, ValueError) as exc:
            raise ToolFailure(str(exc)) from exc
        outline = parse_outline(response.body)
        titles = graph.titles(row.url for row in page.rows)
        parts = [
            render_outline_section(outline_text(outline).splitlines()),
            render_opening(opening_paragraph(response.body)),
            render_outbound(extract_links(response.body, target.node)),
            render_relations(page, titles, self._naming(target)),
            await self._siblings(target),
            f"fetch {target.url}#<anchor> for a section; mark_fetch force=true for the full body\n",
        ]
        body = "\n".join(p.rstrip("\n") + "\n" for p in parts if p)
        extra = {"size": f"{len(response.body)} bytes, {count_lines(response.body)} lines"}
        return envelope(
            response.status, meta, body, keys=FETCH_KEYS, verbose=verbose, verbose_keys=FETCH_VERBOSE_KEYS, extra=extra
        )

    async def _siblings(self, target: Target) -> str:
        directory = target.path.rsplit("/", 1)[0] + "/"
        response = await target.backend.list(directory, token=target.token)
        if response.status != Status.OK:
            return render_siblings_unavailable(directory)
        names: list[str] = []
        own = target.path.rsplit("/", 1)[1]
        at = 0  # its place in the listing (not on this page of a long one: the first entries)
        for line in response.text.splitlines():
            if line.startswith("- [") and "](" in line:
                name = line[3 : line.index("](")].replace("\\", "")
                if name == own:
                    at = len(names)
                else:
                    names.append(name)
        complete = response.metadata.get("complete", "true") == "true"
        return render_siblings(directory, names, complete, at=at)

    # --- mark_backlinks -------------------------------------------------------------------

    async def backlinks(self, url: str) -> str:
        target = self._resolve(url)
        await self._seed(target)
        graph = self.resolver.graph(target)
        edges = graph.backlinks(target.node, within=self.resolver.within(target))
        titles = graph.titles(e.source for e in edges)
        return render_backlinks(target.url, edges, titles, name=self._naming(target))

    def _naming(self, target: Target) -> Callable[[str], str]:
        """How graph answers name a node seen from `target`: one on target's authority as
        every other tool text names its paths (a bare path locally, so the text does not
        change with the authority's address), any other URL as it is."""
        origin = target.node[: len(target.node) - len(target.path)]

        def name(node: str) -> str:
            if node.startswith(origin + "/"):
                return self.resolver.name(target, node[len(origin) :])
            return node

        return name

    # --- mark_list / mark_versions --------------------------------------------------------

    async def list(
        self, url: str = "/", cursor: str | None = None, include_archived: bool = False, verbose: bool = False
    ) -> str:
        target = self._resolve(url)
        response = await target.backend.list(
            target.path, token=target.token, include_archived=include_archived, cursor=cursor
        )
        _raise_for_bad_request(response)
        extra = _hidden_extra(response, target, ("entry", "entries"), f"of {target.url}", self.resolver.token_advice)
        meta = _without_hidden(response.metadata)
        return envelope(response.status, meta, response.text, keys=LIST_KEYS, verbose=verbose, extra=extra)

    async def versions(self, url: str) -> str:
        target = self._resolve(url)
        response = await target.backend.versions(target.path, token=target.token)
        _raise_for_bad_request(response)
        return envelope(response.status, response.metadata, response.text, keys=VERSIONS_KEYS)

    # --- writes ---------------------------------------------------------------------------

    async def publish(
        self, url: str, body: str, expected_version: int | None = None, metadata: Mapping[str, str] | None = None
    ) -> str:
        target = self._resolve(url)
        response = await target.backend.publish(
            target.path, body, metadata=metadata or {}, expected_version=expected_version, token=target.token
        )
        _raise_for_bad_request(response)
        return envelope(response.status, response.metadata, response.text, keys=WRITE_KEYS)

    async def append(self, url: str, body: str, expected_version: int = 0) -> str:
        target = self._resolve(url)
        if expected_version <= 0:
            history = await target.backend.versions(target.path, token=target.token)
            if history.status != Status.OK:
                return envelope(history.status, history.metadata, history.text, keys=VERSIONS_KEYS)
            expected_version = int(history.metadata.get("current", "0"))
        response = await target.backend.append(target.path, body, expected_version=expected_version, token=target.token)
        _raise_for_bad_request(response)
        return envelope(response.status, response.metadata, response.text, keys=WRITE_KEYS)

    async def archive(self, url: str) -> str:
        target = self._resolve(url)
        response = await target.backend.archive(target.path, token=target.token)
        _raise_for_bad_request(response)
        return envelope(response.status, response.metadata, response.text, keys=WRITE_KEYS)
