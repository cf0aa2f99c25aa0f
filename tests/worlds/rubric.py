"""Checks every hand-kept world's rubric must pass: answer types, and each evidence quote
found the way the scorer finds it (once, inside the cited section of the cited version)."""

from __future__ import annotations

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
