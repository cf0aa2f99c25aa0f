"""The on-disk store: versioned documents, the content-hash index, archive and recovery.

Layout and the atomic file steps are in `layout.py`. A write puts the whole version file in
a hidden temp file, fsyncs it, hard-links it to `versions/<name>.v<N>` (the exclusive create)
and only then swaps the current symlink, so a crash never shows a partial version and the
hash chain always verifies. Opening the store, and every write, first rolls the symlink
forward to the newest complete version. Filling an empty store (`FileStore.filling`, a
world load) skips the syncs of each write and syncs once at the end.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .. import protocol
from ..errors import (
    ArchivedError,
    BadRequestError,
    ConflictError,
    IntegrityError,
    NotFoundError,
)
from . import layout
from .layout import Location
from .versionfile import (
    VersionFile,
    parse_version,
    read_archived,
    serialize_version,
    set_archived,
    sha256_tag,
    stored_metadata,
    verify_chain,
)

logger = logging.getLogger(__name__)

_LOCK_NAME = ".demarkus.lock"
_FILLING_NAME = ".demarkus.filling"
"""Present while `FileStore.filling` writes without a sync each: a store opened with it was
left part way through, and is checked before it serves."""
_CACHE_ENTRIES = 2048
_CACHE_MAX_FILE = 256 * 1024
"""Parsed version files kept in memory: a file is immutable until an archive flag flip,
which replaces it (new inode), so (path, inode, mtime, size) identifies its bytes."""
_ROUTES = 4096
_ROUTE_CHARS = 4 * 1024 * 1024
"""Request paths whose mapping to disk is remembered (pure: a path always maps to the same
names; the disk is still asked on every request), at most this many and this many
characters of paths (deep paths hold a disk name per folder on the way)."""
_KEY_RE = re.compile(r"[a-z0-9-]+")
_BAD_VALUE_CHAR = re.compile("[\x00-\x08\x0a-\x1f\ud800-\udfff]")
"""A control character other than tab, or a lone surrogate (no UTF-8 form)."""


@dataclass(frozen=True, slots=True)
class StoredVersion:
    """One version of a document as read from disk."""

    path: str
    version: int
    archived: bool
    metadata: Mapping[str, str]
    body: bytes
    raw: bytes
    modified: datetime
    etag: str = field(init=False, repr=False, compare=False)
    """Lowercase hex SHA-256 of the whole version file, store frontmatter included."""
    content_hash: str = field(init=False, repr=False, compare=False)
    """`sha256-<hex>` of the body alone, the document's content address."""

    def __post_init__(self) -> None:
        # Once per parse, not per request: a FETCH answer carries both, and a parsed
        # version is kept (see `_load`).
        object.__setattr__(self, "etag", sha256_tag(self.raw).removeprefix("sha256-"))
        object.__setattr__(self, "content_hash", sha256_tag(self.body))


@dataclass(frozen=True, slots=True)
class VersionInfo:
    version: int
    modified: datetime


@dataclass(frozen=True, slots=True)
class WriteResult:
    """The document after a write; `changed` is False when the write was identical."""

    document: StoredVersion
    changed: bool


@dataclass(frozen=True, slots=True)
class Entry:
    """A listing row; directory names carry no trailing slash."""

    name: str
    is_dir: bool
    archived: bool = False


class FileStore:
    """Versioned documents under one root directory, safe across threads and processes."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self._root = root.resolve()
        self._lock = threading.Lock()
        self._by_hash: dict[str, frozenset[str]] = {}
        self._hash_of: dict[str, str] = {}
        self._parsed: dict[tuple[str, int, int, int], StoredVersion] = {}
        self._routes: dict[str, layout.Route] = {}
        self._route_chars = 0
        self._durable = True
        with self._write_lock():
            self._recover_tree()
            self._settle_filling()
        for path in self.documents():
            try:
                self._index(self.read(path))
            except (IntegrityError, NotFoundError) as exc:
                logger.warning("not indexing %s: %s", path, exc)

    @property
    def root(self) -> Path:
        return self._root

    # --- reads ---------------------------------------------------------------------------

    def read(self, path: str, version: int | None = None) -> StoredVersion:
        """The current version (or version `version`), archived or not; the caller decides.

        Raises:
            NotFoundError: no such document or version.
            IntegrityError: the version file is damaged.
        """
        loc = self._locate(path)
        current, _flat = layout.current_link(loc)
        if version is None:
            if current == 0:
                raise _no_document(loc)
            return self._load(loc, current)
        if version < 1:
            raise NotFoundError(_missing_version_message(loc, version))
        return self._load(loc, version)

    def current_version(self, path: str) -> int:
        """The current version number, 0 when there is no document at the path."""
        try:
            return layout.current_link(self._locate(path))[0]
        except NotFoundError:
            return 0

    def versions(self, path: str) -> list[VersionInfo]:
        """Every stored version, newest first.

        Raises:
            NotFoundError: the document has no versions.
        """
        loc = self._locate(path)
        infos = []
        for number in reversed(layout.version_numbers(loc)):
            try:
                mtime = os.lstat(loc.version_file(number)).st_mtime
            except FileNotFoundError:
                continue
            infos.append(VersionInfo(version=number, modified=layout.utc_seconds(mtime)))
        if not infos:
            raise _no_document(loc)
        return infos

    def verify(self, path: str) -> str | None:
        """Check the hash chain over all versions; None when it holds, else what broke.

        Raises:
            NotFoundError: the document has no versions.
        """
        loc = self._locate(path)
        numbers = layout.version_numbers(loc)
        if not numbers:
            raise _no_document(loc)
        raws = []
        for expected, number in enumerate(numbers, start=1):
            if number != expected:
                return f"v{expected} is missing"
            try:
                raws.append(layout.read_version_file(loc, number)[0])
            except (OSError, NotFoundError) as exc:
                return f"v{number} cannot be read ({exc})"
        return verify_chain(raws)

    def is_document(self, path: str) -> bool:
        """True when the path names a document with a current version."""
        return self.current_version(path) > 0

    def is_directory(self, path: str) -> bool:
        """True when the path names a real directory inside the root."""
        try:
            return layout.is_real_dir(self._locate(path).file)
        except (NotFoundError, BadRequestError):
            return False

    def list_dir(self, path: str) -> list[Entry]:
        """Documents and subdirectories, sorted by name; hidden, store and flat files left out.

        Raises:
            NotFoundError: the path is not a directory.
        """
        loc = self._locate(path)
        if not layout.is_real_dir(loc.file):
            raise NotFoundError(f"`{loc.path}` is not a directory; FETCH it if it is a document, or LIST its parent")
        entries = []
        for name in sorted(os.listdir(loc.file)):
            if name.startswith(".") or name == layout.VERSIONS:
                continue
            child = loc.child(name)
            if layout.is_real_dir(child.file):
                entries.append(Entry(name=name, is_dir=True))
            elif number := _current_or_zero(child):
                archived = _is_archived(child, number)
                entries.append(Entry(name=name, is_dir=False, archived=archived))
        return entries

    def has_documents(self, path: str) -> bool:
        """Whether the directory holds a document (one with a current version) at any depth."""
        top = self._locate(path)
        for directory, disk, names in layout.walk(top.file):
            if any(_current_or_zero(Location(layout.join(directory, name), disk, name)) for name in names):
                return True
        return False

    def documents(self) -> list[str]:
        """Every document path (one with a current version), sorted."""
        found = []
        for directory, disk, names in layout.walk(self._root):
            for name in names:
                loc = Location(layout.join(directory, name), disk, name)
                if _current_or_zero(loc):
                    found.append(loc.path)
        return sorted(found)

    @contextmanager
    def filling(self) -> Iterator[None]:
        """Fill an empty store (a world load) without a sync per write, and make it durable
        once on the way out, whatever happened: thousands of fsyncs become one `sync`. Until
        then a marker says the store is being filled, locked (flock) while this process
        fills it, so if the machine stops part way the next open checks every document
        (`_settle_filling`), and an open meanwhile leaves it alone. A store that already
        holds documents keeps a sync per write: a power cut must not put them at risk."""
        if not self._durable or self.has_documents("/"):
            yield
            return
        marker = self._root / _FILLING_NAME
        with self._write_lock():
            held = os.open(marker, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another process fills it: write as usual, synced
                os.close(held)
                held = -1
            else:
                layout.fsync_dir(self._root)
                self._durable = False
        if held < 0:
            yield
            return
        try:
            yield
        finally:
            with self._write_lock():
                self._durable = True
                os.sync()
                marker.unlink(missing_ok=True)
                layout.fsync_dir(self._root)
                os.close(held)

    def resolve_hash(self, content_hash: str) -> str | None:
        """The path of a current, non-archived document whose body has this hash."""
        paths = self._by_hash.get(content_hash)
        return min(paths) if paths else None

    # --- writes --------------------------------------------------------------------------

    def write(
        self,
        path: str,
        body: bytes,
        metadata: Mapping[str, str],
        expected_version: int | None = None,
        *,
        modified: datetime | None = None,
    ) -> WriteResult:
        """Store a new version unless body and metadata equal the current version's.

        `expected_version`: None skips the check, 0 means create-only, N must be current.
        A flat file at the path counts as the next version: it is migrated before the write.
        `modified`: the version's time when it is not now (an import of older history);
        it is kept between the previous version's time and now, so times never go
        backwards and never lie in the future.

        Raises:
            BadRequestError: bad path, body or metadata.
            ArchivedError: the document is archived.
            ConflictError: the document is not at `expected_version`, or another writer won.
        """
        return self._write_versions(path, [(body, modified)], metadata, expected_version)

    def write_history(
        self,
        path: str,
        bodies: Sequence[bytes],
        metadata: Mapping[str, str],
        expected_version: int | None = None,
    ) -> WriteResult:
        """Store each of `bodies`, oldest first, as `write` would one after the other (with
        the same `metadata`, the same checks, an unchanged body skipped), but made durable
        together, for a bulk load: each version file is fsynced, the folder once after the
        last, and the current symlink swaps once, to the last. n versions cost n + 2 fsyncs
        instead of 3n and one new symlink instead of n (a swap makes an inode and frees
        the old link's). Every body is checked before anything is written; a failure or a
        crash part way leaves the complete versions linked so far, which the next write or
        open rolls forward to, as after a crash between `write`'s link and swap.

        Raises:
            BadRequestError: no bodies, or a bad path, body or metadata.
            ArchivedError: the document is archived.
            ConflictError: the document is not at `expected_version`, or another writer won.
        """
        if not bodies:
            raise BadRequestError("a history needs at least one version; send the bodies oldest first")
        return self._write_versions(path, [(body, None) for body in bodies], metadata, expected_version)

    def _write_versions(
        self,
        path: str,
        bodies: Sequence[tuple[bytes, datetime | None]],
        metadata: Mapping[str, str],
        expected_version: int | None,
    ) -> WriteResult:
        """`write` and `write_history`: (body, modified) pairs stored in order."""
        loc = self._locate(path)
        for body, _modified in bodies:
            _check_body(loc.path, body)
        metadata = _checked_metadata(metadata)
        if expected_version is not None and expected_version < 0:
            raise BadRequestError(
                f"expected-version {expected_version} is invalid; send 0 to create, or the current version number"
            )
        with self._write_lock():
            if not loc.name or layout.is_real_dir(loc.file):
                raise BadRequestError(
                    f"`{loc.path}` is a directory; publish to a file inside it, "
                    f"like `{layout.join(loc.path, 'index.md')}`"
                )
            self._recover(loc)
            current, flat = layout.current_link(loc)
            if flat:
                current = max(layout.version_numbers(loc), default=0) + 1
            previous = self._load(loc, current) if current and not flat else None
            if previous is not None and previous.archived:
                raise ArchivedError(f"`{loc.path}` is archived; unarchive it by publishing an empty body, then retry")
            _check_expected(loc.path, expected_version, current)
            layout.make_versions_dir(loc, sync=self._durable)
            if flat:
                previous = self._migrate_flat(loc, current)
            number = current
            for body, modified in bodies:
                if previous and previous.body == body and dict(previous.metadata) == metadata:
                    continue
                number += 1
                previous_hash = sha256_tag(previous.raw) if previous else None
                raw = serialize_version(VersionFile(number, False, previous_hash, metadata, body))
                try:
                    layout.create_version(
                        loc, number, raw, _version_time(modified, previous), sync_file=self._durable, sync_folder=False
                    )
                except FileExistsError:
                    # Only a writer outside this lock (another program) can get here; its
                    # version is kept and the chain stays valid.
                    raise ConflictError(
                        f"another writer stored version {number} of `{loc.path}` first; "
                        "fetch it, merge your change, then retry",
                        your_version=expected_version if expected_version is not None else current,
                        server_version=number,
                    ) from None
                previous = self._written(loc, number, raw, metadata, body)
            assert previous is not None  # at least one body, so either kept or written
            if number == current:
                return WriteResult(document=previous, changed=False)
            if self._durable:
                layout.fsync_dir(loc.versions_dir)
            layout.swap_current(loc, number, sync=self._durable)
            self._index(previous)
            return WriteResult(document=previous, changed=True)

    def archive(self, path: str) -> StoredVersion:
        """Mark the current version archived (in place); pinned versions stay readable.

        Raises:
            NotFoundError: no document at the path.
        """
        return self._set_archived(path, True)

    def unarchive(self, path: str) -> StoredVersion:
        """Clear the archived flag of the current version.

        Raises:
            NotFoundError: no document at the path.
        """
        return self._set_archived(path, False)

    # --- internals -----------------------------------------------------------------------

    def _locate(self, path: str) -> Location:
        """`layout.locate`, its pure half (`layout.route`) remembered per path."""
        found = self._routes.get(path)
        if found is None:
            found = layout.route(self._root, path)
            if len(self._routes) >= _ROUTES or self._route_chars + found.chars > _ROUTE_CHARS:
                self._routes.clear()  # simple and bounded; a cold path costs one route
                self._route_chars = 0
            self._routes[path] = found
            self._route_chars += found.chars
        return layout.follow(found)

    def _set_archived(self, path: str, archived: bool) -> StoredVersion:
        """Rewrite the tip's `archived:` line; only the tip changes, so the chain holds."""
        loc = self._locate(path)
        with self._write_lock():
            self._recover(loc)
            current, _flat = layout.current_link(loc)
            if current == 0:
                raise _no_document(loc)
            document = self._load(loc, current)
            if document.archived != archived:
                layout.replace_version(loc, current, set_archived(document.raw, archived))
                document = self._load(loc, current)
            self._index(document)
            return document

    def _load(self, loc: Location, number: int) -> StoredVersion:
        """Read and parse one version file (parsed files are cached by inode and mtime).

        Raises:
            NotFoundError: the version file is missing.
            IntegrityError: it is damaged or names another version.
        """
        file = loc.version_file(number)
        try:
            st = os.lstat(file)
        except FileNotFoundError:
            raise NotFoundError(_missing_version_message(loc, number)) from None
        key = (file, st.st_ino, st.st_mtime_ns, st.st_size)
        cached = self._parsed.get(key)
        if cached is not None and cached.path == loc.path:
            return cached
        document = self._parse_file(loc, number)
        self._remember(key, document)
        return document

    def _written(
        self, loc: Location, number: int, raw: bytes, metadata: Mapping[str, str], body: bytes
    ) -> StoredVersion:
        """The version this process has just written, as `_load` would parse it, without
        reading it back: `parse_version` is `serialize_version`'s exact inverse, so only
        the file's time comes from the disk (a bulk load skips a parse per version)."""
        file = loc.version_file(number)
        st = os.lstat(file)
        document = StoredVersion(
            path=loc.path,
            version=number,
            archived=False,
            metadata=stored_metadata(metadata),
            body=body,
            raw=raw,
            modified=layout.utc_seconds(st.st_mtime),
        )
        self._remember((file, st.st_ino, st.st_mtime_ns, st.st_size), document)
        return document

    def _remember(self, key: tuple[str, int, int, int], document: StoredVersion) -> None:
        if len(document.raw) <= _CACHE_MAX_FILE:
            if len(self._parsed) >= _CACHE_ENTRIES:
                self._parsed.clear()  # simple and bounded; a cold read costs one parse
            self._parsed[key] = document

    def _parse_file(self, loc: Location, number: int) -> StoredVersion:
        try:
            raw, mtime = layout.read_version_file(loc, number)
        except FileNotFoundError:
            raise NotFoundError(_missing_version_message(loc, number)) from None
        try:
            vf = parse_version(raw)
        except IntegrityError as exc:
            raise IntegrityError(
                f"version {number} of `{loc.path}` is damaged ({exc}); restore it from a backup"
            ) from exc
        if vf.version != number:
            raise IntegrityError(
                f"version file {number} of `{loc.path}` says version {vf.version}; restore it from a backup"
            )
        return StoredVersion(
            path=loc.path,
            version=number,
            archived=vf.archived,
            metadata=vf.metadata,
            body=vf.body,
            raw=raw,
            modified=layout.utc_seconds(mtime),
        )

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        """Serialise writers: a thread lock in this process, flock(2) across processes."""
        with self._lock:
            fd = os.open(self._root / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def _migrate_flat(self, loc: Location, number: int) -> StoredVersion:
        """Turn a flat file into version `number` (1 unless history already exists)."""
        content = layout.read_flat(loc.file)
        previous = None
        if number > 1:
            previous = sha256_tag(layout.read_version_file(loc, number - 1)[0])
        raw = serialize_version(VersionFile(number, False, previous, {}, content))
        layout.create_version(loc, number, raw)
        layout.swap_current(loc, number)
        return self._load(loc, number)

    def _index(self, document: StoredVersion) -> None:
        """Keep the content-hash index to current, non-archived documents."""
        old = self._hash_of.pop(document.path, None)
        if old is not None:
            remaining = self._by_hash.get(old, frozenset()) - {document.path}
            if remaining:
                self._by_hash[old] = remaining
            else:
                self._by_hash.pop(old, None)
        if not document.archived:
            digest = document.content_hash
            self._hash_of[document.path] = digest
            self._by_hash[digest] = self._by_hash.get(digest, frozenset()) | {document.path}

    def _recover_tree(self) -> None:
        """At open: roll every document forward and drop leftover temp files."""
        for directory, disk, _names in layout.walk(self._root):
            layout.remove_temps(disk)
            versions_dir = disk / layout.VERSIONS
            if not layout.is_real_dir(versions_dir):
                continue
            layout.remove_temps(versions_dir)
            highest: dict[str, int] = {}
            for name, number in layout.version_files(versions_dir):  # one listing per folder
                highest[name] = max(number, highest.get(name, 0))
            for name in sorted(highest):
                path = layout.join(directory, name)
                try:
                    self._recover(self._locate(path), highest[name])
                except (BadRequestError, NotFoundError, IntegrityError, OSError) as exc:
                    logger.warning("cannot recover %s: %s", path, exc)

    def _settle_filling(self) -> None:
        """At open: a fill that stopped part way (`filling`) is kept when every document's
        chain verifies, once what it wrote is on the disk; a power cut may have left a
        version short, and then the store is refused before it serves a damaged byte.

        Raises:
            IntegrityError: a document does not verify (the message says what to do).
        """
        marker = self._root / _FILLING_NAME
        try:
            held = os.open(marker, os.O_RDWR | os.O_NOFOLLOW)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a fill is under way, in this process or another
            os.close(held)
            return
        try:
            self._check_filled(marker)
        finally:
            os.close(held)

    def _check_filled(self, marker: Path) -> None:
        """`_settle_filling` once no process fills the store: check, then drop the marker."""
        os.sync()
        documents = self.documents()
        for path in documents:
            broken = self.verify(path)
            if broken is not None:
                raise IntegrityError(
                    f"{self._root} was being filled (a world load) when it stopped, and {path} is damaged "
                    f"({broken}); delete the folder and load it again"
                )
        logger.warning(
            "%s was being filled when it stopped; its %d documents verify: load again to add the rest",
            self._root,
            len(documents),
        )
        marker.unlink()
        layout.fsync_dir(self._root)

    def _recover(self, loc: Location, highest: int | None = None) -> None:
        """Roll the current symlink forward to the newest complete version file."""
        current, flat = layout.current_link(loc)
        if highest is None:
            highest = _highest_after(loc, current) if not flat else max(layout.version_numbers(loc), default=0)
        if highest == 0:
            return
        if flat:
            # A crash between migrating a flat file and the swap leaves the same bytes twice.
            if self._load(loc, highest).body != layout.read_flat(loc.file):
                return
        elif current >= highest:
            return
        logger.warning("rolling %s forward from v%d to v%d", loc.path, current, highest)
        layout.swap_current(loc, highest)


def _highest_after(loc: Location, current: int) -> int:
    """The newest version file, probing upward from the current one (a crash may have
    left a complete version whose symlink swap never happened)."""
    highest = current
    while os.path.lexists(loc.version_file(highest + 1)):
        highest += 1
    return highest


def _version_time(modified: datetime | None, previous: StoredVersion | None) -> int | None:
    """Whole seconds for a version stamped `modified`, clamped to [previous, now]."""
    if modified is None:
        return None
    seconds = int(modified.timestamp())
    if previous is not None:
        seconds = max(seconds, int(previous.modified.timestamp()))
    return min(seconds, int(time.time()))


def _current_or_zero(loc: Location) -> int:
    try:
        return layout.current_link(loc)[0]
    except NotFoundError:
        return 0


def _is_archived(loc: Location, number: int) -> bool:
    """The archived flag from the head of a version file, for listings."""
    try:
        return read_archived(layout.read_head(loc, number))
    except IntegrityError:
        return False


def _check_body(path: str, body: bytes) -> None:
    """Bodies are UTF-8 markdown of at most 1 MiB.

    Raises:
        BadRequestError: too large or not UTF-8.
    """
    if len(body) > protocol.MAX_BODY:
        raise BadRequestError(
            f"the body for `{path}` is {len(body)} bytes; at most {protocol.MAX_BODY} (1 MiB) "
            "are allowed; split the document"
        )
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequestError(f"the body for `{path}` is not valid UTF-8; send UTF-8 markdown") from None


def _checked_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """Enforce what the file format needs; reserved keys and size limits are the caller's.

    Raises:
        BadRequestError: a malformed key or a value with a line break or control character.
    """
    for key, value in metadata.items():
        if not _KEY_RE.fullmatch(key):
            raise BadRequestError(
                f"metadata key `{key}` is malformed: keys use only lowercase letters, digits and hyphens"
            )
        if _BAD_VALUE_CHAR.search(value):
            raise BadRequestError(
                f"metadata value of `{key}` contains a line break or control character; values are single lines of text"
            )
    return dict(metadata)


def _check_expected(path: str, expected: int | None, current: int) -> None:
    """Apply the expected-version rule.

    Raises:
        ConflictError: create-only on an existing document, or a version mismatch.
    """
    if expected is None or expected == current:
        return
    if expected == 0:
        message = (
            f"`{path}` already exists at version {current} and expected-version 0 means "
            f"create only; fetch it, merge your change, then retry with expected-version {current}"
        )
    else:
        message = (
            f"`{path}` is at version {current} but expected-version was {expected}; "
            "fetch it again, merge your change, then retry with the current version"
        )
    raise ConflictError(message, your_version=expected, server_version=current)


def _no_document(loc: Location) -> NotFoundError:
    return NotFoundError(f"no document at `{loc.path}`; LIST its directory to see what exists")


def _missing_version_message(loc: Location, number: int) -> str:
    numbers = layout.version_numbers(loc)
    if not numbers:
        return str(_no_document(loc))
    if numbers == list(range(1, numbers[-1] + 1)):
        have = f"versions 1 to {numbers[-1]}" if len(numbers) > 1 else "only version 1"
    else:
        have = "versions " + ", ".join(str(n) for n in numbers)
    return f"`{loc.path}` has no version {number}; it has {have}"
