"""The section index from many threads: searches run side by side and beside a writer, each
answering from one consistent state, with the same results as one at a time."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

from demarkus.index import SectionIndex
from demarkus.index.sqlite import _Stemmer

from .conftest import fill, put, where

WAIT = 10.0
"""Seconds any one step may take before the test fails: far above the milliseconds it needs."""


class Gate:
    """A `visible` check that holds the first search reaching it until `release`: that
    search keeps its connection and its read transaction meanwhile."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self._open = threading.Event()

    def __call__(self, _path: str) -> bool:
        self.reached.set()
        self._open.wait(timeout=WAIT * 3)
        return True

    def release(self) -> None:
        self._open.set()


@contextmanager
def held_search(pool: ThreadPoolExecutor, index: SectionIndex, query: str) -> Iterator[Future]:
    """A search of `query` that stays inside its read transaction until the block ends."""
    gate = Gate()
    held = pool.submit(index.search, query, "/", limit=5, visible=gate)
    try:
        assert gate.reached.wait(timeout=WAIT)
        yield held
    finally:
        gate.release()


def test_a_search_in_progress_holds_up_neither_another_search_nor_a_write(
    index: SectionIndex,
) -> None:
    fill(index)
    put(index, "/a.md", "# A\n\n## Part\n\nzorbex quetzal\n")
    expected = index.search("quetzal", "/", limit=5)
    with ThreadPoolExecutor(max_workers=3) as pool:
        with held_search(pool, index, "zorbex") as held:
            other = pool.submit(index.search, "quetzal", "/", limit=5)
            assert other.result(timeout=WAIT) == expected
            write = pool.submit(put, index, "/b.md", "# B\n\n## Part\n\nzorbex\n")
            assert write.result(timeout=WAIT) == 2
        # the held search answers from the state it started in: without /b.md
        assert where(held.result(timeout=WAIT)) == [("/a.md", "part")]
    assert sorted(p for p, _ in where(index.search("zorbex", "/", limit=5))) == ["/a.md", "/b.md"]


def test_a_search_answers_from_one_state_while_writes_commit_under_it(
    index: SectionIndex,
) -> None:
    fill(index)
    put(index, "/a.md", "# A\n\n## Part\n\nzorbex quetzal\n")
    put(index, "/b.md", "# B\n\n## Part\n\nzorbex\n")
    before = index.search("zorbex", "/", limit=5)
    with ThreadPoolExecutor(max_workers=2) as pool:
        with held_search(pool, index, "zorbex") as held:
            # /b.md, one of its candidates, goes; a new document changes every count
            pool.submit(index.remove, "/b.md").result(timeout=WAIT)
            put(index, "/c.md", "# C\n\n## Zorbex\n\nzorbex zorbex zorbex\n\n## More\n\nzorbex\n")
        assert held.result(timeout=WAIT) == before
    after = index.search("zorbex", "/", limit=5)
    assert [p for p, _ in where(after)] == ["/c.md", "/c.md", "/a.md"]
    with SectionIndex(index.path) as fresh:  # no count cached from before the writes
        assert fresh.search("zorbex", "/", limit=5) == after


QUESTIONS = [
    ("zorbex", "/", 5),
    ("quetzal glimmer", "/", 10),
    ("zorbex quetzal wombat", "/docs", 10),
    ("glimmer of the wombat", "/docs/deep", 3),
    ("lorem zorbex", "/", 20),
]
CHURN = (  # the same shape (rows, tokens per column), words no question asks for
    "# W\n\n## Part\n\nalpha bravo charlie delta\n",
    "# W\n\n## Part\n\necho foxtrot hotel india\n",
)


def test_concurrent_searches_answer_as_sequential_ones_while_other_documents_change(
    index: SectionIndex,
) -> None:
    fill(index)
    put(index, "/docs/a.md", "# A\n\n## One\n\nzorbex quetzal\n\n## Two\n\nglimmer wombat\n")
    put(index, "/docs/deep/b.md", "# B\n\n## Part\n\nthe wombat and its glimmer\n", tags="x")
    put(index, "/c.md", "# Quetzal\n\n## Part\n\nzorbex zorbex lorem\n")
    put(index, "/busy/w.md", CHURN[0])
    expected = {q: index.search(q[0], q[1], limit=q[2]) for q in QUESTIONS}
    assert all(expected.values())
    done = threading.Event()

    def churn() -> int:
        writes = 0
        while not done.is_set() and writes < 5_000:
            put(index, "/busy/w.md", CHURN[writes % 2], version=writes + 2)
            writes += 1
        return writes

    def ask() -> None:
        for _ in range(15):
            for q in QUESTIONS:
                assert index.search(q[0], q[1], limit=q[2]) == expected[q]

    with ThreadPoolExecutor(max_workers=5) as pool:
        writer = pool.submit(churn)
        try:
            for reader in [pool.submit(ask) for _ in range(4)]:
                reader.result(timeout=WAIT * 6)
        finally:
            done.set()
        assert writer.result(timeout=WAIT) > 0
    assert index.indexed_versions()["/busy/w.md"] > 1


def test_the_stemmer_answers_many_threads_at_once() -> None:
    batches = [[f"{stem}{n}ing" for n in range(300)] for stem in ("walk", "jump", "read", "call")]
    alone = _Stemmer()
    expected = [alone.stems(batch) for batch in batches]
    alone.close()
    shared = _Stemmer()
    start = threading.Barrier(len(batches))

    def stem(batch: list[str]) -> list[tuple[str, ...]]:
        start.wait(timeout=WAIT)
        return shared.stems(batch)

    with ThreadPoolExecutor(max_workers=len(batches)) as pool:
        got = [f.result(timeout=WAIT) for f in [pool.submit(stem, b) for b in batches]]
    shared.close()
    assert got == expected


def test_the_stemmer_finds_matching_words_remembered_or_not() -> None:
    stemmer = _Stemmer()
    try:
        stemmer.stems(["releases", "walking"])  # remembered before the texts come
        text = {"release", "releases", "released", "walk", "walked", "other", "x" * 70 + "release"}
        wanted = set(stemmer.stems(["release"])[0])
        expected = {
            w for w, forms in zip(sorted(text), stemmer.stems(sorted(text)), strict=True) if wanted & set(forms)
        }
        assert expected == {"release", "releases", "released"}
        assert stemmer.matching([text], wanted) == [expected]
        assert stemmer.matching([text], wanted) == [expected]  # every word remembered now
        # several texts at once, their unknown words tokenized together
        other = {"releasing", "walker", "y" * 70 + "release"}
        assert stemmer.matching([other, set(), other | {"released"}], wanted) == [
            {"releasing"},
            set(),
            {"releasing", "released"},
        ]
    finally:
        stemmer.close()
