"""The `logseq` world in `bench/worlds/logseq`: fingerprints, question shapes and rubric
evidence.

Its questions and rubric are kept by hand, so every quote is checked against the corpus
the way the scorer reads it: once, inside the cited section of the cited version (most of
them sections whose heading is a bullet, `- ## Usage`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from demarkus.markdown import parse_outline
from demarkus.worlds import World, WorldDocument, open_world

from .rubric import assert_questions_and_rubric_agree, assert_quote_in_section, evidence

LOGSEQ = Path(__file__).resolve().parents[2] / "bench" / "worlds" / "logseq"


@cache
def world() -> World:
    return open_world(LOGSEQ)  # refuses a file that does not match the manifest


@cache
def documents() -> dict[str, WorldDocument]:
    return {doc.path: doc for doc in world().documents()}


def test_the_corpus_is_a_graph_of_pages_titled_and_without_declared_relations() -> None:
    docs = documents()
    assert len(docs) == world().documents_count == 238
    assert all(path.startswith("/pages/") and path.endswith(".md") for path in docs)
    assert all(doc.metadata["title"] and len(doc.versions) == 1 for doc in docs.values())
    predicates = {"supersedes", "superseded-by", "depends-on", "implements", "derived-from", "related"}
    assert not any(f"rel-{p}" in doc.metadata for doc in docs.values() for p in predicates)


def test_questions_and_rubric_agree() -> None:
    assert_questions_and_rubric_agree(world(), "/pages", 12)


def test_every_quote_occurs_once_in_its_section() -> None:
    items = evidence(world())
    assert len(items) >= 25
    for qid, item in items:
        assert_quote_in_section(documents(), qid, item)
    in_lists = 0
    for _qid, item in items:
        outline = parse_outline(documents()[item["path"]].versions[0].encode())
        section = outline.find(item["anchor"])
        in_lists += section is not None and section.in_list
    assert in_lists >= len(items) // 2  # the outline's bullets hold most of the evidence
