"""The edge of `demarkus import` and `demarkus sync`: open the target (a local store or an
authority), show progress on stderr, run the folder import (and, for sync, follow the
folder), and record the relations where `demarkus mcp` reads them."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from ..client import Client
from ..errors import BadRequestError
from ..graph import GraphStore
from ..protocol import parse_mark_url
from ..service import Service
from .apply import Source, Target
from .folder import Summary, scan_folder
from .history import GitHistory, find_repository
from .myst import FolderTargets, NoteTargets
from .note import NoteAliases, NoteBlocks
from .site import Site
from .sync import FolderSync
from .wikilink import FolderNames

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
CATCH_UP_WAIT = 10.0
"""Seconds a server waits for the first import of its docs folder before it starts: a
folder of up to about two thousand notes is served whole from the first call, and an MCP client
(which gives a server tens of seconds to start) is never kept waiting too long."""


def docs_store(folder: Path) -> Path:
    """The embedded store of a docs folder: under the user's data directory (e.g.
    `~/.local/share/demarkus/docs/`), one per folder, named after it and keyed by its
    resolved path so two folders of the same name never share a store."""
    import platformdirs

    resolved = folder.resolve()
    key = hashlib.sha256(str(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    name = _UNSAFE.sub("-", resolved.name).strip("-.") or "root"
    return platformdirs.user_data_path("demarkus") / "docs" / f"{name}-{key}"


def run_import(
    folder: Path,
    *,
    root: Path | None,
    url: str | None,
    prefix: str,
    use_git: bool,
    archive_missing: bool,
    authority: str,
    token: str | None = None,
    ca: Path | None = None,
    insecure: bool = False,
    sites: tuple[Site, ...] = (),
    wikilinks: bool = False,
) -> Summary:
    """Import `folder` into the store at `root` (created when missing) or the authority
    at `url`: a sync's catch-up, which archives missing files only when asked. `sites`:
    the web addresses the folder is published at (`site.parse_site` form); `wikilinks`:
    make `[[name]]` links to the notes (`wikilink`).

    Raises:
        ConfigError: --git outside a git repository, or another process writes the store.
        TransportError: the authority cannot be reached.
    """
    return run_sync(
        folder,
        root=root,
        url=url,
        prefix=prefix,
        use_git=use_git,
        watch=False,
        authority=authority,
        report=lambda _line: None,
        token=token,
        ca=ca,
        insecure=insecure,
        archive_missing=archive_missing,
        verb="importing",
        sites=sites,
        wikilinks=wikilinks,
    )


def run_sync(
    folder: Path,
    *,
    root: Path | None,
    url: str | None,
    prefix: str,
    use_git: bool,
    watch: bool,
    authority: str,
    report: Callable[[str], None],
    token: str | None = None,
    ca: Path | None = None,
    insecure: bool = False,
    archive_missing: bool = True,
    verb: str = "syncing",
    sites: tuple[Site, ...] = (),
    wikilinks: bool = False,
) -> Summary:
    """Bring the store at `root` (created when missing) or the authority at `url` in step
    with `folder`: import what changed, archive the documents whose file is gone; with
    `watch`, go on applying every change until SIGINT or SIGTERM. Returns the catch-up's
    summary; `report` hears the catch-up's lines, then one line per change.

    Raises:
        ConfigError: --git outside a git repository, or another process writes the store.
        TransportError: the authority cannot be reached.
    """
    history = GitHistory(find_repository(folder)) if use_git else None
    source = Source(folder, prefix, history, sites, _names(folder, wikilinks), _targets(folder))
    try:
        if root is not None:
            from ..graph.store import default_graph_path

            root.mkdir(parents=True, exist_ok=True)
            service = Service.open(root, trusted=True, dates_versions=True)
            graph_path = default_graph_path(root, authority)
            graph_path.parent.mkdir(parents=True, exist_ok=True)
            try:
                with GraphStore(graph_path) as graph:
                    target = Target(service, dates_versions=True)
                    sync = FolderSync(
                        source, target, report, service, graph, authority, archive_missing=archive_missing
                    )
                    return asyncio.run(_synced(sync, watch, report, verb))
            finally:
                service.close()
        assert url is not None
        return asyncio.run(_synced_remote(source, url, watch, report, token, ca, insecure, archive_missing, verb))
    finally:
        if history is not None:
            history.close()


async def _synced_remote(
    source: Source,
    url: str,
    watch: bool,
    report: Callable[[str], None],
    token: str | None,
    ca: Path | None,
    insecure: bool,
    archive_missing: bool,
    verb: str,
) -> Summary:
    if not token:
        raise BadRequestError(f"{verb} into an authority needs a publish token: pass --token or set DEMARKUS_AUTH")
    parsed = parse_mark_url(url)
    async with Client(parsed.authority, token=token, ca=ca, insecure=insecure, dial_host=parsed.host) as client:
        sync = FolderSync(source, Target(client, token=token), report, archive_missing=archive_missing)
        return await _synced(sync, watch, report, verb)


async def _synced(sync: FolderSync, watch: bool, report: Callable[[str], None], verb: str) -> Summary:
    """The catch-up alone, or (watching) the catch-up and every change until a signal."""
    if not watch:
        return await _with_progress(sync, verb)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    summaries: list[Summary] = []

    def caught_up(summary: Summary) -> None:
        summaries.append(summary)
        for line in summary.lines():
            report(line)
        report(f"watching {sync.source.folder} for changes (Ctrl-C stops)")

    await sync.run(stop, caught_up=caught_up)
    return summaries[0] if summaries else Summary(())


async def _with_progress(sync: FolderSync, verb: str) -> Summary:
    from rich.console import Console
    from rich.progress import Progress

    scan = scan_folder(sync.source.folder)  # once: it walks the folder and asks git what it ignores
    with Progress(transient=not sys.stderr.isatty(), console=Console(stderr=True)) as bar:
        task = bar.add_task(f"{verb} {sync.source.folder}", total=len(scan.files))
        return await sync.catch_up(lambda n: bar.advance(task, n), scan)


def docs_sync(
    folder: Path,
    service: Service,
    authority: str,
    report: Callable[[str], None],
    *,
    graph: GraphStore | None = None,
    prefix: str = "/",
    use_git: bool = False,
    sites: tuple[Site, ...] = (),
    wikilinks: bool = False,
) -> FolderSync:
    """The sync of a docs folder into a store this process serves (`service` trusted and
    dating versions: `Service.open(..., trusted=True, dates_versions=True)` or `as_owner()`).

    Raises:
        ConfigError: `use_git` and the folder is not inside a git repository.
    """
    history = GitHistory(find_repository(folder)) if use_git else None
    target = Target(service, dates_versions=True)
    return FolderSync(
        Source(folder, prefix, history, sites, _names(folder, wikilinks), _targets(folder)),
        target,
        report,
        service=service,
        graph=graph,
        authority=authority,
    )


def _names(folder: Path, wikilinks: bool) -> FolderNames | None:
    """The folder's note names, aliases and block ids for its wiki links and block
    references (None: they stay as written)."""
    if not wikilinks:
        return None
    return FolderNames(lambda: scan_folder(folder).files, NoteAliases(folder), NoteBlocks(folder))


def _targets(folder: Path) -> FolderTargets:
    """The targets the folder's notes declare (MyST's), which their links may name."""
    return FolderTargets(lambda: scan_folder(folder).files, NoteTargets(folder))


async def following(sync: FolderSync, work: Awaitable[None], report: Callable[[str], None]) -> None:
    """Run `work` (a server) while `sync` catches up and follows the folder; the sync ends
    with it. The server starts once the folder is imported, or after CATCH_UP_WAIT with
    what is imported so far. A sync that fails says why and leaves the server serving what
    it has."""
    stop = asyncio.Event()
    ready = asyncio.Event()

    def caught_up(summary: Summary) -> None:
        ready.set()
        for line in summary.lines():
            report(line)
        report(f"watching {sync.source.folder} for changes")

    task = asyncio.create_task(sync.run(stop, caught_up=caught_up))
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiting}, timeout=CATCH_UP_WAIT, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if not ready.is_set() and not task.done():
        report(f"still importing {sync.source.folder}; serving what is imported so far")

    def ended(done: asyncio.Task[None]) -> None:
        if not done.cancelled() and done.exception() is not None:
            report(f"the folder is no longer followed: {done.exception()}")

    task.add_done_callback(ended)
    try:
        await work
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await task
        if sync.source.history is not None:
            sync.source.history.close()
