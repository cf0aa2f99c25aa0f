"""The edge of `demarkus import`: open the target (a local store or an authority), show
progress on stderr, run the folder import, and record the relations where
`demarkus mcp` reads them."""

from __future__ import annotations

import sys
from pathlib import Path

from ..backend import Backend
from ..client import Client
from ..errors import BadRequestError
from ..protocol import parse_mark_url
from ..service import Service
from .apply import Source, Target
from .folder import Summary, import_folder, scan_folder
from .history import GitHistory, find_repository


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
) -> Summary:
    """Import `folder` into the store at `root` (created when missing) or the authority
    at `url`.

    Raises:
        ConfigError: --git outside a git repository, or another process writes the store.
        TransportError: the authority cannot be reached.
    """
    import asyncio

    history = GitHistory(find_repository(folder)) if use_git else None
    source = Source(folder=folder, prefix=prefix, history=history)
    try:
        if root is not None:
            root.mkdir(parents=True, exist_ok=True)
            service = Service.open(root, trusted=True, dates_versions=True)
            try:
                with service.deferred_index():
                    summary = asyncio.run(_imported(source, Target(service, dates_versions=True), archive_missing))
                _seed_graph(root, service, authority)
            finally:
                service.close()
            return summary
        assert url is not None
        return asyncio.run(_remote(source, url, archive_missing, token, ca, insecure))
    finally:
        if history is not None:
            history.close()


async def _remote(
    source: Source, url: str, archive_missing: bool, token: str | None, ca: Path | None, insecure: bool
) -> Summary:
    if not token:
        raise BadRequestError("importing into an authority needs a publish token: pass --token or set DEMARKUS_AUTH")
    parsed = parse_mark_url(url)
    async with Client(parsed.authority, token=token, ca=ca, insecure=insecure, dial_host=parsed.host) as client:
        backend: Backend = client
        return await _imported(source, Target(backend, token=token), archive_missing)


async def _imported(source: Source, target: Target, archive_missing: bool) -> Summary:
    from rich.console import Console
    from rich.progress import Progress

    scan = scan_folder(source.folder)
    with Progress(transient=not sys.stderr.isatty(), console=Console(stderr=True)) as bar:
        task = bar.add_task(f"importing {source.folder}", total=len(scan.files))
        return await import_folder(
            source, target, archive_missing=archive_missing, progress=lambda n: bar.advance(task, n), scan=scan
        )


def _seed_graph(root: Path, service: Service, authority: str) -> None:
    """Record every document's relations and links where `demarkus mcp --root` reads
    them, so backlinks are known before any document is explored."""
    from ..graph import GraphStore
    from ..graph.seed import seed_graph
    from ..mcp.server import default_graph_path

    path = default_graph_path(root, authority)
    path.parent.mkdir(parents=True, exist_ok=True)
    with GraphStore(path) as graph:
        seed_graph(graph, service.store, authority)
