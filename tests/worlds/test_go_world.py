"""The `go` world in `bench/worlds/go`: fingerprints, question shapes and rubric evidence.

Its questions and rubric are kept by hand, so every quote is checked against the corpus
the way the scorer reads it: once, inside the cited section of the cited version.
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

from demarkus.markdown import parse_outline
from demarkus.worlds import World, WorldDocument, open_world

GO = Path(__file__).resolve().parents[2] / "bench" / "worlds" / "go"
KINDS = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array of strings": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
}


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
    questions = {q["id"]: q for q in world().questions()}
    rubric = world().rubric()
    assert set(questions) == set(rubric) and len(questions) == 14
    assert Counter(q["category"] for q in questions.values())["absent"] == 1
    for qid, q in questions.items():
        entry = rubric[qid]
        assert q["scope"] == "/design"
        if q["category"] == "absent":
            assert entry == {"answer": {}, "evidence": {}, "abstain": True}
            continue
        assert set(entry["answer"]) == set(q["fields"]) == set(entry["evidence"]), qid
        for field, kind in q["fields"].items():
            assert KINDS[kind](entry["answer"][field]), (qid, field)


def evidence() -> list[tuple[str, dict[str, Any]]]:
    return [
        (qid, item) for qid, entry in world().rubric().items() for items in entry["evidence"].values() for item in items
    ]


def test_every_quote_occurs_once_in_its_section() -> None:
    items = evidence()
    assert len(items) >= 40
    for qid, item in items:
        doc = documents()[item["path"]]
        assert 1 <= item["version"] <= len(doc.versions), (qid, item)
        body = doc.versions[item["version"] - 1].encode()
        section = parse_outline(body).find(item["anchor"])
        assert section is not None and section.anchor == item["anchor"], (qid, item["anchor"])
        assert body[section.start : section.end].count(item["quote"].encode()) == 1, (qid, item["quote"])
