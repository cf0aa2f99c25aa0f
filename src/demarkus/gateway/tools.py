"""The gateway's tools: the local tool set (`Tools`, unchanged, over the caller's
`GatewayResolver`) plus `mark_worlds` and `mark_lookup_all`.

`mark_lookup_all` sends one LOOKUP to every world the caller can read, in parallel, and
merges the rows (already named `mark://<world>/<path>#anchor`):

```
status: ok
worlds: 3            worlds asked
succeeded: 2
failed: 1
matches: 4           rows shown (after the global limit)
match: body          when every answering world matched section text

# Lookup matches for "lease" in / across peps, shared

| Path | Importance | Title | Tags | Snippet |
|------|------------|-------|------|---------|
| mark://peps/a.md#x | 0.80 | ... |

Failed worlds (their rows are missing; retry, or ask each with mark_lookup):
- notes: world notes did not answer LOOKUP /: ...
```
Order: each world's rank first (every world's best row, then every world's second row,
...), then importance (highest first), then world, then path; cut to the global limit.
With a budget, the expansion is the very function `Tools.lookup` calls, run over the
merged (qualified) table and fetching through the same resolver with the caller's tokens;
there the budget counts the qualified text.

`mark_lookup` is `Tools.lookup` unchanged: it runs on the world's bare paths, so its
selection and token counts are the local server's, and its locations are qualified after
(`qualify.py`). The world prefixes are not counted in its budget (a few tokens per row).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from ..catalog import DEFAULT_LIMIT, MAX_LIMIT
from ..errors import DemarkusError
from ..expand import Fetched, compact_table
from ..mcp import tools as local_tools
from ..mcp.server import tool_errors
from ..mcp.text import envelope
from ..mcp.tools import Target, ToolFailure, Tools, check_lookup_arguments
from ..protocol import Response, Status, normalize_scope
from ..render import escape_cell, render_lookup
from .qualify import qualify_lookup, qualify_lookup_result, qualify_versions, world_of, world_prefix
from .resolver import GatewayResolver

ALL_KEYS = ("worlds", "succeeded", "failed", "matches", "match")
WORLDS_KEYS = ("worlds",)


@dataclass(frozen=True, slots=True)
class _Row:
    """One rendered data row of a world's table, and what it sorts by."""

    rank: int
    importance: float
    world: str
    location: str
    line: str


def _first_cell_end(line: str) -> int:
    """Index of the ` | ` that ends the first cell (cells escape `|` as `\\|`)."""
    escaped = False
    for index in range(2, len(line)):
        ch = line[index]
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif line.startswith(" | ", index):
            return index
    return len(line)


def table_lines(world: str, text: str, *, pad_snippet: bool) -> list[_Row]:
    """The data rows of one world's (world-qualified) LOOKUP table, in rank order. Pure."""
    rows: list[_Row] = []
    prefix = "| " + world_prefix(world) + "/"
    for line in text.split("\n"):
        if not line.startswith(prefix):
            continue
        end = _first_cell_end(line)
        rest = line[end + 3 :]
        try:
            importance = float(rest.split(" | ", 1)[0])
        except ValueError:
            importance = 0.0
        rows.append(_Row(len(rows), importance, world, line[2:end], line + ("  |" if pad_snippet else "")))
    return rows


def merge_rows(tables: list[list[_Row]], limit: int) -> list[_Row]:
    """Per-world rank, then importance (highest first), then world, then path. Pure."""
    rows = [row for table in tables for row in table]
    rows.sort(key=lambda r: (r.rank, -r.importance, r.world, r.location))
    return rows[:limit]


class GatewayTools(Tools):
    """One caller's tools for one MCP session (or one request, without a session)."""

    resolver: GatewayResolver

    # --- the local tools, world-qualified ----------------------------------------------

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
        """`Tools.lookup` itself, over the world's bare paths (the expansion selects and
        counts exactly what the local server would), then qualified for the agent."""
        target = self._resolve(url if url is not None else self.resolver.default_scope)
        text = await super().lookup(query, url, filter, limit, match, budget, verbose)
        return qualify_lookup_result(text, world_of(target.url))

    async def versions(self, url: str) -> str:
        target = self._resolve(url)
        return qualify_versions(await super().versions(url), world_of(target.url))

    def _fetcher(self, scope: Target):  # type: ignore[no-untyped-def]
        """The local fetcher (the caller's resolver and tokens); a bare row location is in
        the lookup's world, and keeps its bare name in the expansion's text."""
        fetch = super()._fetcher(scope)
        world = world_prefix(world_of(scope.url))

        async def fetch_in_world(location: str) -> Fetched:
            if location.lower().startswith("mark://"):
                return await fetch(location)
            fetched = await fetch(world + location)
            return Fetched(location, fetched.body, fetched.version, fetched.metadata)

        return fetch_in_world

    # --- mark_worlds ----------------------------------------------------------------------

    async def worlds(self) -> str:
        worlds = self.resolver.worlds
        lines = ["| World | URL | Writable |", "|-------|-----|----------|"]
        for world in worlds:
            writable = "yes" if self.resolver.writable(world) else "no"
            lines.append(f"| {escape_cell(world)} | {world_prefix(world)}/ | {writable} |")
        body = "\n# Your worlds\n\n" + "\n".join(lines) + "\n"
        if not worlds:
            body = "\nYou can read no worlds; ask the gateway's operator to add some to your caller entry.\n"
        return envelope(Status.OK, {"worlds": str(len(worlds))}, body, keys=WORLDS_KEYS)

    # --- mark_lookup_all ------------------------------------------------------------------

    async def lookup_all(
        self,
        query: str,
        scope: str = "/",
        filter: str | None = None,
        limit: int | None = None,
        match: str | None = None,
        budget: int = 0,
        verbose: bool = False,
    ) -> str:
        check_lookup_arguments(budget, match, limit)
        text = (scope or "/").strip()
        if not text.startswith("/"):
            raise ToolFailure(
                f"scope `{text[:120]}` must be a path such as / or /docs, applied in every world; "
                "to search one world use mark_lookup with url=mark://<world>/..."
            )
        scope = normalize_scope(text.partition("#")[0])
        worlds = self.resolver.worlds
        if not worlds:
            raise ToolFailure("you can read no worlds; ask the gateway's operator to add some to your caller entry")
        targets = [self._resolve(f"{world_prefix(world)}{scope}") for world in worlds]
        answers = await asyncio.gather(*(self._lookup_one(t, query, filter, limit, match) for t in targets))
        tables: list[list[_Row]] = []
        failures: list[tuple[str, str]] = []
        succeeded: list[str] = []
        catalog_only: list[str] = []
        for world, answer in zip(worlds, answers, strict=True):
            if isinstance(answer, str):
                failures.append((world, answer))
                continue
            succeeded.append(world)
            body_answer = answer.metadata.get("match") == "body"
            if match == "body" and not body_answer:
                catalog_only.append(world)
            qualified = qualify_lookup(answer.text, world)
            tables.append(table_lines(world, qualified, pad_snippet=match == "body" and not body_answer))
        if not succeeded:
            raise ToolFailure(_all_failed(failures))
        rows = merge_rows(tables, min(limit or DEFAULT_LIMIT, MAX_LIMIT))
        body_match = match == "body"
        quoted_scope = f"{scope} across {', '.join(succeeded)}"
        table = render_lookup(query, quoted_scope, [], body_match=body_match)
        table += "".join(row.line + "\n" for row in rows)
        if failures:
            table += "\nFailed worlds (their rows are missing; retry, or ask each with mark_lookup):\n"
            table += "".join(f"- {world}: {message}\n" for world, message in failures)
        meta = {
            "worlds": str(len(worlds)),
            "succeeded": str(len(succeeded)),
            "failed": str(len(failures)),
            "matches": str(len(rows)),
        }
        if body_match and not catalog_only:
            meta["match"] = "body"
        extra: dict[str, str] = {}
        if catalog_only:
            extra["note"] = (
                f"answered from the catalog in {', '.join(catalog_only)}: {local_tools.catalog_reason(query, 'no body match there')}"
            )
        result = envelope(Status.OK, meta, table, keys=ALL_KEYS, verbose=verbose, extra=extra)
        if budget > 0:
            # The same expansion Tools.lookup runs, fetching with this caller's resolver.
            result = compact_table(result)
            result += await local_tools.expand(result, query, budget, self._fetcher(targets[0]))
        return result

    async def _lookup_one(
        self, target: Target, query: str, filter: str | None, limit: int | None, match: str | None
    ) -> Response | str:
        """One world's answer, or why it failed (a message for the agent)."""
        try:
            response = await target.backend.lookup(
                target.path, query, filter=filter, limit=limit, match=match or None, token=target.token
            )
            if response.status != Status.OK:
                response.raise_for_status()
                return f"the world answered {response.status}"
        except DemarkusError as exc:
            return str(exc)
        return response


def _all_failed(failures: list[tuple[str, str]]) -> str:
    by_message: dict[str, list[str]] = {}
    for world, message in failures:
        by_message.setdefault(message, []).append(world)
    if len(by_message) == 1:
        message, worlds = next(iter(by_message.items()))
        return f"every world failed ({', '.join(worlds)}): {message}"
    parts = "; ".join(f"{', '.join(worlds)}: {message}" for message, worlds in by_message.items())
    return f"every world failed: {parts}"


# --- registration ---------------------------------------------------------------------

WORLDS_DESCRIPTION = """List the worlds you can read through this gateway: each world's mark://<world>/ URL and whether you may write there.
Every tool URL names a world: mark://<world>/<path>, e.g. mark://docs/index.md#setup."""

LOOKUP_ALL_DESCRIPTION = """Search every world you can read at once, when you do not know which world holds the answer.
Returns one table of rows `mark://<world>/<path>` or `...#anchor`: each world's best row first, then the second best, and so on.
- scope is a path applied in every world (/ or /docs); limit is the total number of rows (default 10).
- match and budget work as in mark_lookup (budget > 0 prints the evidence after the table).
A world that failed is listed under "Failed worlds": its rows are missing, which is not proof they do not exist. Next: mark_fetch the best row's URL."""


def register(server: MCPServer, tools_for: Callable[[], GatewayTools]) -> None:
    """Add mark_worlds and mark_lookup_all to a server made by `build_server`."""

    @server.tool(name="mark_worlds", description=WORLDS_DESCRIPTION)
    @tool_errors
    async def mark_worlds() -> str:
        return await tools_for().worlds()

    @server.tool(name="mark_lookup_all", description=LOOKUP_ALL_DESCRIPTION)
    @tool_errors
    async def mark_lookup_all(
        query: Annotated[str, Field(description="Words to find (at least 2 characters), or * for every document.")],
        scope: Annotated[str, Field(description="A path applied in every world: / or a subtree such as /docs.")] = "/",
        filter: Annotated[
            str | None,
            Field(
                description="key=value clauses, comma-separated: tag=x, modified-after=2026-01-01, or any metadata key."
            ),
        ] = None,
        limit: Annotated[int | None, Field(description="Rows in total across the worlds (default 10).")] = None,
        match: Annotated[
            str | None, Field(description="catalog (tags and titles, default) or body (section text).")
        ] = None,
        budget: Annotated[int, Field(description="Tokens of evidence to print after the table; 0 = table only.")] = 0,
        verbose: Annotated[bool, Field(description="Show every metadata key.")] = False,
    ) -> str:
        return await tools_for().lookup_all(query, scope, filter, limit, match, budget, verbose)
