"""Scoring rules on hand-made traces over the demo world."""

from __future__ import annotations

import json

import pytest

from demarkus.eval.questions import Question, parse_rubric
from demarkus.eval.scoring import (
    Corpus,
    citation_problem,
    lookup_blocks,
    observations,
    parse_answer,
    relation_expansions,
    score_attempt,
    values_equal,
)
from demarkus.worlds import demo_world_path, open_world

PATH = "/reference/job-format.md"
PAYLOAD = "A payload may be at most 256 KiB."
WINDOW = "The broker remembers an idempotency key for 24 hours after the job that carried it was enqueued."
Q = Question("q01", "direct", "...", {})


@pytest.fixture(scope="module")
def world():  # type: ignore[no-untyped-def]
    w = open_world(demo_world_path())
    return Corpus.from_world(w), parse_rubric(w.rubric())


def body(corpus: Corpus, anchor: str) -> str:
    span = corpus.outline(PATH, 1)
    section = span.find(anchor)
    return span.text(section).decode()


def fetch(url: str, text: str, section: str | None = None) -> dict:
    head = "status: ok\nversion: 1\ntitle: Job format\n" + (f"section: #{section}\n" if section else "")
    return {"name": "mark_fetch", "input": {"url": url}, "output": head + "\n" + text}


def answer(citations: list[dict], values: dict | None = None, abstain: bool = False) -> str:
    return json.dumps(
        {
            "answer": values if values is not None else {"idempotency_window_hours": 24, "max_payload_kib": 256},
            "citations": citations,
            "abstain": abstain,
        }
    )


CITES = [
    {"field": "max_payload_kib", "url": f"{PATH}/v1#payload", "quote": PAYLOAD},
    {"field": "idempotency_window_hours", "url": f"{PATH}/v1#idempotency-keys", "quote": WINDOW},
]


def observed_both(corpus: Corpus) -> list[dict]:
    return [
        fetch(f"{PATH}#payload", body(corpus, "payload"), "payload"),
        fetch(f"{PATH}#idempotency-keys", body(corpus, "idempotency-keys"), "idempotency-keys"),
    ]


def test_a_fully_supported_answer_is_correct(world):  # type: ignore[no-untyped-def]
    corpus, rubric = world
    score = score_attempt(Q, rubric["q01"], observed_both(corpus), answer(CITES), corpus)
    assert score["correct"], score["reasons"]


def test_a_whole_document_fetch_counts_as_observation(world):  # type: ignore[no-untyped-def]
    corpus, rubric = world
    whole = corpus.outline(PATH, 1).body.decode()
    calls = [fetch(PATH, whole)]
    assert score_attempt(Q, rubric["q01"], calls, answer(CITES), corpus)["correct"]


def test_a_section_outline_counts_its_own_text_and_a_document_outline_counts_nothing(world):  # type: ignore[no-untyped-def]
    corpus, rubric = world
    whole = corpus.outline(PATH, 1).body.decode()
    outlined = "mode: outline\nsize: 9000 bytes, 200 lines\n"
    # a large section answers with its own text first: the text it shows was observed
    as_section = [
        {**call, "output": call["output"].replace("\nsection: ", "\n" + outlined + "section: ", 1)}
        for call in observed_both(corpus)
    ]
    assert score_attempt(Q, rubric["q01"], as_section, answer(CITES), corpus)["correct"]
    # a large document's outline holds headings and an opening, not the document's text
    document = fetch(PATH, whole)
    as_document = [{**document, "output": document["output"].replace("\n\n", "\n" + outlined + "\n", 1)}]
    assert not score_attempt(Q, rubric["q01"], as_document, answer(CITES), corpus)["correct"]


def test_an_unobserved_quote_is_not_a_valid_citation(world):  # type: ignore[no-untyped-def]
    corpus, rubric = world
    calls = observed_both(corpus)[:1]
    score = score_attempt(Q, rubric["q01"], calls, answer(CITES), corpus)
    assert not score["correct"] and not score["citations_valid"]
    assert any("never returned" in r for r in score["reasons"])


def test_a_quote_outside_the_cited_section_is_invalid(world):  # type: ignore[no-untyped-def]
    corpus, rubric = world
    wrong = [dict(CITES[0], url=f"{PATH}/v1#idempotency-keys"), CITES[1]]
    score = score_attempt(Q, rubric["q01"], observed_both(corpus), answer(wrong), corpus)
    assert not score["correct"] and any("not inside the cited section" in r for r in score["reasons"])


def test_table_rows_and_snippets_are_never_observations(world):  # type: ignore[no-untyped-def]
    corpus, rubric = world
    table = f"status: ok\nmatches: 1\n\n| Path | Snippet |\n|---|---|\n| {PATH}#payload | {PAYLOAD} {WINDOW} |\n"
    calls = [{"name": "mark_lookup", "input": {"query": "payload"}, "output": table}]
    assert observations(calls) == []
    assert not score_attempt(Q, rubric["q01"], calls, answer(CITES), corpus)["correct"]


def test_lookup_frames_are_observations_and_via_counts_as_relation_expansion(world):  # type: ignore[no-untyped-def]
    corpus, rubric = world
    text = (
        "status: ok\n\n| Path |\n|---|\n| x |\n\n"
        f">>> {PATH}/v1#payload\n\n{body(corpus, 'payload')}\n\n"
        f">>> rel: {PATH}/v1 related /decisions/adr-0008-pier-framing.md\n"
        f">>> {PATH}/v1#idempotency-keys (via /faq.md/v1 derived-from)\n\n{body(corpus, 'idempotency-keys')}\n\n"
        f">>> note: expanded 1 of 1 rows and 1 related document; used 400 of 1500 tokens\n"
    )
    calls = [{"name": "mark_lookup", "input": {"query": "payload"}, "output": text}]
    blocks = lookup_blocks(text)
    assert [(b[0], b[1], b[2], b[4]) for b in blocks] == [
        (PATH, 1, "payload", False),
        (PATH, 1, "idempotency-keys", True),
    ]
    assert relation_expansions(calls) == 1
    assert score_attempt(Q, rubric["q01"], calls, answer(CITES), corpus)["correct"]


def test_wrong_values_missing_evidence_and_no_retrieval(world):  # type: ignore[no-untyped-def]
    corpus, rubric = world
    calls = observed_both(corpus)
    wrong = answer(CITES, {"idempotency_window_hours": 24, "max_payload_kib": 512})
    assert not score_attempt(Q, rubric["q01"], calls, wrong, corpus)["answer_correct"]
    partial = score_attempt(Q, rubric["q01"], calls, answer(CITES[:1]), corpus)
    assert partial["answer_correct"] and not partial["evidence_sufficient"] and not partial["correct"]
    assert score_attempt(Q, rubric["q01"], [], answer(CITES), corpus)["reasons"] == ["no retrieval attempted"]


def test_absent_is_correct_only_as_an_empty_abstention(world):  # type: ignore[no-untyped-def]
    corpus, rubric = world
    calls = observed_both(corpus)
    empty = json.dumps({"answer": {}, "citations": [], "abstain": True})
    assert score_attempt(Q, rubric["q10"], calls, empty, corpus)["correct"]
    assert not score_attempt(Q, rubric["q10"], calls, answer(CITES), corpus)["correct"]
    assert not score_attempt(Q, rubric["q01"], calls, empty, corpus)["correct"]


def test_answer_parsing_is_strict() -> None:
    ok = '{"answer": {}, "citations": [], "abstain": true}'
    assert parse_answer(ok)[0] is not None
    assert parse_answer("```json\n" + ok + "\n```")[0] is not None
    assert parse_answer("Here: " + ok)[0] is None
    assert parse_answer('{"answer": {}, "citations": [], "abstain": true, "extra": 1}')[0] is None
    assert parse_answer('{"answer": {}, "citations": [{"url": "/a.md/v1#x"}], "abstain": false}')[0] is None


def test_values_are_exact_and_typed() -> None:
    assert values_equal(24.0, 24) and values_equal(["a", "b"], ["a", "b"])
    assert not values_equal(True, 1) and not values_equal(1, True)
    assert not values_equal(["b", "a"], ["a", "b"]) and not values_equal("24", 24)


def test_lookup_blocks_come_from_the_frame_parser_and_only_blocks_count() -> None:
    text = (
        "status: ok\n\n| Path |\n|---|\n| x |\n\n"
        ">>> mark://demo.world/a.md/v2#intro\n\nIntro text.\n >>> not a frame\n\n"
        ">>> /a.md/v2#sub: within /a.md/v2#intro above\n"
        ">>> /b.md/v1: same text as /a.md/v2#intro above\n"
        ">>> note: did not fit: /c.md#x (~12 tokens)\n"
    )
    assert lookup_blocks(text) == [("/a.md", 2, "intro", "Intro text.\n>>> not a frame", False)]


def test_a_location_printed_with_escapes_names_the_worlds_document() -> None:
    """A name holding `#` or `%` is printed percent-escaped by the tools (`/C%23.md`) and
    as it is by v0.1.0 (`/New%3F.md`, Logseq's own escape): both observe and cite it."""
    corpus = Corpus({"/C#.md": ["# C\n\n## Use\n\nSharp text.\n"], "/New%3F.md": ["# New\n\nFresh text.\n"]})
    assert [corpus.named(p) for p in ("/C%23.md", "/C#.md", "/New%253F.md", "/New%3F.md", "/x%20y.md")] == [
        "/C#.md",
        "/C#.md",
        "/New%3F.md",
        "/New%3F.md",
        "/x%20y.md",
    ]
    calls = [
        {"name": "mark_lookup", "input": {}, "output": ">>> /C%23.md/v1#use\n\n## Use\n\nSharp text.\n"},
        {"name": "mark_lookup", "input": {}, "output": ">>> /New%3F.md/v1\n\n# New\n\nFresh text.\n"},
    ]
    seen = observations(calls)  # type: ignore[arg-type]
    for url, quote in (("/C%23.md/v1#use", "Sharp text."), ("/New%253F.md/v1#new", "Fresh text.")):
        assert citation_problem(corpus, {"field": "f", "url": url, "quote": quote}, seen) == ""
