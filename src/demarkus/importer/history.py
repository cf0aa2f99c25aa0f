"""A file's git history, through the `git` command line: the commits that changed it
(following renames), oldest first, and its bytes at each of them.

`git log --follow` names the file as it was called in each commit; one long-lived
`git cat-file --batch` process reads the bytes, so a thousand files with ten commits each
cost a thousand short `git log` runs and no extra process per version.
"""

from __future__ import annotations

import os
import subprocess
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO

from ..errors import BadRequestError, ConfigError
from ..protocol import MAX_BODY
from ..render import format_time
from .note import MAX_FILE

__all__ = ["GIT_KEYS", "GitHistory", "Revision", "find_repository", "pending", "revision_metadata"]

GIT_COMMIT = "git-commit"
GIT_AUTHOR = "git-author"
GIT_TIME = "git-time"
GIT_BASE = "git-base"
"""On a version taken from the working tree: the commit its edits sit on."""
GIT_KEYS = (GIT_COMMIT, GIT_AUTHOR, GIT_TIME, GIT_BASE)
AHEAD = 8
"""Files whose `git log` may run before their turn (bounded: each holds one log's output)."""
TIMEOUT = 120.0
"""Seconds one `git log` may take; a history that long is not a note's."""
_RECORD = "\x1e"
_FIELD = "\x1f"
_FORMAT = f"--format={_RECORD}%H{_FIELD}%ct{_FIELD}%an <%ae>"


@dataclass(frozen=True, slots=True)
class Revision:
    """One commit that changed the file: its id, author, commit time and the file's name
    there (relative to the repository's top)."""

    commit: str
    author: str
    time: datetime
    path: str


def revision_metadata(revision: Revision) -> dict[str, str]:
    """The metadata a version imported from `revision` carries (and re-imports look for)."""
    return {
        GIT_COMMIT: revision.commit,
        GIT_AUTHOR: _single_line(revision.author),
        GIT_TIME: format_time(revision.time),
    }


def pending(history: Sequence[Revision], current: dict[str, str] | None) -> list[Revision]:
    """The revisions not imported yet, given the current version's metadata (None: no
    document). A document whose last commit is unknown here (imported without `--git`,
    or history rewritten since) takes no old revisions: history is never inserted under
    versions that already exist; the newest state still follows as the last version."""
    if current is None:
        return list(history)
    last = current.get(GIT_COMMIT) or current.get(GIT_BASE)
    for index, revision in enumerate(history):
        if revision.commit == last:
            return list(history[index + 1 :])
    return []


def find_repository(folder: Path) -> Path:
    """The top of the git work tree holding `folder`.

    Raises:
        ConfigError: `folder` is not inside a git work tree, or git is missing.
    """
    done = _git(folder, ["rev-parse", "--show-toplevel"])
    if done.returncode != 0:
        raise ConfigError(
            f"{folder} is not inside a git repository ({done.stderr.decode(errors='replace').strip()}); "
            "import it without --git, or run `git init` there first"
        )
    return Path(os.fsdecode(done.stdout.rstrip(b"\n")))


class GitHistory:
    """Histories of files in one repository; close it (or use `with`) to stop `git cat-file`
    and the threads that run `git log` ahead."""

    def __init__(self, top: Path, *, ahead: int = AHEAD) -> None:
        self.top = top
        self._reader: subprocess.Popen[bytes] | None = None
        self._ahead = ahead
        self._expected: deque[Path] = deque()
        self._running: dict[Path, Future[list[Revision]]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def expect(self, files: Iterable[Path]) -> None:
        """Files whose histories will be asked for, in this order: their `git log` runs
        up to `ahead` files early on two threads, while the store writes the versions
        of the file before (a `git log` is a process start; a write waits on fsync)."""
        self._expected.extend(files)
        self._top_up()

    def __enter__(self) -> GitHistory:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._expected.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._running.clear()
        if self._reader is not None:
            reader, self._reader = self._reader, None
            assert reader.stdin is not None and reader.stdout is not None
            reader.stdin.close()
            reader.stdout.close()
            reader.wait(timeout=TIMEOUT)

    def revisions(self, file: Path) -> list[Revision]:
        """The commits that changed `file` (a path in the work tree), oldest first,
        following renames; [] for a file git does not track.

        Raises:
            BadRequestError: git refused (the message carries its words).
        """
        running = None
        while file in self._running:  # files asked for earlier were refused: drop theirs
            earlier = next(iter(self._running))
            running = self._running.pop(earlier)
        self._top_up()
        return running.result() if running is not None else self._log(file)

    def _top_up(self) -> None:
        while self._expected and len(self._running) < self._ahead:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(2, thread_name_prefix="demarkus-git-log")
            file = self._expected.popleft()
            if file not in self._running:
                self._running[file] = self._pool.submit(self._log, file)

    def _log(self, file: Path) -> list[Revision]:
        relative = file.resolve().relative_to(self.top.resolve()).as_posix()
        done = _git(self.top, ["log", "--follow", "--name-status", "-z", _FORMAT, "--", relative])
        if done.returncode != 0:
            raise BadRequestError(f"git log failed: {done.stderr.decode(errors='replace').strip()[:300]}")
        return list(reversed(_parse_log(done.stdout.decode("utf-8", "surrogateescape"))))

    def read(self, revision: Revision) -> bytes:
        """The file's bytes at `revision`.

        Raises:
            BadRequestError: git has no such file there (a shallow clone, say).
        """
        if "\n" in revision.path:
            raise BadRequestError("a file name with a line break cannot be read from git history; rename it")
        reader = self._start()
        assert reader.stdin is not None and reader.stdout is not None
        reader.stdin.write(f"{revision.commit}:{revision.path}\n".encode("utf-8", "surrogateescape"))
        reader.stdin.flush()
        header = reader.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            raise BadRequestError(
                f"git has no file {revision.path} at commit {revision.commit[:12]} "
                f"({b' '.join(header).decode(errors='replace')})"
            )
        size = int(header[2])
        if size > MAX_FILE:
            _skip(reader.stdout, size + 1)  # keep the stream in step for the next file
            raise BadRequestError(
                f"the file is {size} bytes at commit {revision.commit[:12]}; a document holds at most "
                f"{MAX_BODY} (1 MiB); that commit is left out"
            )
        return _read_exactly(reader.stdout, size)

    def _start(self) -> subprocess.Popen[bytes]:
        if self._reader is None:
            self._reader = subprocess.Popen(
                ["git", "-C", str(self.top), "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        return self._reader


def _skip(stream: IO[bytes], size: int) -> None:
    while size > 0:
        chunk = stream.read(min(size, 1 << 16))
        if not chunk:
            return
        size -= len(chunk)


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    stream.read(1)  # the newline after each object
    if len(data) != size:
        raise BadRequestError("git cat-file stopped early; check the repository with `git fsck`")
    return data


def _git(where: Path, args: list[str]) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", "-c", "core.quotePath=false", "-C", str(where), *args],
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        raise ConfigError("the `git` command is not installed; install git or import without --git") from None
    except subprocess.TimeoutExpired:
        raise BadRequestError(
            f"git {args[0]} took longer than {TIMEOUT:.0f} s; import this file without --git"
        ) from None


def _parse_log(text: str) -> list[Revision]:
    """Records of `git log -z --name-status` in the `_FORMAT` above, newest first. A
    commit that deleted the file, or shows no change of it (a merge), is left out."""
    revisions = []
    for record in text.split(_RECORD)[1:]:
        header, _, changes = record.partition("\0")
        commit, seconds, author = header.split(_FIELD, 2)
        fields = [f for f in changes.lstrip("\n").split("\0") if f]
        if len(fields) < 2 or fields[0].startswith("D"):
            continue
        revisions.append(
            Revision(
                commit=commit,
                author=author,
                time=datetime.fromtimestamp(int(seconds), tz=UTC),
                path=fields[-1],
            )
        )
    return revisions


def _single_line(text: str) -> str:
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
