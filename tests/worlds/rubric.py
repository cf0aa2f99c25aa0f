"""Checks every hand-kept world's rubric must pass: answer types, and each evidence quote
found the way the scorer finds it (once, inside the cited section of the cited version)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from demarkus.markdown import parse_outline
from demarkus.worlds import World, WorldDocument


def has_kind(value: Any, kind: str) -> bool:
    """Whether an answer value has the field type the question names."""
    return {
        "string": isinstance(value, str),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "array of strings": isinstance(value, list) and all(isinstance(v, str) for v in value),
    }[kind]


def evidence(world: World) -> list[tuple[str, dict[str, Any]]]:
    """Every evidence item of the rubric, with its question's id."""
    return [
        (qid, item) for qid, entry in world.rubric().items() for items in entry["evidence"].values() for item in items
    ]


def assert_quote_in_section(documents: Mapping[str, WorldDocument], qid: str, item: Mapping[str, Any]) -> None:
    """The item's quote occurs once in its section (`parse_outline`) of its version."""
    doc = documents[item["path"]]
    assert 1 <= item["version"] <= len(doc.versions), (qid, item)
    body = doc.versions[item["version"] - 1].encode()
    section = parse_outline(body).find(item["anchor"])
    assert section is not None and section.anchor == item["anchor"], (qid, item["anchor"])
    assert body[section.start : section.end].count(item["quote"].encode()) == 1, (qid, item["quote"])


def assert_questions_and_rubric_agree(world: World, scope: str, count: int) -> None:
    """`count` questions under `scope`, one of them `absent` (an empty rubric entry that
    abstains), each other's answer and evidence naming exactly its fields, of their types."""
    questions = {q["id"]: q for q in world.questions()}
    rubric = world.rubric()
    assert set(questions) == set(rubric) and len(questions) == count
    assert Counter(q["category"] for q in questions.values())["absent"] == 1
    for qid, q in questions.items():
        entry = rubric[qid]
        assert q["scope"] == scope
        if q["category"] == "absent":
            assert entry == {"answer": {}, "evidence": {}, "abstain": True}
            continue
        assert set(entry["answer"]) == set(q["fields"]) == set(entry["evidence"]), qid
        for field, kind in q["fields"].items():
            assert has_kind(entry["answer"][field], kind), (qid, field)
