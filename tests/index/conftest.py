"""Shared by the index tests: a fresh index per test and helpers to fill it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from demarkus.index import SectionHit, SectionIndex

WHEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
FILLER = (
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed eiusmod tempor incididunt "
    "labore dolore magna aliqua enim minim veniam quis nostrud exercitation ullamco laboris "
    "nisi aliquip commodo consequat duis aute irure reprehenderit voluptate velit esse cillum"
).split()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SectionIndex]:
    ix = SectionIndex(tmp_path / "index.sqlite")
    yield ix
    ix.close()


def put(index: SectionIndex, path: str, body: str, version: int = 1, **meta: str) -> int:
    return index.update(path, version, meta, body.encode(), WHEN)


def fill(index: SectionIndex, documents: int = 20) -> None:
    """Neutral documents, so that the test terms are rare and BM25's IDF means something."""
    with index.bulk():
        for d in range(documents):
            sections = "".join(
                f"## Part {FILLER[(d + s) % len(FILLER)]}\n\n"
                + " ".join(FILLER[(d * 7 + s * 3 + k) % len(FILLER)] for k in range(30))
                + "\n\n"
                for s in range(4)
            )
            put(index, f"/filler/f{d:02d}.md", f"# Filler {d}\n\n{sections}")


def where(hits: list[SectionHit]) -> list[tuple[str, str]]:
    return [(h.path, h.anchor) for h in hits]
