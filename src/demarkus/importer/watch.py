"""Keep a store in step with a folder while it changes: every saved change to a markdown
file becomes a new version, a deleted file's document is archived.

The file system is watched with `watchfiles` (inotify, FSEvents, ReadDirectoryChangesW
underneath; it polls only where the platform offers nothing else). Changes arrive in
batches, a short quiet time after the last one, so an editor's save of several writes
makes one version. Each batch is applied with the folder import's own functions
(`apply.import_file`, `apply.archive_document`), one file at a time; a folder that
appears is scanned, one that disappears archives the documents under it. The folder is
only read.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from watchfiles import Change, awatch

from ..errors import DemarkusError
from ..protocol import Status
from .apply import FileResult, Outcome, Source, Target, archive_document, import_file
from .folder import documents_under, scan_folder
from .ignored import Ignored
from .note import document_path, in_app_folder, markdown_suffix, note_file, note_name

__all__ = ["DEBOUNCE_MS", "Batch", "apply_changes", "watched"]

DEBOUNCE_MS = 200
"""Quiet time that closes a batch: an editor's save is a few writes within milliseconds,
and a change must show within 2 s."""
STEP_MS = 50
"""How often the watcher looks for the end of a batch."""
READY_MS = 200
"""Quiet time after which the watcher reports that it watches (its first empty batch)."""


@dataclass(frozen=True, slots=True)
class Batch:
    """What one batch of changes did, file by file."""

    results: tuple[FileResult, ...]

    @property
    def paths(self) -> list[str]:
        """Documents whose store state changed (for the relation graph)."""
        moved = (Outcome.CREATED, Outcome.UPDATED, Outcome.ARCHIVED)
        return sorted({r.path for r in self.results if r.outcome in moved and r.path})


def _relative(folders: Iterable[Path], changed: str) -> str | None:
    """The `/`-separated path inside the folder (named as given or resolved: the watcher
    may report either), or None for what the import never reads (hidden files and
    folders, an editor's own folder (`note.is_app_folder`), paths outside)."""
    for folder in folders:
        try:
            relative = Path(changed).relative_to(folder).as_posix()
        except ValueError:
            continue
        parts = relative.split("/")
        if relative in ("", ".") or any(part.startswith(".") for part in parts) or in_app_folder(folder, parts):
            return None
        return relative
    return None


async def apply_changes(source: Source, target: Target, changes: Iterable[tuple[Change, str]]) -> Batch:
    """Bring the store in step with the paths that changed: each file imported or its
    document archived, by what is on disk now (the last event for a path does not need
    to be trusted: a file saved through a rename shows as deleted and added)."""
    folder = source.folder.absolute()
    names = (folder, source.folder.resolve())
    touched = sorted({r for _, path in changes if (r := _relative(names, path)) is not None})
    if touched:  # what git ignores now (a .gitignore may have changed too) is not read
        ignored = Ignored.of(folder)
        touched = [relative for relative in touched if relative not in ignored]
    gathered = [reader for reader in (source.names, source.targets) if reader is not None]
    if touched and gathered:  # a note may have come or gone, or declare other targets: one scan for both
        files = scan_folder(folder).files
        for reader in gathered:
            reader.read(files)
    results: list[FileResult] = []
    for relative in touched:
        on_disk = folder / relative
        if on_disk.is_symlink():
            continue
        if on_disk.is_dir():
            for inner in scan_folder(on_disk).files:
                results.append(await import_file(source, target, f"{relative}/{inner}"))
        elif markdown_suffix(relative) is not None:
            # the note's file now: this one, or another of its names (b.md gone, b.mdx left)
            file = note_file(folder, note_name(relative))
            if file is not None:
                results.append(await import_file(source, target, file))
            elif not on_disk.exists():
                results.extend(await _archive_gone(source, target, relative))
        elif not on_disk.exists():
            results.extend(await _archive_gone(source, target, relative))
    return Batch(tuple(results))


async def _archive_gone(source: Source, target: Target, relative: str) -> list[FileResult]:
    """Archive the document of a file that is gone, or every document under a folder
    that is gone; a path the store holds no current document for is nothing to do."""
    try:
        if markdown_suffix(relative) is not None:
            gone = [document_path(relative, source.prefix)]
        else:
            gone = [path async for path in documents_under(target, _folder_path(relative, source.prefix))]
    except DemarkusError:
        return []  # a name the import refuses never became a document
    results = []
    for path in gone:
        if (await target.backend.fetch(path, token=target.token)).status == Status.OK:
            results.append(await archive_document(target, path))
    return results


def _folder_path(relative: str, prefix: str) -> str:
    """The document folder of a folder inside the watched one."""
    return document_path(relative + "/_.md", prefix).removesuffix("/_.md")


async def watched(
    folder: Path, stop: asyncio.Event, ready: Callable[[], None] | None = None
) -> AsyncIterator[set[tuple[Change, str]]]:
    """Each batch of changes under `folder` until `stop` is set; `ready` is called once
    the folder is watched (every change from then on is in a batch)."""
    announced = False
    async for changes in awatch(
        folder,
        stop_event=stop,
        debounce=DEBOUNCE_MS,
        step=STEP_MS,
        recursive=True,
        yield_on_timeout=True,
        rust_timeout=READY_MS,
    ):
        if not announced:
            announced = True
            if ready is not None:
                ready()
        if changes:
            yield changes
