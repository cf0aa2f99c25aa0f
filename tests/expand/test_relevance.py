"""Which parts of a document hold the query's terms, and which say what it is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from demarkus.expand.relevance import (
    _KEPT,
    VOCABULARY_TEXT_MAX,
    _kept_vocabulary,
    is_field_list,
    lead_sections,
    ranked_blocks,
    sections_by_terms,
    summary_section,
    term_count,
)
from demarkus.index.query import words
from demarkus.markdown import block_starts, parse_outline

BODY = (
    b"# Leases\n\n> Superseded by ADR 12.\n\n"
    b"## Context\n\nWhy we looked again.\n\n"
    b"## Abstract\n\nLeases expire unless renewed.\n\n"
    b"## Renewal\n\nA worker renews its lease.\n\n"
    b"The lease lapses after a quorum loss.\n\n"
    b"- renew every 15 s\n- lease lasts 45 s\n\n"
    b"A worker renews its lease.\n\n"
    b"## Notes\n\nNothing here.\n"
)


def texts(blocks, body: bytes = BODY) -> list[bytes]:  # type: ignore[no-untyped-def]
    return [body[b.start : b.end].strip() for b in blocks]


def test_a_term_matches_at_a_word_start_and_counts_once():
    assert term_count("Exceptions and exception groups", ["except", "groups"]) == 2
    assert term_count("unexceptional", ["except"]) == 0
    assert term_count("lease lease lease", ["lease", "quorum"]) == 1


WORDS = st.text(alphabet="abcé_- \n.", max_size=12)


@given(st.lists(WORDS, max_size=30), st.lists(st.text(alphabet="abcé", min_size=1, max_size=4), max_size=6))
def test_term_count_is_the_number_of_terms_beginning_some_word(pieces: list[str], terms: list[str]) -> None:
    text = " ".join(pieces)
    present = set(words(text))
    expected = sum(1 for t in terms if any(w.startswith(t) for w in present))
    assert term_count(text, terms) == expected
    long = text + " " * VOCABULARY_TEXT_MAX  # counted without the kept vocabulary
    assert term_count(long, terms) == expected


def test_a_short_texts_vocabulary_is_kept_and_a_long_ones_is_not():
    short = "Beta alpha, and beta again"
    assert _kept_vocabulary(short) == "\0again\0alpha\0and\0beta"
    assert _kept_vocabulary(short) is _kept_vocabulary(short)  # kept
    long = "delta " * VOCABULARY_TEXT_MAX
    assert _kept_vocabulary(long) == "\0delta" and long not in _KEPT.texts()


def test_blocks_rank_by_distinct_terms_then_position_without_headings_or_repeats():
    outline = parse_outline(BODY)
    cuts = block_starts(BODY)
    assert texts(ranked_blocks(outline, BODY, cuts, ["lease", "quorum", "lapses"])) == [
        b"The lease lapses after a quorum loss.",  # three terms
        b"Leases expire unless renewed.",  # then one term each, in document order
        b"A worker renews its lease.",  # (its repeat further down is left out)
        b"- lease lasts 45 s",
    ]
    renewal = outline.find("renewal")
    assert renewal is not None
    assert texts(ranked_blocks(outline, BODY, cuts, ["renew"], within=(renewal.start, renewal.end))) == [
        b"A worker renews its lease.",
        b"- renew every 15 s",
    ]
    assert texts(ranked_blocks(outline, BODY, cuts, ["renew"], skip=renewal)) == [b"Leases expire unless renewed."]
    assert ranked_blocks(outline, BODY, cuts, []) == []


def test_sections_by_terms_keep_those_within_one_term_of_the_best():
    outline = parse_outline(BODY)
    assert [s.anchor for s in sections_by_terms(outline, ["lease", "quorum", "lapses", "worker"], 2)] == ["renewal"]
    assert [s.anchor for s in sections_by_terms(outline, ["leases", "why"], 5)] == ["leases", "context", "abstract"]


def test_the_lead_is_the_titles_banner_and_the_abstract():
    outline = parse_outline(BODY)
    summary = summary_section(outline)
    assert summary is not None and summary.anchor == "abstract"
    assert [s.anchor for s in lead_sections(outline)] == ["leases", "abstract"]


def test_a_title_whose_text_is_a_list_of_fields_does_not_lead():
    front = BODY.replace(
        b"> Superseded by ADR 12.", b"- Feature Name: `leases`\n- Start Date: 2015-05-04\n- RFC PR: #1105"
    )
    outline = parse_outline(front)
    title = outline.sections[0]
    assert is_field_list(outline, title)
    assert [s.anchor for s in lead_sections(outline)] == ["abstract"]


def test_a_list_is_front_matter_only_when_every_item_names_a_field():
    def first(body: bytes) -> bool:
        outline = parse_outline(body)
        return is_field_list(outline, outline.sections[0])

    assert first(b"# T\n\n* Status: draft\n+ Owner:\n")
    assert not first(b"# T\n\n- Status: draft\n- renew every 15 s\n")  # one item is not a field
    assert not first(b"# T\n\n- Status: draft\n\nThis page explains leases.\n")  # an introduction follows
    assert not first(b"# T\n\nNote: leases expire.\n")  # a paragraph, not a list
    assert not first(b"# T\n\n## Status\n\n- Status: draft\n")  # no text of its own
