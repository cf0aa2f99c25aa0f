"""Where documents live on disk, and the atomic file steps the store is built from.

```
root/
  doc.md            -> versions/doc.md.v3   (relative symlink: the current version)
  sub/versions/...  (every directory keeps its own history)
  versions/
    doc.md.v1  doc.md.v2  doc.md.v3         (version files, see versionfile.py)
    .tmp.doc.md.<hex>                        (a write in progress; never a version)
```

Containment is lexical: request paths have no `..`, no hidden names and no `versions`
segment, no directory on the way may be a symlink, and the only symlink followed is a
document's own `versions/<name>.v<N>`; version files are opened with O_NOFOLLOW.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .. import protocol
from ..errors import BadRequestError, NotFoundError

logger = logging.getLogger(__name__)

VERSIONS = "versions"
TEMP_PREFIX = ".tmp."
MAX_NAME_BYTES = 200
"""Longest path segment; leaves room for `.v<N>` and the temp-file prefix under 255 bytes."""
_VERSION_NAME_RE = re.compile(r"(.+)\.v([1-9][0-9]*)")


@dataclass(frozen=True, slots=True)
class Location:
    """A request path mapped to disk, already checked to stay inside the root. Its disk
    names are made once, when it is made: a read asks for them several times."""

    path: str
    directory: Path
    name: str
    file: Path = field(init=False, repr=False, compare=False)
    versions_dir: Path = field(init=False, repr=False, compare=False)
    _version_prefix: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        versions_dir = self.directory / VERSIONS
        object.__setattr__(self, "file", self.directory / self.name)
        object.__setattr__(self, "versions_dir", versions_dir)
        object.__setattr__(self, "_version_prefix", f"{versions_dir}/{self.name}.v")

    def version_file(self, number: int) -> str:
        return f"{self._version_prefix}{number}"

    def child(self, name: str) -> Location:
        return Location(join(self.path, name), self.file, name)


@dataclass(frozen=True, slots=True)
class Route:
    """Where a request path leads, before the disk is asked (see `route`): its `Location`
    and the directories on the way, each with its request segment."""

    path: str
    """The request path as asked, for messages."""
    location: Location
    hops: tuple[tuple[str, str], ...]

    @property
    def chars(self) -> int:
        """Characters of the names it holds, for a bound on the routes kept."""
        return 2 * len(self.path) + len(str(self.location.file)) + sum(len(hop) for hop, _ in self.hops)


def locate(root: Path, path: str) -> Location:
    """Map a request path under `root`, refusing hidden names, `versions` and symlink hops.

    Raises:
        BadRequestError: a malformed path or a reserved segment.
        NotFoundError: the path leaves the root (`..` or a planted symlink).
    """
    return follow(route(root, path))


def route(root: Path, path: str) -> Route:
    """The pure half of `locate`: the checked segments mapped under `root` (no disk
    access, so a store may keep the answer for a path).

    Raises:
        BadRequestError: a malformed path or a reserved segment.
        NotFoundError: a `..` segment.
    """
    segments = check_segments(path)
    directory = root
    hops = []
    for segment in segments[:-1]:
        directory = directory / segment
        hops.append((str(directory), segment))
    location = Location("/" + "/".join(segments), directory, segments[-1] if segments else "")
    return Route(path, location, tuple(hops))


def follow(route: Route) -> Location:
    """The disk half of `locate`, on every request: no directory on the way may be a
    symlink or something other than a directory (one may be missing: nothing is there).

    Raises:
        NotFoundError: the path passes through a symlink or a file.
    """
    for directory, segment in route.hops:
        try:
            mode = os.lstat(directory).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode):
            raise NotFoundError(
                f"`{route.path}` passes through a symbolic link, which could leave the document root; it is not served"
            )
        if not stat.S_ISDIR(mode):
            raise NotFoundError(f"`{route.path}` is not found: `{segment}` is not a directory")
    return route.location


def check_segments(path: str) -> list[str]:
    """The path's segments once it is a name the store can hold: canonical, no hidden
    names, no `versions`, no segment over `MAX_NAME_BYTES`. Pure (no disk access).

    Raises:
        BadRequestError: a malformed path or a reserved segment.
        NotFoundError: a `..` segment.
    """
    protocol.canonical_path(path)
    segments = [s for s in path.split("/") if s]
    for segment in segments:
        if segment.startswith("."):
            raise BadRequestError(f"`{path}` has a segment starting with `.`; hidden names are not stored")
        if segment == VERSIONS:
            raise BadRequestError(
                f"`{path}` uses `versions` as a name, which is reserved for version history; choose another name"
            )
        if len(segment.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            raise BadRequestError(f"a segment of `{path[:80]}` is longer than {MAX_NAME_BYTES} bytes; shorten it")
    return segments


def current_link(loc: Location) -> tuple[int, bool]:
    """(current version or 0, whether a flat file sits at the path).

    Raises:
        NotFoundError: the path holds a symlink the store did not create.
    """
    if not loc.name:
        return 0, False
    try:
        mode = os.lstat(loc.file).st_mode
    except FileNotFoundError:
        return 0, False
    if stat.S_ISREG(mode):
        return 0, True
    if not stat.S_ISLNK(mode):
        return 0, False
    target = os.readlink(loc.file)
    match = _VERSION_NAME_RE.fullmatch(target.removeprefix(f"{VERSIONS}/"))
    if (
        not target.startswith(f"{VERSIONS}/")
        or match is None
        or match.group(1) != loc.name
        or not is_real_dir(loc.versions_dir)
    ):
        raise NotFoundError(
            f"`{loc.path}` is a symbolic link the store did not create (it could lead "
            "outside the document root); it is not served"
        )
    return int(match.group(2)), False


def version_numbers(loc: Location) -> list[int]:
    """Version numbers present in `versions/` for this name, ascending."""
    if not loc.name or not is_real_dir(loc.versions_dir):
        return []
    return sorted(number for name, number in version_files(loc.versions_dir) if name == loc.name)


def versioned_names(versions_dir: Path) -> set[str]:
    """Names that have at least one version file in this `versions/` folder."""
    return {name for name, _number in version_files(versions_dir)}


def version_files(versions_dir: Path) -> Iterator[tuple[str, int]]:
    for entry in os.listdir(versions_dir):
        match = _VERSION_NAME_RE.fullmatch(entry)
        if match and not entry.startswith("."):
            yield match.group(1), int(match.group(2))


def walk(root: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """(request path, disk path, visible names) for every real, visible directory."""
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != VERSIONS and is_real_dir(here / d))
        relative = here.relative_to(root).as_posix()
        directory = "/" if relative == "." else "/" + relative
        yield directory, here, sorted(n for n in filenames if not n.startswith("."))


def read_version_file(loc: Location, number: int) -> tuple[bytes, float]:
    """(raw bytes, mtime) of one version file, never through a symlink.

    Raises:
        FileNotFoundError: no such version.
        NotFoundError: the version file is a planted symlink.
    """
    try:
        fd = os.open(loc.version_file(number), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotFoundError(f"version {number} of `{loc.path}` is a symbolic link; it is not served") from None
        raise
    try:
        mtime = os.fstat(fd).st_mtime
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(), mtime
    finally:
        os.close(fd)


def read_head(loc: Location, number: int, size: int = 256) -> bytes:
    """The first bytes of a version file (b"" when unreadable), for cheap flag checks."""
    try:
        fd = os.open(loc.version_file(number), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return b""
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


def read_flat(path: Path) -> bytes:
    """The bytes of a regular file, refusing a symlink swapped in meanwhile."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def make_versions_dir(loc: Location, *, sync: bool = True) -> None:
    """Create the document's directory and its `versions/` folder. Each folder it creates
    is made to survive a power cut (its parent is fsynced): the version linked into it is
    acknowledged as stored. With `sync` False the caller makes the store durable itself.

    Raises:
        BadRequestError: a document already uses a parent's name.
        NotFoundError: `versions` exists but is not a real directory.
    """
    missing = []
    folder = loc.versions_dir
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    try:
        loc.versions_dir.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise BadRequestError(f"cannot create `{loc.path}`: a document already uses one of its parent names") from None
    if not is_real_dir(loc.versions_dir):
        raise NotFoundError(f"`{loc.path}` has a `versions` entry that is not a real directory; it is not served")
    if not sync:
        return
    for created in reversed(missing):  # top down: each parent holds its new entry
        fsync_dir(created.parent)


def write_temp(loc: Location, raw: bytes, *, sync: bool = True) -> Path:
    """A complete hidden file in `versions/`, fsynced unless `sync` is False, ready to link
    or rename into place."""
    temp = loc.versions_dir / f"{TEMP_PREFIX}{loc.name}.{uuid.uuid4().hex}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return temp


def create_version(
    loc: Location,
    number: int,
    raw: bytes,
    mtime: int | None = None,
    *,
    sync_file: bool = True,
    sync_folder: bool = True,
) -> None:
    """Publish a whole version file; link(2) is the exclusive create. `mtime` (seconds
    since the epoch) is the version's time when it is not now: set on the temp file, so
    the version appears with it. With `sync_folder` False the caller fsyncs `versions/`
    itself, once after several versions, before pointing the current symlink at any of
    them; with `sync_file` False it makes the file's bytes durable itself.

    Raises:
        FileExistsError: that version already exists (another writer won it).
    """
    temp = write_temp(loc, raw, sync=sync_file)
    try:
        if mtime is not None:
            os.utime(temp, (mtime, mtime), follow_symlinks=False)
        os.link(temp, loc.version_file(number))
    finally:
        os.unlink(temp)
    if sync_folder:
        fsync_dir(loc.versions_dir)


def replace_version(loc: Location, number: int, raw: bytes) -> None:
    """Swap a version file's bytes atomically (the archive flag flip)."""
    os.replace(write_temp(loc, raw), loc.version_file(number))
    fsync_dir(loc.versions_dir)


def swap_current(loc: Location, number: int, *, sync: bool = True) -> None:
    """Point the current symlink at `number` atomically, made to survive a power cut
    unless `sync` is False. A first link is made in place (symlink(2) makes it whole or
    not at all); one that exists is replaced through a temp symlink and a rename."""
    target = f"{VERSIONS}/{loc.name}.v{number}"
    try:
        os.symlink(target, loc.file)
    except FileExistsError:
        temp = loc.directory / f"{TEMP_PREFIX}{loc.name}.{uuid.uuid4().hex}.link"
        os.symlink(target, temp)
        try:
            os.replace(temp, loc.file)
        except OSError:
            os.unlink(temp)
            raise
    if sync:
        fsync_dir(loc.directory)


def remove_temps(directory: Path) -> None:
    """Delete leftover temp files; call only while holding the store's write lock."""
    for entry in os.listdir(directory):
        if entry.startswith(TEMP_PREFIX):
            try:
                os.unlink(directory / entry)
                logger.warning("removed leftover temp file %s", directory / entry)
            except OSError as exc:
                logger.warning("cannot remove temp file %s: %s", directory / entry, exc)


def fsync_dir(directory: Path) -> None:
    """Make a link, rename or unlink in `directory` survive a power cut."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_real_dir(path: Path) -> bool:
    """A directory that is not itself a symlink."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False


def join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name


def utc_seconds(mtime: float) -> datetime:
    return datetime.fromtimestamp(int(mtime), tz=UTC)
