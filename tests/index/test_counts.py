"""Counts cached between commits serve only searches whose snapshot they describe."""

from __future__ import annotations

from demarkus.index.counts import MAX_CACHED_COUNTS, MAX_CACHED_KEY, MAX_CACHED_ROWS, CountCache

KEY = ("rows", "sections")


def test_a_count_serves_searches_of_the_same_generation_until_a_commit() -> None:
    cache = CountCache()
    seen = cache.stable(cache.generation())
    cache.put(seen, KEY, 7)
    assert cache.get(cache.stable(cache.generation()), KEY) == 7
    with cache.committing():
        pass
    assert cache.get(seen, KEY) is None  # counted before the commit
    assert cache.get(cache.stable(cache.generation()), KEY) is None


def test_a_snapshot_opened_while_a_commit_runs_neither_reads_nor_keeps_counts() -> None:
    cache = CountCache()
    cache.put(cache.stable(cache.generation()), KEY, 7)
    before = cache.generation()
    with cache.committing():
        assert cache.stable(cache.generation()) is None  # opened during the commit
        late = cache.stable(before)  # noted before it, opened during it
        assert late is None
    assert cache.stable(before) is None  # noted before it, opened after it
    cache.put(late, KEY, 9)
    assert cache.get(cache.stable(cache.generation()), KEY) is None


def test_a_count_from_an_earlier_generation_is_not_kept() -> None:
    cache = CountCache()
    seen = cache.stable(cache.generation())
    with cache.committing():
        pass
    cache.put(seen, KEY, 7)  # a search that began before the commit finishes after it
    assert cache.get(cache.stable(cache.generation()), KEY) is None


def test_the_cache_stays_within_its_bounds() -> None:
    cache = CountCache()
    now = cache.stable(cache.generation())
    cache.put(now, ("term", "x" * (MAX_CACHED_KEY + 1)), 1)
    assert cache.get(now, ("term", "x" * (MAX_CACHED_KEY + 1))) is None
    for n in range(MAX_CACHED_COUNTS + 1):
        cache.put(now, ("term", f"t{n}"), n)
    assert cache.get(now, ("term", "t0")) is None  # full: it started over
    assert cache.get(now, ("term", f"t{MAX_CACHED_COUNTS}")) == MAX_CACHED_COUNTS


def test_row_fields_serve_the_same_generation_until_a_commit_and_stay_bounded() -> None:
    cache = CountCache()
    now = cache.stable(cache.generation())
    cache.put_rows(now, {1: ("/a.md", "x", "X", 0.5)})
    assert cache.rows(now, [1, 2]) == {1: ("/a.md", "x", "X", 0.5)}
    assert cache.rows(None, [1]) == {}  # a snapshot that may have seen a commit reads nothing
    cache.put_rows(None, {2: ("/b.md", "", "", 1.0)})
    assert cache.rows(now, [2]) == {}
    with cache.committing():
        pass
    assert cache.rows(now, [1]) == {}
    later = cache.stable(cache.generation())
    assert cache.rows(later, [1]) == {}  # the commit may have reused the id
    cache.put_rows(now, {3: ("/c.md", "", "", 1.0)})  # read before the commit: not kept
    assert cache.rows(later, [3]) == {}
    cache.put_rows(later, {n: ("/d.md", str(n), "", 1.0) for n in range(MAX_CACHED_ROWS)})
    cache.put_rows(later, {-1: ("/e.md", "", "", 1.0)})  # full: it started over
    assert cache.rows(later, [0, -1]) == {-1: ("/e.md", "", "", 1.0)}
