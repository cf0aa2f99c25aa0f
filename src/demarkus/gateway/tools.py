"""The gateway's tools: the local tool set (`Tools`, unchanged, over the caller's
`GatewayResolver`) plus `mark_worlds` and `mark_lookup_all`.

`mark_lookup` is `Tools.lookup` itself: the resolver names every location
`mark://<world><path>` while the table and the evidence are printed, so the budget counts
the very text the caller receives. `mark_lookup_all` sends one LOOKUP to every world the
caller can read, in parallel, and merges the rows (each named `mark://<world>/<path>#anchor`):

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
...), then importance (highest first), then world, then location; cut to the global
limit. With a budget, the expansion is the very selection `Tools.lookup` runs, over the
merged table and fetching through the same resolver with the caller's tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from ..access import HIDDEN, hidden_count, hidden_note
from ..catalog import DEFAULT_LIMIT, MAX_LIMIT
from ..errors import DemarkusError
from ..expand.select import Selection, select_evidence, weak
from ..expand.table import Table, TableRow
from ..mcp.server import lookup_result, tool_errors
from ..mcp.text import envelope
from ..mcp.tools import Target, ToolFailure, Tools, catalog_reason, check_lookup_arguments
from ..protocol import (
    INFORMATIVE,
    INFORMATIVE_WORDS,
    Response,
    Status,
    normalize_scope,
    parse_informative,
    parse_informative_words,
)
from ..render import escape_cell, render_lookup
from .qualify import qualify_versions, world_of, world_prefix
from .resolver import GatewayResolver

ALL_KEYS = ("worlds", "succeeded", "failed", "matches", "match")
WORLDS_KEYS = ("worlds",)


def telling_anywhere(telling: Sequence[frozenset[str] | None]) -> frozenset[str] | None:
    """The worlds' informative words taken together: a word that tells documents apart in
    one world does in the merged answer; None (every query word counts) when a world sent
    none, since its words are then unknown."""
    if not telling or any(words is None for words in telling):
        return None
    return frozenset().union(*(words for words in telling if words is not None))


def strongest(informative: Sequence[tuple[int, int] | None]) -> tuple[int, int] | None:
    """The worlds' answers' `informative` taken together, so that the merged answer is weak
    only when every world's is: a world's that is not weak, else the one whose best row
    holds the most; None when a world sent none."""
    if not informative or any(item is None for item in informative):
        return None
    sent = [item for item in informative if item is not None]
    return next((item for item in sent if not weak(item)), max(sent, key=lambda item: item[0]))


@dataclass(frozen=True, slots=True)
class _Ranked:
    """One world's row, and what the merge sorts it by."""

    rank: int
    world: str
    row: TableRow

    def key(self) -> tuple[int, float, str, str]:
        return (self.rank, -self.row.importance, self.world, self.row.location)


def merge_rows(tables: dict[str, Table], limit: int, width: int) -> list[TableRow]:
    """Every world's rows, named in that world: per-world rank, then importance (highest
    first), then world, then location; the first `limit`. A row short of `width` cells (a
    catalog answer in a body table) gets empty ones. Pure."""
    ranked = [
        _Ranked(rank, world, row)
        for world, table in tables.items()
        for rank, row in enumerate(table.named(_in_world(world)).rows)
    ]
    ranked.sort(key=_Ranked.key)
    rows = [item.row for item in ranked[:limit]]
    return [TableRow(row.document, row.anchor, (*row.cells, *[""] * (width - len(row.cells)))) for row in rows]


def _in_world(world: str) -> Callable[[str], str]:
    prefix = world_prefix(world)
    return lambda path: prefix + path


class GatewayTools(Tools):
    """One caller's tools for one MCP session (or one request, without a session)."""

    resolver: GatewayResolver

    # --- the local tools, world-qualified ----------------------------------------------

    async def versions(self, url: str) -> str:
        target = self._resolve(url)
        return qualify_versions(await super().versions(url), world_of(target.url))

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

    async def lookup_all_selection(
        self,
        query: str,
        scope: str = "/",
        filter: str | None = None,
        limit: int | None = None,
        match: str | None = None,
        budget: int = 0,
        verbose: bool = False,
    ) -> tuple[str, Selection | None]:
        """The merged lookup's text, and with a budget the selection behind its evidence."""
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
        answers = await asyncio.gather(*(self._lookup_one(t, query, filter, limit, match, budget > 0) for t in targets))
        tables: dict[str, Table] = {}
        failures: list[tuple[str, str]] = []
        catalog_only: list[str] = []
        hidden: dict[str, int] = {}
        current: dict[str, str] = {}
        informative: list[tuple[int, int] | None] = []
        telling: list[frozenset[str] | None] = []
        carried = True
        for world, target, answer in zip(worlds, targets, answers, strict=True):
            if isinstance(answer, str):
                failures.append((world, answer))
                continue
            table = Table.parse(answer.text)
            if table is None:
                failures.append((world, "the world answered without a lookup table"))
                continue
            tables[world] = table
            informative.append(parse_informative(answer.metadata.get(INFORMATIVE)))
            telling.append(parse_informative_words(answer.metadata.get(INFORMATIVE_WORDS)))
            current.update(self._etags(target, answer))
            if hidden_count(answer.metadata):
                hidden[world] = hidden_count(answer.metadata)
                carried = carried and bool(target.token)
            if match == "body" and answer.metadata.get("match") != "body":
                catalog_only.append(world)
        if not tables:
            raise ToolFailure(_all_failed(failures))
        body_match = match == "body"
        quoted_scope = f"{scope} across {', '.join(tables)}"
        merged = Table.parse(render_lookup(query, quoted_scope, [], body_match=body_match))
        assert merged is not None  # the one writer's table always parses
        rows = merge_rows(tables, min(limit or DEFAULT_LIMIT, MAX_LIMIT), len(merged.columns) - 1)
        after = [""]
        if failures:
            after = ["", "Failed worlds (their rows are missing; retry, or ask each with mark_lookup):"]
            after += [f"- {world}: {message}" for world, message in failures] + [""]
        merged = replace(merged, rows=tuple(rows), after=tuple(after))
        meta = {
            "worlds": str(len(worlds)),
            "succeeded": str(len(tables)),
            "failed": str(len(failures)),
            "matches": str(len(rows)),
        }
        if body_match and not catalog_only:
            meta["match"] = "body"
        extra: dict[str, str] = {}
        if catalog_only:
            reason = catalog_reason(query, "no body match there")
            extra["note"] = f"answered from the catalog in {', '.join(catalog_only)}: {reason}"
        if hidden:
            where = f"under {scope} in {', '.join(hidden)}"
            extra[HIDDEN] = hidden_note(
                sum(hidden.values()),
                ("document", "documents"),
                where,
                carried=carried,
                advice=self.resolver.token_advice,
            )
        if budget > 0:
            merged = merged.compact()
        result = envelope(Status.OK, meta, merged.render(), keys=ALL_KEYS, verbose=verbose, extra=extra)
        if budget <= 0:
            return result, None
        # The same selection Tools.lookup runs, fetching with this caller's resolver.
        selection = await select_evidence(
            result,
            merged.rows,
            query,
            budget,
            self._fetcher(current),
            strongest(informative),
            telling_anywhere(telling),
        )
        return result + selection.text, selection

    async def _lookup_one(
        self, target: Target, query: str, filter: str | None, limit: int | None, match: str | None, etags: bool
    ) -> Response | str:
        """One world's answer, or why it failed (a message for the agent); `etags`: ask for
        the etags of its rows' documents (`row-etags`)."""
        try:
            response = await self._ask_lookup(target, query, filter, limit, match, etags)
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
    ) -> Annotated[CallToolResult, str]:
        text, selection = await tools_for().lookup_all_selection(query, scope, filter, limit, match, budget, verbose)
        return lookup_result(text, selection)
