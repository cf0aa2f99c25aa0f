"""The reader pool: at most `size` connections, each lent to one thread at a time."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from demarkus.index.pool import ReaderPool

WAIT = 10.0


@pytest.fixture
def opened(tmp_path: Path) -> list[sqlite3.Connection]:
    """Every connection the pool under test opened, in order."""
    return []


@pytest.fixture
def pool(tmp_path: Path, opened: list[sqlite3.Connection]) -> ReaderPool:
    def connect() -> sqlite3.Connection:
        db = sqlite3.connect(tmp_path / "db.sqlite", check_same_thread=False, isolation_level=None)
        opened.append(db)
        return db

    return ReaderPool(connect, size=2)


def is_open(db: sqlite3.Connection) -> bool:
    try:
        db.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return False
    return True


def test_a_connection_is_lent_again_only_once_it_is_back(pool: ReaderPool, opened: list[sqlite3.Connection]) -> None:
    with pool.borrow() as first, pool.borrow() as second:
        assert first is not second
    with pool.borrow() as again:
        assert again in (first, second)
    assert len(opened) == 2


def test_a_borrower_beyond_the_size_waits_for_a_connection_to_come_back(
    pool: ReaderPool, opened: list[sqlite3.Connection]
) -> None:
    asking = threading.Event()

    def borrow() -> sqlite3.Connection:
        asking.set()
        with pool.borrow() as db:
            return db

    with ThreadPoolExecutor(max_workers=1) as threads:
        with pool.borrow(), pool.borrow():
            waiting = threads.submit(borrow)
            assert asking.wait(timeout=WAIT)
        assert waiting.result(timeout=WAIT) in opened
    assert len(opened) == 2  # the third borrower got a returned connection, not a new one


def test_a_connection_left_inside_a_transaction_is_closed_not_lent(
    pool: ReaderPool, opened: list[sqlite3.Connection]
) -> None:
    with pool.borrow() as db:
        db.execute("BEGIN")
    assert not is_open(db)
    with pool.borrow() as fresh:
        assert fresh is not db and is_open(fresh)


def test_close_closes_idle_connections_now_and_lent_ones_when_they_come_back(
    pool: ReaderPool,
) -> None:
    with pool.borrow() as lent:
        with pool.borrow() as idle:
            pass
        pool.close()
        assert not is_open(idle)
        assert is_open(lent)
    assert not is_open(lent)
    with pytest.raises(sqlite3.ProgrammingError), pool.borrow():
        pass
