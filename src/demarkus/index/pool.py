"""Read connections for concurrent searches: a bounded pool beside the one write connection.

SQLite in WAL mode lets readers work while one writer commits, and `sqlite3` releases the
GIL while SQLite works, so searches on separate connections run in parallel. A search
borrows a connection for its whole read transaction and gives it back; the pool opens
connections only as concurrent searches need them.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

MAX_READERS = 8
"""Read connections one index opens at most; a search beyond that waits for one to come
back. Requests run on a few worker threads, and each connection keeps its own page cache
(about 2 MiB), so more connections would cost memory without adding parallel work."""


class ReaderPool:
    """At most `size` connections from `connect`, each lent to one thread at a time."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], size: int = MAX_READERS) -> None:
        self._connect = connect
        self._size = size
        self._idle: list[sqlite3.Connection] = []
        self._opened = 0
        self._closed = False
        self._changed = threading.Condition()

    @contextmanager
    def borrow(self) -> Iterator[sqlite3.Connection]:
        """A connection for this thread alone until the block ends. A connection left
        inside a transaction (its rollback failed) is closed rather than lent again.

        Raises:
            sqlite3.ProgrammingError: the pool is closed.
        """
        db = self._take()
        try:
            yield db
        finally:
            self._give_back(db)

    def close(self) -> None:
        """Close the idle connections now and each lent one when it comes back."""
        with self._changed:
            self._closed = True
            idle, self._idle = self._idle, []
            self._opened -= len(idle)
            self._changed.notify_all()
        for db in idle:
            db.close()

    def _take(self) -> sqlite3.Connection:
        with self._changed:
            while True:
                if self._closed:
                    raise sqlite3.ProgrammingError("Cannot operate on a closed section index.")
                if self._idle:
                    return self._idle.pop()
                if self._opened < self._size:
                    self._opened += 1
                    break
                self._changed.wait()
        try:
            return self._connect()
        except BaseException:
            self._forget_one()
            raise

    def _give_back(self, db: sqlite3.Connection) -> None:
        reusable = not db.in_transaction
        with self._changed:
            if reusable and not self._closed:
                self._idle.append(db)
                self._changed.notify()
                return
        self._forget_one()
        db.close()

    def _forget_one(self) -> None:
        with self._changed:
            self._opened -= 1
            self._changed.notify()
