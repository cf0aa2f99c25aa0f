"""One writer per store: the process that may change a store holds its owner lock.

Each process keeps its own catalog and content-hash map in memory and updates them on
its own writes only. A second process writing the same store would leave the first
serving an old catalog and, worse, an old hash that now names new bytes. So a process
that opens a store for writing takes `root/.demarkus/owner.lock` with flock(2) for as
long as it runs, and writes who it is into the file; another process that asks is
refused with that name. Readers do not need the lock: version files are immutable and
every write is atomic.

Inside one process several `Service` objects may share a store (a loader and a server,
tests): they share the one lock, counted, and it is released with the last of them.

A service dropped without `close()` gives its claim back from a finalizer, which the
garbage collector may run anywhere: even inside `claim` on the same thread, which holds
the module's guard (waiting for it there never ends). So a finalizer only queues its
release (`StoreOwner.collected`), and whoever holds the guard, or takes it next, does it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from ..errors import ConfigError

LOCK_FILE = ".demarkus/owner.lock"
_MAX_NAME = 4096
"""Bytes of the holder's description read back: enough for a long command line."""

_held: dict[Path, tuple[int, int]] = {}
"""Resolved root -> (open lock file descriptor, how many owners in this process)."""
_guard = threading.Lock()
_collected: list[StoreOwner] = []
"""Owners a finalizer let go of, released by the next holder of `_guard` (appending to a
list takes no lock)."""


@contextlib.contextmanager
def _guarded() -> Iterator[None]:
    """`_guard` held, and the owners collected meanwhile released before and after it is
    let go of: a finalizer that found the guard taken left its owner to its holder."""
    try:
        with _guard:
            _release_collected()
            yield
            _release_collected()
    finally:
        _release_collected_when_free()


def _release_collected() -> None:
    while _collected:
        _collected.pop()._give_back()


def _release_collected_when_free() -> None:
    """Release the collected owners unless the guard is taken: its holder then does, as
    it looks again once it has let go (`_guarded`)."""
    while _collected and _guard.acquire(blocking=False):
        try:
            _release_collected()
        finally:
            _guard.release()


class StoreOwner:
    """This process's claim on a store; `release()` (or `with`) gives it back once."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._released = False

    def release(self) -> None:
        with _guarded():
            self._give_back()

    def collected(self) -> None:
        """`release` for a finalizer: it never waits for the guard (see the module
        docstring); the owner is released now when the guard is free, else by its holder."""
        _collected.append(self)
        _release_collected_when_free()

    def _give_back(self) -> None:
        """Once, with the guard held."""
        if self._released:
            return
        self._released = True
        fd, count = _held[self.root]
        if count > 1:
            _held[self.root] = (fd, count - 1)
            return
        del _held[self.root]
        os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> StoreOwner:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def claim(root: Path) -> StoreOwner:
    """Become the store's writer, or say who already is.

    Raises:
        ConfigError: another process holds the store's owner lock.
    """
    resolved = root.resolve()
    with _guarded():
        if resolved in _held:
            fd, count = _held[resolved]
            _held[resolved] = (fd, count + 1)
            return StoreOwner(resolved)
        path = resolved / LOCK_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_holder(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise ConfigError(
                f"the store {resolved} is in use by {holder}, which writes it; only one "
                "process may write a store. Send the change to that process's authority "
                "(e.g. demarkus publish mark://host/path --token ...), or stop it first"
            ) from None
        _write_holder(fd)
        _held[resolved] = (fd, 1)
        return StoreOwner(resolved)


def held_elsewhere(root: Path) -> bool:
    """Whether another process owns the store right now (a reader then leaves the
    section index to it)."""
    resolved = root.resolve()
    with _guarded():
        if resolved in _held:
            return False
    path = resolved / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _write_holder(fd: int) -> None:
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else "python"
    since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = f"process {os.getpid()} ({command[:1000]}, since {since})\n".encode("utf-8", "replace")
    os.ftruncate(fd, 0)
    os.pwrite(fd, text, 0)


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, _MAX_NAME, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "another process"
