"""A damaged section index file is reported with the way out, and `recreate` takes it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from demarkus.errors import IndexDamagedError
from demarkus.index import SectionIndex, rebuild
from demarkus.store import FileStore

from .conftest import fill, put, where

REBUILD = "demarkus index rebuild --root"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """An index file holding filler and one zorbex document, closed (its WAL checkpointed)."""
    file = tmp_path / "index.sqlite"
    with SectionIndex(file) as index:
        fill(index)
        put(index, "/z.md", "# Z\n\n## Part\n\nzorbex quetzal\n")
    return file


def test_a_file_that_is_not_a_database_is_reported_with_the_rebuild_command(
    tmp_path: Path,
) -> None:
    file = tmp_path / "index.sqlite"
    file.write_bytes(b"these bytes are no database " * 1000)
    with pytest.raises(IndexDamagedError) as caught:
        SectionIndex(file)
    assert str(file) in str(caught.value)
    assert REBUILD in str(caught.value)
    assert "nothing is lost" in str(caught.value)


@pytest.mark.parametrize("share", [0.5, 0.99])
def test_a_truncated_file_is_reported_when_opened(path: Path, share: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * share)])
    with pytest.raises(IndexDamagedError, match=REBUILD):
        SectionIndex(path)


def test_damage_found_by_a_later_search_is_reported_the_same_way(path: Path) -> None:
    db = sqlite3.connect(path)
    (page,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'fts_data'").fetchone()
    (size,) = db.execute("PRAGMA page_size").fetchone()
    db.close()
    with path.open("r+b") as f:  # the full-text b-tree's root page only: opening still works
        f.seek((page - 1) * size)
        f.write(b"\xff" * size)
    with SectionIndex(path) as index:
        assert "/z.md" in index.indexed_versions()
        with pytest.raises(IndexDamagedError, match=REBUILD) as caught:
            index.search("zorbex", "/", limit=5)
        assert str(path) in str(caught.value)
        with pytest.raises(IndexDamagedError, match=REBUILD):
            put(index, "/y.md", "# Y\n\nquetzal\n")


def test_recreate_replaces_a_damaged_file_with_an_empty_index_that_rebuild_refills(
    tmp_path: Path,
) -> None:
    file = tmp_path / "index.sqlite"
    file.write_bytes(b"these bytes are no database " * 1000)
    for suffix in ("-wal", "-shm", "-journal"):  # whatever a crash left beside it goes too
        Path(f"{file}{suffix}").write_bytes(b"left over " * 1000)
    store = FileStore(tmp_path / "store")
    store.write("/a.md", b"# A\n\n## Part\n\nzorbex\n", {})
    with SectionIndex.recreate(file) as index:
        assert not Path(f"{file}-journal").exists()
        assert index.indexed_versions() == {}
        assert rebuild(index, store) == 2
        assert where(index.search("zorbex", "/", limit=5)) == [("/a.md", "part")]
    with SectionIndex(file) as index:
        assert index.indexed_versions() == {"/a.md": 1}


def test_recreate_where_no_file_is_opens_an_empty_index(tmp_path: Path) -> None:
    with SectionIndex.recreate(tmp_path / "index.sqlite") as index:
        assert index.indexed_versions() == {}
