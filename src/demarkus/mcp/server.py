"""The MCP server: tool names, schemas and descriptions over `Tools`, on the official SDK.

Descriptions are prompts for a model: when to use the tool, what comes back, what next.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Annotated, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from mcp_types import Tool as MCPTool
from pydantic import Field

from ..access import TOKEN_ADVICE
from ..backend import Backend
from ..errors import BadRequestError, DemarkusError
from ..expand.select import Selection
from ..graph import GraphStore
from ..protocol import in_scope, linked_path, normalize_scope, parse_mark_url, split_anchor, unbracketed
from ..render import written_path
from .schema import compact_schema
from .tools import Target, ToolFailure, Tools

P = ParamSpec("P")
R = TypeVar("R")
DECISIONS_META = "demarkus/decisions"
"""The `_meta` key of a budgeted mark_lookup result that lists its decisions (clients show
the text to the model, not `_meta`; the eval traces keep them)."""

READ_TOOLS = ("mark_lookup", "mark_fetch", "mark_explore", "mark_list", "mark_versions", "mark_backlinks")
WRITE_TOOLS = ("mark_publish", "mark_append", "mark_archive")


def _reads(title: str) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def _writes(title: str, *, destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(title=title, destructive_hint=destructive, idempotent_hint=idempotent, open_world_hint=False)


ANNOTATIONS = {
    "mark_lookup": _reads("Look up documents"),
    "mark_fetch": _reads("Fetch a document"),
    "mark_explore": _reads("Explore relations"),
    "mark_backlinks": _reads("List backlinks"),
    "mark_list": _reads("List a directory"),
    "mark_versions": _reads("List versions"),
    "mark_publish": _writes("Publish a document", destructive=False, idempotent=True),
    "mark_append": _writes("Append to a document", destructive=False, idempotent=False),
    "mark_archive": _writes("Archive a document", destructive=True, idempotent=True),
}
"""What each tool does to the store, for a client deciding what it may run without asking
(MCP tool annotations). Every tool stays inside the authorities it was given: a closed
world. Publishing and appending only add versions, every earlier one stays readable, and
publishing the current text again adds none; archiving takes a document out of every
listing and answer."""


class LocalResolver:
    """Bare paths and mark:// URLs of one authority, confined to a scope."""

    token_advice = TOKEN_ADVICE

    def __init__(
        self, backend: Backend, authority: str, graph: GraphStore, *, token: str | None = None, scope: str = "/"
    ) -> None:
        self.backend = backend
        self.authority = authority
        self.scope = normalize_scope(scope)
        self.default_scope = self.scope
        self.token = token
        self._graph = graph

    def graph(self, target: Target) -> GraphStore:
        return self._graph

    def within(self, target: Target) -> str | None:
        """The URL the scope allows (None for the whole authority): the relation graph is
        shared with other sessions and scopes, so what it tells is narrowed to it."""
        return None if self.scope == "/" else self.authority + self.scope

    def name(self, scope: Target, path: str) -> str:
        """The location a text prints for the document at `path` (`written_path`)."""
        return written_path(path)

    def resolve(self, url: str) -> Target:
        text = unbracketed(url)
        if not text:
            raise BadRequestError("the url is empty; pass a path such as /index.md")
        if text.lower().startswith("mark://"):
            parsed = parse_mark_url(text)
            if parsed.authority != self.authority:
                raise BadRequestError(
                    f"{text} is on {parsed.authority}, but this server reads {self.authority} only; "
                    "use a bare path such as /index.md"
                )
            path, anchor = parsed.path, parsed.fragment
        elif text.startswith("/"):
            path, anchor = split_anchor(text)
        else:
            raise BadRequestError(
                f"`{text}` is not a path; start it with / (e.g. /index.md) or use {self.authority}/path"
            )
        path = linked_path(path)
        if not in_scope(path, self.scope):
            raise BadRequestError(f"{path} is outside the allowed scope {self.scope}; use a path under {self.scope}")
        return Target(self.backend, path, anchor, written_path(path), self.authority + path, self.token)


def tool_errors(call: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Wrap a tool function so that a caller mistake becomes a tool error the model can
    read and act on.

    `ToolFailure` and every `DemarkusError` turn into the SDK's `ToolError` with the
    message unchanged (an `isError` result, not a protocol error); anything else is a
    bug and propagates. Every server that registers demarkus tools (the local server
    here, the gateway's extra tools) wraps them with this, so their errors read alike.
    """

    @functools.wraps(call)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await call(*args, **kwargs)
        except (ToolFailure, DemarkusError) as exc:
            raise ToolError(str(exc)) from exc

    return wrapper


LOOKUP_DESCRIPTION = """Find the documents and sections that answer a question. Start here.
Returns a table of rows `path` or `path#anchor` (best first) with importance, title, tags and, with match=body, a snippet.
- match=body searches section text (use it for questions; pass the question's content words); match=catalog (default) matches tags and titles (use it for named documents).
- url scopes the search to a subtree such as /docs.
- budget > 0 (tokens, e.g. 1500) also prints the evidence: the rows' sections framed `>>> /path/vN#anchor`, within the budget.
Next: mark_fetch the best `path#anchor` row (only what an expansion did not already show). Never invent paths or anchors."""

FETCH_DESCRIPTION = """Read a document, or one section of it with `#anchor` (e.g. /docs/a.md#setup).
Returns the status, version and title, then the markdown. Documents of 8 KiB or more come back as an outline of `#anchor`s: fetch the section you need. A document already returned in full this session answers `unchanged` (force=true re-reads it).
Append /vN to the path for an old version (e.g. /docs/a.md/v2#setup); cite immutable locations like that."""

EXPLORE_DESCRIPTION = """Show a document's neighbourhood: outline, opening paragraph, outbound links, typed relations (supersedes, superseded-by, depends-on, implements, derived-from, related) with their direction, and sibling documents.
Use it for lineage, supersession and dependency questions when a lookup did not already show the related document. Filter with direction (incoming|outgoing|both) and relations (exact predicates; "" = plain links); page with cursor."""

BACKLINKS_DESCRIPTION = """List the documents known to link to or relate to this one (incoming edges), with the relation or link text.
Only documents already fetched or explored in this store are known; an empty answer is not proof that none exist."""

LIST_DESCRIPTION = """List a directory: its documents and sub-directories. Use it to browse when you do not know a path; page with cursor."""

VERSIONS_DESCRIPTION = """Show a document's version history (newest first) and whether its hash chain verifies. Fetch an old version with /path/vN."""

PUBLISH_DESCRIPTION = """Create or replace a document with a markdown body. expected_version=0 creates only (fails if it exists); expected_version=N updates only if the current version is N (a conflict answer names both versions: fetch, merge, retry). metadata holds single-line strings: title, tags (comma-separated), importance (0-1), rel-<predicate> relations. Publishing an empty body restores an archived document."""

APPEND_DESCRIPTION = """Add markdown to the end of a document. expected_version is the version you read (0 = the current one). A conflict means someone wrote first: fetch and check before retrying."""

ARCHIVE_DESCRIPTION = """Archive a document: it stops being served and listed; old versions stay readable at /path/vN. Publish an empty body to restore it."""


Url = Annotated[
    str, Field(description="A path such as /docs/a.md (may end in #anchor or /vN#anchor), or a mark:// URL.")
]
Verbose = Annotated[bool, Field(description="Show every metadata key.")]


class CompactServer(MCPServer):
    """An MCPServer that lists its tools with compact input schemas (`schema.py`): a
    caller's model reads them on every turn."""

    async def list_tools(self) -> list[MCPTool]:
        return [
            tool.model_copy(update={"input_schema": compact_schema(tool.input_schema)})
            for tool in await super().list_tools()
        ]


def build_server(
    tools_for: Callable[[], Tools], *, name: str = "demarkus", instructions: str | None = None, writable: bool = True
) -> MCPServer:
    """An MCPServer whose tools ask `tools_for()` for the caller's `Tools` on every call:
    one instance for a stdio session, one per caller and session behind the gateway."""
    server: MCPServer = CompactServer(name, instructions=instructions, log_level="WARNING")

    @server.tool(name="mark_lookup", description=LOOKUP_DESCRIPTION, annotations=ANNOTATIONS["mark_lookup"])
    @tool_errors
    async def mark_lookup(
        query: Annotated[str, Field(description="Words to find (at least 2 characters), or * for every document.")],
        url: Annotated[str | None, Field(description="Scope: / or a subtree such as /docs.")] = None,
        filter: Annotated[
            str | None,
            Field(
                description="key=value clauses, comma-separated: tag=x, modified-after=2026-01-01, or any metadata key."
            ),
        ] = None,
        limit: Annotated[int | None, Field(description="Rows to return (default 10).")] = None,
        match: Annotated[
            str | None, Field(description="catalog (tags and titles, default) or body (section text).")
        ] = None,
        budget: Annotated[int, Field(description="Tokens of evidence to print after the table; 0 = table only.")] = 0,
        verbose: Verbose = False,
    ) -> Annotated[CallToolResult, str]:
        text, selection = await tools_for().lookup_selection(query, url, filter, limit, match, budget, verbose)
        return lookup_result(text, selection)

    @server.tool(name="mark_fetch", description=FETCH_DESCRIPTION, annotations=ANNOTATIONS["mark_fetch"])
    @tool_errors
    async def mark_fetch(
        url: Url,
        force: Annotated[bool, Field(description="Return the full body even if large or unchanged.")] = False,
        verbose: Verbose = False,
    ) -> str:
        return await tools_for().fetch(url, force, verbose)

    @server.tool(name="mark_explore", description=EXPLORE_DESCRIPTION, annotations=ANNOTATIONS["mark_explore"])
    @tool_errors
    async def mark_explore(
        url: Url,
        direction: Annotated[str, Field(description="incoming, outgoing or both.")] = "both",
        relations: Annotated[
            list[str] | None, Field(description='Exact predicates to keep, e.g. ["supersedes"]; "" = plain links.')
        ] = None,
        page_size: Annotated[int, Field(description="Related documents per page (1-100).")] = 10,
        cursor: Annotated[str | None, Field(description="next-cursor from the previous page.")] = None,
        verbose: Verbose = False,
    ) -> str:
        return await tools_for().explore(url, direction, relations, page_size, cursor, verbose)

    @server.tool(name="mark_backlinks", description=BACKLINKS_DESCRIPTION, annotations=ANNOTATIONS["mark_backlinks"])
    @tool_errors
    async def mark_backlinks(url: Url) -> str:
        return await tools_for().backlinks(url)

    @server.tool(name="mark_list", description=LIST_DESCRIPTION, annotations=ANNOTATIONS["mark_list"])
    @tool_errors
    async def mark_list(
        url: Annotated[str, Field(description="A directory such as / or /docs.")] = "/",
        cursor: Annotated[str | None, Field(description="next-cursor from the previous page.")] = None,
        include_archived: Annotated[bool, Field(description="Also list archived documents.")] = False,
        verbose: Verbose = False,
    ) -> str:
        return await tools_for().list(url, cursor, include_archived, verbose)

    @server.tool(name="mark_versions", description=VERSIONS_DESCRIPTION, annotations=ANNOTATIONS["mark_versions"])
    @tool_errors
    async def mark_versions(url: Url) -> str:
        return await tools_for().versions(url)

    if writable:

        @server.tool(name="mark_publish", description=PUBLISH_DESCRIPTION, annotations=ANNOTATIONS["mark_publish"])
        @tool_errors
        async def mark_publish(
            url: Url,
            body: Annotated[str, Field(description="The whole markdown document.")],
            expected_version: Annotated[
                int | None, Field(description="0 = create only; N = update only version N; omit to skip the check.")
            ] = None,
            metadata: Annotated[
                dict[str, str] | None,
                Field(description="Single-line string values: title, tags, importance, rel-<predicate>."),
            ] = None,
        ) -> str:
            return await tools_for().publish(url, body, expected_version, metadata)

        @server.tool(name="mark_append", description=APPEND_DESCRIPTION, annotations=ANNOTATIONS["mark_append"])
        @tool_errors
        async def mark_append(
            url: Url,
            body: Annotated[str, Field(description="Markdown to add at the end.")],
            expected_version: Annotated[int, Field(description="The version you read; 0 = current.")] = 0,
        ) -> str:
            return await tools_for().append(url, body, expected_version)

        @server.tool(name="mark_archive", description=ARCHIVE_DESCRIPTION, annotations=ANNOTATIONS["mark_archive"])
        @tool_errors
        async def mark_archive(url: Url) -> str:
            return await tools_for().archive(url)

    return server


def lookup_result(text: str, selection: Selection | None) -> CallToolResult:
    """A lookup's tool result: the text, and with a budget its decisions under `_meta`."""
    meta = {DECISIONS_META: [asdict(d) for d in selection.decisions]} if selection is not None else None
    content = [TextContent(type="text", text=text)]
    return CallToolResult.model_validate({"content": content, "structured_content": {"result": text}, "meta": meta})
