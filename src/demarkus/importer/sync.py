"""A store kept in step with a folder: catch up once (import what changed, archive what
is gone), then follow every saved change. Used by `demarkus sync` and by the commands
that import, watch and serve in one process (`demarkus mcp --docs`, `demarkus serve
--docs`).

With a local store the relation graph that `demarkus mcp` reads follows too, so
backlinks and relations are current after every change.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from ..graph import GraphStore
from ..graph.seed import observe_paths, seed_graph
from ..service import Service
from .apply import FileResult, Outcome, Source, Target
from .folder import Scan, Summary, import_folder, scan_folder
from .watch import apply_changes, watched

__all__ = ["FolderSync", "describe"]


def describe(result: FileResult) -> str:
    """One line for what a change did to one document."""
    name = result.path or result.relative
    if result.outcome in (Outcome.CREATED, Outcome.UPDATED):
        line = f"{result.outcome.value} {name} (+{result.versions} version{'s' if result.versions != 1 else ''})"
    else:
        line = f"{result.outcome.value} {name}"
    problems = "; ".join(result.problems) or result.why_skipped
    return f"{line}: {problems}" if problems else line


@dataclass
class FolderSync:
    """`source` kept in step in `target`. `service` and `graph` are set for a local store
    this process owns: its graph then learns every change. `report` hears one line per
    document a change touched."""

    source: Source
    target: Target
    report: Callable[[str], None]
    service: Service | None = None
    graph: GraphStore | None = None
    authority: str = ""
    archive_missing: bool = True
    """Whether the catch-up archives documents whose file is gone (`demarkus import` asks
    for it with --archive-missing; a sync always does)."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)
    """One change applied at a time: the catch-up and the watched batches never overlap."""

    async def catch_up(self, progress: Callable[[int], None] | None = None, scan: Scan | None = None) -> Summary:
        """Import what changed since the store last saw the folder and (unless told not
        to) archive the documents whose file is gone; `scan` is the folder's, when made."""
        scan = scan if scan is not None else scan_folder(self.source.folder)
        for gathered in (self.source.names, self.source.targets):  # from this scan, not another
            if gathered is not None:
                gathered.read(scan.files)
        with contextlib.ExitStack() as local:
            if self.service is not None:
                local.enter_context(self.service.deferred_index())
                local.enter_context(self.service.store.filling())  # a first import: one sync at the end
            summary = await import_folder(
                self.source, self.target, archive_missing=self.archive_missing, progress=progress, scan=scan
            )
            if self.graph is not None and self.service is not None:
                # one parse per document for the relation graph and the section index, as a
                # world load makes: the deferred index then finds them in step
                seed_graph(self.graph, self.service.store, self.authority, index=self.service.index)
        return summary

    async def run(
        self,
        stop: asyncio.Event,
        *,
        progress: Callable[[int], None] | None = None,
        caught_up: Callable[[Summary], None] | None = None,
    ) -> None:
        """Watch the folder, catch up, then apply every change until `stop` is set. The
        watch starts first, so a file saved while the store catches up is not missed."""
        started = asyncio.Event()
        watcher = asyncio.create_task(self._follow(stop, started.set))
        waiting = asyncio.create_task(started.wait())
        await asyncio.wait({watcher, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if watcher.done():
            await watcher  # it failed before watching: say why
            return
        try:
            async with self._lock:
                summary = await self.catch_up(progress)
            if caught_up is not None:
                caught_up(summary)
        except BaseException:
            stop.set()
            await watcher
            raise
        await watcher

    async def _follow(self, stop: asyncio.Event, ready: Callable[[], None]) -> None:
        async for changes in watched(self.source.folder, stop, ready):
            async with self._lock:
                batch = await apply_changes(self.source, self.target, changes)
            if self.graph is not None and self.service is not None:
                observe_paths(self.graph, self.service.store, self.authority, batch.paths)
            for result in batch.results:
                if result.outcome != Outcome.UNCHANGED:
                    self.report(describe(result))
