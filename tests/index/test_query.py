"""Query analysis, FTS5 expressions, snippet shaping and re-ranking (pure)."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from demarkus.index import scripts
from demarkus.index.query import (
    SNIPPET_BACK,
    SNIPPET_LEAD,
    SNIPPET_MAX_BYTES,
    STOP_WORDS,
    Candidate,
    Ranking,
    content_words,
    coordination,
    idf,
    match_all,
    match_any,
    prior,
    quote,
    rank,
    shape_snippet,
    snippet,
    tokens,
    word_bounds,
    words,
)

# --- words and content words -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", ["hello", "world"]),
        ("__init_subclass__ hook", ["init", "subclass", "hook"]),
        ("PEP-484: type_hints", ["pep", "484", "type", "hints"]),
        ("Café naïve", ["café", "naïve"]),
        ('"quoted" *star* NEAR(a b)', ["quoted", "star", "near", "a", "b"]),
        ("", []),
    ],
    ids=[
        "punctuation",
        "underscores-separate",
        "digits-kept",
        "unicode-letters",
        "syntax",
        "empty",
    ],
)
def test_words_are_lowercase_runs_of_letters_and_digits(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_content_words_drop_stop_words_short_words_and_repeats_keeping_order() -> None:
    question = "How many beta releases does each 3.X version get, and how many betas?"
    assert content_words(question) == ["beta", "releases", "version", "get", "betas"]


def test_content_words_drop_question_words_and_auxiliaries() -> None:
    for word in ("what", "which", "how", "many", "does", "would", "the", "is", "of"):
        assert word in STOP_WORDS
    assert content_words("What does which many would the of x garbage") == ["garbage"]


def test_a_query_of_only_stop_words_keeps_them_so_it_still_searches() -> None:
    assert content_words("What is this?") == ["what", "is", "this"]
    assert content_words("a ? !") == []


@given(st.text())
def test_content_words_are_lowercase_unique_and_at_least_two_characters(text: str) -> None:
    found = content_words(text)
    assert len(found) == len(set(found))
    # a lone Chinese, Japanese or Korean character is a word (`scripts.pieces`)
    assert all((len(w) >= 2 or scripts.holds(w)) and w == w.lower() for w in found)


# --- FTS5 expressions --------------------------------------------------------------------


def test_quote_makes_any_text_one_fts5_string() -> None:
    assert quote('say "hi"') == '"say ""hi"""'
    assert quote("NEAR") == '"NEAR"'


def test_match_any_and_match_all_build_or_and_expressions() -> None:
    assert match_any(["a", "b"]) == '"a" OR "b"'
    assert match_any(["a", "b"], ("trail", "body")) == '{trail body} : ("a" OR "b")'
    assert match_all(["a", "b"]) == '"a" AND "b"'


# --- snippets ----------------------------------------------------------------------------


def test_snippet_collapses_whitespace_to_one_line_and_keeps_markup_as_text() -> None:
    assert shape_snippet("  | a | `b` |\n\n  next\tline  ") == "| a | `b` | next line"


def test_a_long_snippet_is_cut_on_a_character_boundary_and_marked() -> None:
    text = "é" * 300  # two bytes each
    shaped = shape_snippet(text)
    assert shaped.endswith("…")
    assert len(shaped.encode("utf-8")) <= SNIPPET_MAX_BYTES
    assert set(shaped[:-1]) == {"é"}


def test_a_snippet_that_fits_is_left_whole() -> None:
    text = "x" * SNIPPET_MAX_BYTES
    assert shape_snippet(text) == text


@given(st.text())
def test_snippets_are_one_line_within_the_byte_limit(text: str) -> None:
    shaped = shape_snippet(text)
    assert len(shaped.encode("utf-8")) <= SNIPPET_MAX_BYTES
    assert "\n" not in shaped and "\r" not in shaped
    assert shaped == shaped.strip()


def test_a_snippet_opens_just_before_the_window_with_the_most_distinct_matches() -> None:
    filler = " ".join(f"w{i}" for i in range(100))
    text = f"alpha {filler} one two three beta gamma beta four five {filler} beta"
    shaped = snippet(text, {"alpha", "beta", "gamma"})
    assert shaped.startswith("…one two three beta gamma beta four five w0")
    assert shaped.endswith("…") and len(shaped.encode("utf-8")) <= SNIPPET_MAX_BYTES


def test_a_snippet_opens_at_the_sentence_or_line_holding_its_first_match() -> None:
    lead = "filler " * 100
    assert snippet(lead + "End of one. The big quetzal flies.", {"quetzal"}) == ("…The big quetzal flies.")
    assert snippet(lead + "\n- item with quetzal", {"quetzal"}) == "…item with quetzal"


def test_a_snippet_whose_matches_fit_from_the_start_shows_the_text_as_written() -> None:
    assert snippet("Just a note about the quixotic parser.", {"quixotic"}) == ("Just a note about the quixotic parser.")


def test_a_snippet_without_matches_shows_the_start() -> None:
    text = "First words here. " + "more " * 100
    shaped = snippet(text, set())
    assert shaped.startswith("First words here. more") and shaped.endswith("…")


@given(st.text(), st.sets(st.text(min_size=1, max_size=5)))
def test_snippet_windows_are_one_line_within_the_byte_limit(text: str, hits: set[str]) -> None:
    shaped = snippet(text, hits)
    assert len(shaped.encode("utf-8")) <= SNIPPET_MAX_BYTES
    assert "\n" not in shaped


@given(st.text(alphabet="ab İé.,\n_x1", max_size=400), st.sets(st.sampled_from(["a", "ab", "x1", "i̇", "é", "b"])))
def test_a_snippet_read_through_its_texts_word_offsets_is_the_same(text: str, hits: set[str]) -> None:
    split = tokens(text)
    assert snippet(text, hits, split=split, bounds=word_bounds(text)) == snippet(text, hits)
    starts, ends = word_bounds(text)
    assert len(starts) == len(split)  # one offset pair per word a snippet counts


_REFERENCE_WORD = re.compile(r"[^\W_]+")


@given(st.text())
def test_tokens_are_the_words_split_then_lowercased_and_for_ascii_the_words(text: str) -> None:
    assert tokens(text) == [w.lower() for w in _REFERENCE_WORD.findall(text)]
    ascii_text = text.encode("ascii", errors="replace").decode("ascii")
    assert tokens(ascii_text) == words(ascii_text)


def test_a_text_that_lowercases_into_other_runs_keeps_its_split_runs() -> None:
    text = "İstanbul"  # lower() adds a combining mark, which splits `words`
    assert tokens(text) == ["i̇stanbul"]
    assert words(text) == ["i", "stanbul"]


def reference_snippet(text: str, hit_words: set[str], size: int) -> str:
    """`snippet` as first written (a set per window): the sliding window must agree."""
    split = [w.lower() for w in _REFERENCE_WORD.findall(text)]
    hits = [i for i, w in enumerate(split) if w in hit_words]
    begin = 0
    if hits:
        best, first, last, right = (0, 0), 0, 0, 0
        for left, at in enumerate(hits):
            while right < len(hits) and hits[right] < at + size:
                right += 1
            window = hits[left:right]
            key = (len({split[i] for i in window}), len(window))
            if key > best:
                best, first, last = key, at, window[-1]
        low = max(0, first - SNIPPET_BACK)
        spans = list(itertools.islice(_REFERENCE_WORD.finditer(text), low, last + 1))
        begin = spans[max(0, first - SNIPPET_LEAD - low)].start()
        for j in range(first - low, -1, -1):
            before = text[spans[j - 1].end() : spans[j].start()] if j else text[: spans[0].start()]
            if j + low == 0 or re.search(r"[.!?:;]\s|\n", before):
                begin = spans[j].start() if j + low else 0
                break
        end = spans[-1].end()
        if begin and end < SNIPPET_MAX_BYTES:
            head = re.sub(r"\s+", " ", text[:end]).strip().encode("utf-8")
            if len(head) < SNIPPET_MAX_BYTES - len("…".encode()):
                begin = 0
    piece = text[begin : begin + SNIPPET_MAX_BYTES * 2]
    shaped = shape_snippet(("…" if begin else "") + piece)
    if begin + len(piece) < len(text) and not shaped.endswith("…"):
        shaped = shape_snippet(shaped + "…")
    return shaped


_PIECES = ["ab", "Cd", "ef", "gh", "ij", "kl", "mnop", "É", "x_y", ". ", "\n", ", ", ": "]


@given(
    st.lists(st.sampled_from(_PIECES), min_size=100, max_size=300).map(" ".join),
    st.sets(st.sampled_from(["ab", "cd", "ef", "é", "x"])),
    st.sampled_from([3, 5, 30]),
)
def test_the_sliding_window_picks_what_a_set_per_window_picks(text: str, hit_words: set[str], size: int) -> None:
    expected = reference_snippet(text, hit_words, size)
    assert snippet(text, hit_words, size=size) == expected
    assert snippet(text, hit_words, size=size, split=tokens(text)) == expected


def test_snippet_takes_its_words_once_when_given() -> None:
    text = "Alpha beta. Gamma delta release notes, and the release manager."
    assert snippet(text, {"release"}, split=tokens(text)) == snippet(text, {"release"})
    assert list(itertools.islice(tokens(text), 3)) == ["alpha", "beta", "gamma"]


# --- ranking -----------------------------------------------------------------------------


def candidate(path: str, relevance: float, matched: set[int], importance: float = 0.5, anchor: str = "s") -> Candidate:
    return Candidate(
        key=hash((path, anchor)),
        path=path,
        anchor=anchor,
        relevance=relevance,
        importance=importance,
        matched=frozenset(matched),
    )


def test_idf_is_positive_and_falls_as_more_rows_hold_the_term() -> None:
    values = [idf(1000, n) for n in (0, 1, 10, 100, 500, 1000)]
    assert all(v > 0 for v in values)
    assert values == sorted(values, reverse=True)


def test_coordination_is_the_weighted_share_of_terms_found() -> None:
    assert coordination({0, 2}, [1.0, 2.0, 3.0]) == pytest.approx(4.0 / 6.0)
    assert coordination(set(), [1.0]) == 0.0
    assert coordination({0}, []) == 0.0


def test_a_row_with_three_of_four_terms_outranks_one_term_with_higher_bm25() -> None:
    weights = [2.0, 2.0, 2.0, 2.0]
    many = candidate("/many.md", relevance=5.0, matched={0, 1, 2})
    repeated = candidate("/repeated.md", relevance=9.0, matched={3})
    assert [c.path for _, c in rank([repeated, many], weights)] == ["/many.md", "/repeated.md"]


def test_without_coordination_bm25_alone_orders_rows() -> None:
    weights = [2.0, 2.0, 2.0, 2.0]
    many = candidate("/many.md", relevance=5.0, matched={0, 1, 2})
    repeated = candidate("/repeated.md", relevance=9.0, matched={3})
    plain = Ranking(coord_power=0.0)
    assert [c.path for _, c in rank([many, repeated], weights, plain)] == [
        "/repeated.md",
        "/many.md",
    ]


def test_importance_prior_breaks_otherwise_equal_rows() -> None:
    assert prior(0.0) == pytest.approx(0.5) and prior(1.0) == pytest.approx(1.0)
    low = candidate("/a.md", 3.0, {0}, importance=0.1)
    high = candidate("/b.md", 3.0, {0}, importance=0.9)
    assert [c.path for _, c in rank([low, high], [1.0])] == ["/b.md", "/a.md"]


def test_equal_scores_go_by_path_then_anchor_whatever_the_input_order() -> None:
    rows = [
        candidate("/b.md", 2.0, {0}, anchor="a"),
        candidate("/a.md", 2.0, {0}, anchor="z"),
        candidate("/a.md", 2.0 + 1e-15, {0}, anchor="b"),
    ]
    expected = [("/a.md", "b"), ("/a.md", "z"), ("/b.md", "a")]
    for order in (rows, rows[::-1], [rows[1], rows[2], rows[0]]):
        assert [(c.path, c.anchor) for _, c in rank(order, [1.0])] == expected


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["/a.md", "/b.md", "/c.md"]),
            st.sampled_from([1.0, 1.0 + 1e-13, 1.0 + 3e-12, 1.0 - 1e-12, 2.0, 0.5, 0.0, 7.25]),
            st.frozensets(st.integers(0, 2), min_size=1),
            st.sampled_from([0.0, 0.5, 1.0]),
        ),
        max_size=30,
    ),
    st.integers(1, 12),
)
def test_ranking_the_best_few_orders_them_as_ranking_all_does(
    rows: list[tuple[str, float, frozenset[int], float]], limit: int
) -> None:
    found = [
        candidate(path, relevance, set(matched), anchor=str(i), importance=importance)
        for i, (path, relevance, matched, importance) in enumerate(rows)
    ]
    assert rank(found, [1.0, 1.0, 1.0], limit=limit) == rank(found, [1.0, 1.0, 1.0])[:limit]


# --- scripts written without spaces ------------------------------------------------------


def test_a_run_of_chinese_japanese_or_korean_characters_is_searched_as_its_pairs() -> None:
    assert words("gen后数据库 Café") == ["gen", "后数", "数据", "据库", "café"]
    assert content_words("东京的猫") == ["东京", "京的", "的猫"]
    assert content_words("猫 and dogs") == ["猫", "dogs"]  # a lone character is a word
    assert words("데이터베이스를") == ["데이", "이터", "터베", "베이", "이스", "스를"]


def test_the_index_text_sets_each_such_character_apart_and_reads_back_as_written() -> None:
    text = "重跑gen-itgc后。Plain text, café."
    held = scripts.spaced(text)
    assert held != text and scripts.plain(held) == text
    assert tokens(held) == ["重", "跑", "gen", "itgc", "后", "plain", "text", "café"]
    assert scripts.spaced("Plain text, café.") == "Plain text, café."
    assert quote("数据") == '"数\u200b据"'
