"""Bring one document in step with one file, through any `Backend`.

`import_file` reads a file (and, with git, its history) and publishes only what the
store lacks; `archive_document` archives the document of a file that is gone. A folder
import calls them once per file; a file watcher can call them for the one file that
changed. Nothing here reads anything but the one file and its history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import partial
from pathlib import Path
from types import MappingProxyType

from ..backend import Backend
from ..errors import DemarkusError, NoTextError, NotFoundError
from ..protocol import MAX_PUBLISHER_BYTES, RESERVED_KEYS, Status
from ..render import format_time
from ..store.versionfile import sha256_tag
from .history import GIT_BASE, GitHistory, pending, revision_metadata
from .myst import FolderTargets, Targets
from .note import LinkForm, Note, document_path, has_note, parse_note, read_file
from .site import Pages, Site, Sites
from .wikilink import FolderNames, WikiLinks

__all__ = ["Current", "FileResult", "Outcome", "Source", "Target", "Version", "archive_document", "import_file"]


class Outcome(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    ARCHIVED = "archived"
    SKIPPED = "skipped"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Target:
    """Where documents go. `dates_versions`: the backend is a store this process owns
    (trusted), so each version may carry its own time (`modified`); an authority over
    the network dates versions by its own clock."""

    backend: Backend
    token: str | None = None
    dates_versions: bool = False


@dataclass(frozen=True, slots=True)
class Source:
    """Where files come from: the folder, the document folder they go under, and the
    repository's history when versions follow git."""

    folder: Path
    prefix: str = "/"
    history: GitHistory | None = None
    sites: tuple[Site, ...] = ()
    """Web addresses the folder is published at (`site.parse_site`)."""
    names: FolderNames | None = None
    """The folder's note names, when wiki links are made links to the notes."""
    targets: FolderTargets | None = None
    """The targets the folder's notes declare (MyST's `(name)=`), which links name."""

    @property
    def links(self) -> tuple[LinkForm, ...]:
        """The link forms made links to the folder's notes: its pages, its sites, its wiki
        links, its targets."""
        forms: list[LinkForm] = []
        if self.sites:  # a path from the root is first the site's (`Sites`), then a document path
            forms.append(Sites(self.sites, self.prefix, partial(has_note, self.folder)))
        forms.append(Pages(self.prefix, partial(has_note, self.folder)))
        if self.names is not None:
            forms.append(WikiLinks(self.names.current(), self.prefix))
        if self.targets is not None:
            forms.append(Targets(self.targets.current(), self.prefix))
        return tuple(forms)

    @property
    def vault(self) -> bool:
        """Whether notes are read as the editors that write wiki links write them: their
        `key:: value` properties and `#tags` (`note.parse_note`)."""
        return self.names is not None


@dataclass(frozen=True, slots=True)
class Version:
    """One version to publish; `modified` is its time when it is not now."""

    body: bytes
    metadata: Mapping[str, str]
    modified: datetime | None = None


@dataclass(frozen=True, slots=True)
class Current:
    """The store's current version of a document: enough to tell whether a version is new."""

    version: int
    content_hash: str
    metadata: Mapping[str, str]

    def same(self, version: Version) -> bool:
        return self.content_hash == sha256_tag(version.body) and dict(self.metadata) == dict(version.metadata)


@dataclass(frozen=True, slots=True)
class FileResult:
    """What happened to one file: its outcome, the versions it added, and the problems
    (for a refused file, why; for a file with git history, revisions left out)."""

    relative: str
    path: str
    outcome: Outcome
    versions: int = 0
    problems: tuple[str, ...] = field(default_factory=tuple)
    why_skipped: str = ""
    """Why a note was skipped, when that is no failure: it has no text (a site's list page)."""


async def import_file(source: Source, target: Target, relative: str) -> FileResult:
    """Publish what the store lacks of the file at `relative` (a `/`-separated path in
    `source.folder`): nothing when it is unchanged, one version when it changed, and with
    git every commit not imported yet, then the working tree when it differs from HEAD.
    An archived document whose file is back is restored first. Never raises for a
    problem of this one file: it becomes a refused result, and the import goes on; a note
    with no text is skipped (`why_skipped`)."""
    try:
        path = document_path(relative, source.prefix)
    except DemarkusError as exc:
        return FileResult(relative, "", Outcome.REFUSED, problems=(exc.message,))
    try:
        raw = read_file(source.folder / relative)
        worktree = parse_note(raw, path, links=source.links, vault=source.vault)
        current, restored = await _current(target, path)
        problems: list[str] = []
        versions = _versions(source, relative, raw, worktree, current, problems)
        added = await publish_versions(target, path, current, versions)
    except NoTextError as exc:  # a site's list page: nothing to import, nothing wrong
        return FileResult(relative, path, Outcome.SKIPPED, why_skipped=exc.message)
    except DemarkusError as exc:
        return FileResult(relative, path, Outcome.REFUSED, problems=(exc.message,))
    if current is None:
        outcome = Outcome.CREATED
    elif added or restored:
        outcome = Outcome.UPDATED
    else:
        outcome = Outcome.UNCHANGED
    return FileResult(relative, path, outcome, added, tuple(problems))


async def archive_document(target: Target, path: str) -> FileResult:
    """Archive the document whose file is gone (its versions stay readable)."""
    response = await target.backend.archive(path, token=target.token)
    try:
        response.raise_for_status()
    except DemarkusError as exc:
        return FileResult("", path, Outcome.REFUSED, problems=(exc.message,))
    return FileResult("", path, Outcome.ARCHIVED)


async def publish_versions(target: Target, path: str, current: Current | None, versions: Sequence[Version]) -> int:
    """Publish each version that differs from the one before it; returns how many.

    Raises:
        DemarkusError: the authority refused a version (a conflict with another writer,
            a token that does not cover the path, ...).
    """
    added = 0
    for version in versions:
        if current is not None and current.same(version):
            continue
        metadata = dict(version.metadata)
        if target.dates_versions and version.modified is not None:
            metadata["modified"] = format_time(version.modified)
        response = await target.backend.publish(
            path,
            version.body,
            metadata=metadata,
            expected_version=current.version if current is not None else 0,
            token=target.token,
        )
        response.raise_for_status()
        added += response.status == Status.CREATED
        current = Current(int(response.metadata["version"]), sha256_tag(version.body), version.metadata)
    return added


async def _current(target: Target, path: str) -> tuple[Current | None, bool]:
    """(the current version or None, whether it was archived and has been restored)."""
    backend = target.backend
    response = await backend.fetch(path, token=target.token)
    restored = False
    if response.status == Status.ARCHIVED:
        (await backend.publish(path, b"", token=target.token)).raise_for_status()  # restore
        response, restored = await backend.fetch(path, token=target.token), True
    if response.status == Status.NOT_FOUND:
        return None, False
    response.raise_for_status()
    meta = response.metadata
    if "version" not in meta or "content-hash" not in meta:
        raise NotFoundError(f"{path} is a folder in the store, not a document; rename the file or the folder")
    publisher = {k: v for k, v in meta.items() if k not in RESERVED_KEYS}
    return Current(int(meta["version"]), meta["content-hash"], MappingProxyType(publisher)), restored


def _versions(
    source: Source, relative: str, raw: bytes, worktree: Note, current: Current | None, problems: list[str]
) -> list[Version]:
    """The versions to offer, oldest first: without git the file as it is; with git each
    pending commit, then the working tree (marked with the commit it sits on, or as that
    commit itself when it does not differ from it)."""
    history = source.history.revisions(source.folder / relative) if source.history is not None else []
    if source.history is None or not history:
        problems.extend(_left_out(worktree))
        return [Version(worktree.body, worktree.metadata)]
    versions = []
    for revision in pending(history, dict(current.metadata) if current is not None else None):
        try:
            note = parse_note(
                source.history.read(revision),
                worktree.path,
                revision_metadata(revision),
                source.links,
                vault=source.vault,
            )
        except DemarkusError as exc:
            problems.append(f"commit {revision.commit[:12]} left out: {exc.message}")
            continue
        versions.append(Version(note.body, note.metadata, revision.time))
    head = history[-1]
    if raw == source.history.read(head):
        last = parse_note(raw, worktree.path, revision_metadata(head), source.links, vault=source.vault)
        versions.append(Version(last.body, last.metadata, head.time))
    else:  # parsed again with its mark, so the tags leave room for it
        last = parse_note(raw, worktree.path, {GIT_BASE: head.commit}, source.links, vault=source.vault)
        versions.append(Version(last.body, last.metadata))
    problems.extend(_left_out(last))
    return versions


def _left_out(note: Note) -> list[str]:
    """The warnings for what of a note its metadata does not hold: the frontmatter keys
    left out, by cause, each with what would keep it; and tags its text writes that there
    was no room for."""
    problems = []
    causes = (
        (note.keys_nested, "a mapping or a list of lists, where metadata is text or a list of text: flatten"),
        (note.keys_unspelled, "no metadata key spells it: a key keeps its ASCII letters and digits; rename"),
        (note.keys_taken, "a key the note or the server already has: rename"),
        (note.keys_crowded, f"no room, metadata holds at most {MAX_PUBLISHER_BYTES} bytes: shorten"),
    )
    named: list[str] = []
    for keys, cause in causes:
        if keys:
            pronoun = "it" if len(keys) == 1 else "them"
            named.append(f"{_named(keys, '')} ({cause} {pronoun} to keep {pronoun})")
    if named:
        problems.append(f"{_count(note.keys_left_out, 'frontmatter key')} left out: {'; '.join(named)}")
    if note.tags_left_out:
        problems.append(
            f"{len(note.tags_left_out)} tags its text writes left out ({_named(note.tags_left_out, '#')}): a "
            f"document's metadata holds at most {MAX_PUBLISHER_BYTES} bytes; write fewer #tags, or shorten its "
            "frontmatter"
        )
    return problems


def _count(items: Sequence[str], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _named(items: Sequence[str], mark: str) -> str:
    return ", ".join(f"{mark}{item}" for item in items[:3]) + (", ..." if len(items) > 3 else "")
