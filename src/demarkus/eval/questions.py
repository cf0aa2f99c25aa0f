"""A world's questions and rubric as values, parsed once from the JSON the world module has
already checked (`World.questions`, `World.rubric`, `check_rubric`).

The reader sees a `Question`; only the scorer and the oracle see its `RubricEntry`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    category: str
    question: str
    fields: Mapping[str, str]
    """Answer field -> type (`number`, `string`, `boolean`, `array of strings`)."""
    scope: str | None = None
    """The subtree the reader is confined to; None when the question names none."""

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> Question:
        return cls(data["id"], data["category"], data["question"], dict(data["fields"]), data.get("scope"))


@dataclass(frozen=True, slots=True)
class Evidence:
    """A quote the answer must cite: where it stands and the exact text."""

    path: str
    version: int
    anchor: str
    quote: str

    @property
    def url(self) -> str:
        return f"{self.path}/v{self.version}#{self.anchor}"


@dataclass(frozen=True, slots=True)
class RubricEntry:
    answer: dict[str, Any]
    """Field -> the exact value (JSON), in the rubric's order."""
    evidence: Mapping[str, tuple[Evidence, ...]]
    """Field -> every quote that field needs."""
    abstain: bool
    """True when the documents do not answer: only an empty abstention is correct."""

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> RubricEntry:
        evidence = {
            field: tuple(Evidence(e["path"], int(e["version"]), e["anchor"], e["quote"]) for e in items)
            for field, items in (data.get("evidence") or {}).items()
        }
        return cls(dict(data.get("answer") or {}), evidence, bool(data.get("abstain")))

    def required(self) -> list[Evidence]:
        """Every evidence item of every field, in rubric order."""
        return [item for items in self.evidence.values() for item in items]


def parse_questions(data: Sequence[Mapping[str, Any]]) -> list[Question]:
    return [Question.parse(item) for item in data]


def parse_rubric(data: Mapping[str, Mapping[str, Any]]) -> dict[str, RubricEntry]:
    return {qid: RubricEntry.parse(entry) for qid, entry in data.items()}
