"""The `go` world in `bench/worlds/go`: fingerprints, question shapes and rubric evidence.

Its questions and rubric are kept by hand, so every quote is checked against the corpus
the way the scorer reads it: once, inside the cited section of the cited version.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from demarkus.worlds import World, WorldDocument, open_world

from .rubric import assert_questions_and_rubric_agree, assert_quote_in_section, evidence

GO = Path(__file__).resolve().parents[2] / "bench" / "worlds" / "go"


@cache
def world() -> World:
    return open_world(GO)  # refuses a file that does not match the manifest


@cache
def documents() -> dict[str, WorldDocument]:
    return {doc.path: doc for doc in world().documents()}


def test_the_corpus_is_design_documents_with_a_title_only() -> None:
    docs = documents()
    assert len(docs) == world().documents_count == 122
    assert all(path.startswith("/design/") and path.endswith(".md") for path in docs)
    assert all(set(doc.metadata) == {"title"} and doc.metadata["title"] for doc in docs.values())


def test_questions_and_rubric_agree() -> None:
    assert_questions_and_rubric_agree(world(), "/design", 14)


def test_every_quote_occurs_once_in_its_section() -> None:
    items = evidence(world())
    assert len(items) >= 40
    for qid, item in items:
        assert_quote_in_section(documents(), qid, item)
