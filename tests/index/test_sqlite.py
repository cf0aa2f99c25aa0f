"""The SQLite FTS5 section index: rows, ranking, scope and filters, upkeep with a FileStore."""

from __future__ import annotations

import random
import sqlite3
import threading
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from demarkus.catalog import Filter, parse_filter
from demarkus.errors import BadRequestError
from demarkus.index import SectionHit, SectionIndex, rebuild, reconcile
from demarkus.index.query import Ranking, content_words, tokens, word_bounds, words
from demarkus.index.sqlite import MAX_FETCH_FACTOR, SCHEMA_VERSION, _selective, _Views
from demarkus.protocol import MAX_QUERY_TERMS
from demarkus.store import FileStore

from .conftest import FILLER, fill, put, where

# --- rows --------------------------------------------------------------------------------


def test_a_hit_names_the_innermost_section_holding_the_words(index: SectionIndex) -> None:
    fill(index)
    put(
        index,
        "/guide.md",
        "# Guide\n\nIntro.\n\n## Install\n\nSteps.\n\n### Windows\n\nRun the zorbex installer.\n",
    )
    hits = index.search("zorbex installer", "/", limit=5)
    assert where(hits)[0] == ("/guide.md", "windows")
    assert hits[0].heading == "Windows"
    assert hits[0].title == "Guide"


def test_an_outliners_bullet_heading_is_a_row_of_its_own(index: SectionIndex) -> None:
    fill(index)
    put(
        index,
        "/Tasks.md",
        "- ## Usage\n\t- Mark a block LATER or NOW.\n- ## Functionality\n"
        "\t- ### Deadline\n\t\t- Type the zorbex command to set a deadline.\n",
    )
    hits = index.search("zorbex deadline", "/", limit=5)
    assert where(hits)[0] == ("/Tasks.md", "deadline")
    assert hits[0].heading == "Deadline"


def test_a_document_without_headings_is_one_bare_path_row(index: SectionIndex) -> None:
    fill(index)
    assert put(index, "/note.md", "Just a note about the quixotic parser.\n") == 1
    hits = index.search("quixotic parser", "/", limit=5)
    assert where(hits) == [("/note.md", "")]
    assert hits[0].heading == ""
    assert hits[0].snippet == "Just a note about the quixotic parser."


def test_the_preamble_before_the_first_heading_is_the_bare_path_row(index: SectionIndex) -> None:
    fill(index)
    put(index, "/doc.md", "Preface on quixotic matters.\n\n# Body\n\nOther text here.\n")
    assert where(index.search("quixotic", "/", limit=5)) == [("/doc.md", "")]


def test_a_heading_without_text_of_its_own_is_reached_through_its_sub_sections(
    index: SectionIndex,
) -> None:
    fill(index)
    put(index, "/spec.md", "# Spec\n\n## Grammar rules\n\n### Tokens\n\nA token is a zorbex unit.\n")
    hits = index.search("grammar rules", "/", limit=5)
    assert where(hits) == [("/spec.md", "tokens")]


def test_a_document_whose_title_and_tags_hold_every_term_gets_the_catalog_row(
    index: SectionIndex,
) -> None:
    fill(index)
    put(
        index,
        "/zen.md",
        "# Sayings\n\n## Aphorisms\n\nBeautiful is better than ugly.\n",
        title="The Zen of Quetzal",
        tags="philosophy",
    )
    hits = index.search("zen quetzal philosophy", "/", limit=5)
    assert ("/zen.md", "") in where(hits)
    bare = next(h for h in hits if h.anchor == "")
    assert (bare.title, bare.tags, bare.heading) == ("The Zen of Quetzal", ("philosophy",), "")
    # one term missing from title and tags: no catalog row, and no section row either,
    # since no section's own text or headings hold any of the terms
    assert where(index.search("zen quetzal unrelatedword", "/", limit=5)) == []


def test_a_documents_aliases_count_as_its_title(index: SectionIndex) -> None:
    fill(index)
    put(index, "/z/glossary.md", "# Glossary\n\n## Words\n\nA quetzal is a bird.\n", aliases="Terms, Lexicon")
    put(index, "/a/other.md", "# Other\n\n## Words\n\nA quetzal is a bird.\n")
    hits = index.search("lexicon quetzal", "/", limit=5)
    assert where(hits)[:2] == [("/z/glossary.md", "words"), ("/a/other.md", "words")]  # the same text, and the alias
    assert ("/z/glossary.md", "") in where(index.search("glossary lexicon terms", "/", limit=5))  # the catalog row
    assert hits[0].title == "Glossary"  # an alias is searched, not shown


def test_sections_are_rows_only_through_their_own_text_or_headings(index: SectionIndex) -> None:
    fill(index)
    put(
        index,
        "/x.md",
        "# Alpha\n\n## One\n\nplain words\n\n## Two\n\nmore plain words\n",
        title="Quetzal manual",
    )
    # the title alone names the document (the catalog row), not each of its sections
    assert where(index.search("quetzal", "/", limit=5)) == [("/x.md", "")]
    assert where(index.search("quetzal plain", "/", limit=5)) == [
        ("/x.md", "one"),
        ("/x.md", "two"),
    ]


# --- ranking -----------------------------------------------------------------------------


def test_a_heading_match_outranks_the_same_word_in_body_text(index: SectionIndex) -> None:
    fill(index)
    put(
        index,
        "/a.md",
        "# Notes\n\n## Overview\n\nThe zorbex appears once in a long body of text.\n",
    )
    put(index, "/b.md", "# Notes\n\n## Zorbex\n\nThis section says it only in its heading line.\n")
    assert where(index.search("zorbex", "/", limit=5))[0] == ("/b.md", "zorbex")


def test_a_title_match_outranks_the_same_word_in_another_documents_body(
    index: SectionIndex,
) -> None:
    fill(index)
    put(
        index,
        "/a.md",
        "# Misc\n\n## Part\n\nA quetzal is mentioned here in passing among others.\n",
    )
    put(
        index,
        "/b.md",
        "# Quetzal handbook\n\n## Part\n\nA quetzal is mentioned here in passing among others.\n",
    )
    assert where(index.search("quetzal", "/", limit=5))[0] == ("/b.md", "part")


def test_a_section_with_three_of_four_terms_beats_one_term_repeated(index: SectionIndex) -> None:
    fill(index)
    put(index, "/rep.md", "# Rep\n\n## Zorbex\n\n" + "zorbex " * 40 + "\n")
    put(
        index,
        "/cov.md",
        "# Cov\n\n## Setup\n\nThe quetzal needs a glimmer and a zorbex to start.\n",
    )
    hits = index.search("quetzal glimmer zorbex wombat", "/", limit=5)
    assert where(hits)[:2] == [("/cov.md", "setup"), ("/rep.md", "zorbex")]


def test_words_found_nowhere_or_everywhere_do_not_hide_the_others(index: SectionIndex) -> None:
    fill(index)
    put(index, "/z.md", "# Z\n\n## Part\n\nThe zorbex of lorem.\n")
    assert where(index.search("zorbex neverseenword", "/", limit=3)) == [("/z.md", "part")]
    assert where(index.search("lorem zorbex", "/", limit=1)) == [("/z.md", "part")]


def test_each_hit_says_how_many_of_the_querys_informative_words_it_holds(index: SectionIndex) -> None:
    fill(index)  # "lorem" is in most rows: common, so not informative; unknown words are
    put(index, "/z.md", "# Z\n\n## Part\n\nThe zorbex of lorem beside a quetzal.\n\n## Other\n\nA zorbex.\n")
    hits = index.search("zorbex quetzal lorem neverseenword", "/", limit=3)
    assert [(hit.path, hit.anchor, hit.informative) for hit in hits[:2]] == [
        ("/z.md", "part", (2, 3)),
        ("/z.md", "other", (1, 3)),
    ]
    assert hits[2].informative == (0, 3)  # a filler row that holds only "lorem"
    assert {hit.telling for hit in hits} == {("zorbex", "quetzal", "neverseenword")}  # the same on every row


def test_the_informative_words_are_named_in_every_spelling_asked(index: SectionIndex) -> None:
    fill(index)
    put(index, "/z.md", "# Z\n\n## Part\n\nThe zorbexes of lorem.\n")
    (hit,) = index.search("zorbexes lorem zorbex", "/", limit=1)
    assert hit.telling == ("zorbexes", "zorbex") and hit.informative == (1, 1)


def test_a_term_left_out_of_the_engine_query_still_counts_where_it_is_found(index: SectionIndex) -> None:
    fill(index)  # "lorem" is in most rows: common, so only coverage asks for it
    put(index, "/both.md", "# B\n\n## Part\n\nThe zorbex beside lorem.\n")
    put(index, "/one.md", "# O\n\n## Part\n\nThe zorbex zorbex zorbex alone.\n")
    put(index, "/titled.md", "# Lorem zorbex\n\nNothing else.\n", title="Lorem zorbex")
    with index._reading() as snap:
        keys = [key for (key,) in snap.db.execute("SELECT rowid FROM fts WHERE fts MATCH 'zorbex'")]
        terms = ["zorbex", "lorem"]
        assert len(keys) == 4  # both, one, and titled's bare-path row and its section
        counts = index._term_counts(snap, terms)
        rows = index._row_count(snap)
        assert counts[1] > counts[0]  # lorem's list is the longer: matched together with zorbex
        assert index._matched(snap, terms, ["zorbex"], counts, rows, keys) == index._matched(
            snap, terms, terms, counts, rows, keys
        )
    found = where(index.search("zorbex lorem", "/", limit=5))
    assert found.index(("/both.md", "part")) < found.index(("/one.md", "part"))


def test_a_term_every_row_holds_counts_in_every_candidate_without_reading_its_list(index: SectionIndex) -> None:
    words_of = ["plain", "zorbex quetzal", "zorbex"]
    with index.bulk():  # every row's title and tags hold "widget"
        for d in range(12):
            body = f"# W{d}\n\nOpening.\n\n## Part\n\nThe {words_of[d % 3]} text.\n"
            put(index, f"/w/d{d:02d}.md", body, tags="kind:widget")
    with index._reading() as snap:
        terms = ["zorbex", "widget", "quetzal"]
        # the candidates: every one holds a term of the engine query (here zorbex)
        keys = [key for (key,) in snap.db.execute("SELECT rowid FROM fts WHERE fts MATCH 'zorbex'")]
        counts = index._term_counts(snap, terms)
        rows = index._row_count(snap)
        assert counts[1] == rows > counts[0]
        # told of one row more than the index holds, the match reads widget's list as any other's
        read = index._matched(snap, terms, ["zorbex"], counts, rows + 1, keys)
        asked: list[str] = []
        snap.db.set_trace_callback(asked.append)
        try:
            assert index._matched(snap, terms, ["zorbex"], counts, rows, keys) == read
        finally:
            snap.db.set_trace_callback(None)
        assert sorted(read.values(), key=len) == [frozenset({0, 1})] * 4 + [frozenset({0, 1, 2})] * 4
        (query,) = [sql for sql in asked if not sql.startswith("--")]  # FTS5's own reads start with --
        assert "quetzal" in query and "widget" not in query
    hits = index.search("zorbex widget quetzal", "/", limit=3)
    assert [hit.anchor for hit in hits] == ["part"] * 3


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ([10, 3000, 9000], ["a", "b"]),  # c is common once a and b match 200 rows
        ([10, 0, 50], ["a", "c"]),  # b is in no row: asking for it costs and finds nothing
        ([150, 9000, 9500], ["a", "b"]),  # a alone matches too few rows: b joins anyway
        ([4000, 3000, 2000], ["b", "c"]),  # rarest first until 5,000 rows are matched
        ([0, 0, 0], ["a", "b", "c"]),
    ],
    ids=["common-left-out", "absent-left-out", "too-few-rows", "row-budget", "nothing-held"],
)
def test_the_engine_is_asked_for_the_rarest_terms(counts: list[int], expected: list[str]) -> None:
    held = dict(enumerate(counts))
    assert _selective(["a", "b", "c"], held, 20_000, Ranking()) == expected


def test_stemming_finds_other_forms_of_a_word(index: SectionIndex) -> None:
    fill(index)
    put(index, "/r.md", "# Process\n\n## Cadence\n\nEach release is tagged after the freezing.\n")
    assert where(index.search("releases frozen freeze", "/", limit=5))[0] == ("/r.md", "cadence")
    assert where(index.search("Releasing", "/", limit=5)) == [("/r.md", "cadence")]


def test_diacritics_are_folded(index: SectionIndex) -> None:
    fill(index)
    put(index, "/c.md", "# Menu\n\n## Drinks\n\nA café au lait.\n")
    assert where(index.search("cafe", "/", limit=5)) == [("/c.md", "drinks")]


def test_words_inside_chinese_japanese_and_korean_text_are_found(index: SectionIndex) -> None:
    # written without spaces (or, in Korean, with particles joined to the word), such text
    # is one token to FTS5's unicode61: searched as pairs of characters, a word inside is found
    fill(index)
    put(index, "/zh.md", "# 数据库维护\n\n## 索引\n\n数据库的索引需要定期重建。\n\n## 备份\n\n每天凌晨备份一次。\n")
    put(index, "/ja.md", "# 東京\n\n## 交通\n\n東京は日本の首都です。地下鉄が便利です。\n")
    put(index, "/ko.md", "# 안내\n\n## 복구\n\n데이터베이스를 백업에서 복구합니다.\n")
    put(index, "/mixed.md", "# Log\n\n## Steps\n\n步2 重跑gen-itgc后50条引用清零\n")
    assert where(index.search("索引怎么重建", "/", limit=5))[0] == ("/zh.md", "索引")
    assert where(index.search("备份", "/", limit=5)) == [("/zh.md", "备份")]
    assert where(index.search("地下鉄", "/", limit=5)) == [("/ja.md", "交通")]
    assert where(index.search("데이터베이스", "/", limit=5)) == [("/ko.md", "복구")]
    assert where(index.search("itgc", "/", limit=5)) == [("/mixed.md", "steps")]
    # a pair must be adjacent: two characters apart do not make the word
    assert index.search("库索", "/", limit=5) == []
    hit = index.search("首都", "/", limit=5)[0]
    assert hit.snippet == "東京は日本の首都です。地下鉄が便利です。"  # as written, no separator shown


def test_a_row_shows_its_heading_without_the_id_it_gives_itself_which_is_still_searched(
    index: SectionIndex,
) -> None:
    fill(index)
    put(index, "/site.md", "# 指南 {#guide}\n\n## 缓存 {#caching}\n\n计算结果会被缓存。\n")
    (hit,) = index.search("caching", "/", limit=5)
    assert (hit.title, hit.heading, hit.anchor) == ("指南", "缓存", "缓存-caching")


def test_stop_words_in_a_question_do_not_match_anything(index: SectionIndex) -> None:
    fill(index)
    put(
        index,
        "/stop.md",
        "# Words\n\n## Common\n\nWhat is the which how many does it have of them.\n",
    )
    put(index, "/gc.md", "# Memory\n\n## Collector\n\nThe garbage collector runs in generations.\n")
    question = "What is the garbage collector and how many does it have?"
    assert where(index.search(question, "/", limit=5)) == [("/gc.md", "collector")]
    assert index.search(question, "/", limit=5) == index.search("garbage collector", "/", limit=5)


def test_equal_rows_are_ordered_by_path_then_anchor_every_time(index: SectionIndex) -> None:
    fill(index)
    body = "# Same\n\n## Twin\n\nIdentical zorbex text.\n\n## Twin\n\nIdentical zorbex text.\n"
    for path in ("/c.md", "/a.md", "/b.md"):
        put(index, path, body)
    first = where(index.search("zorbex", "/", limit=10))
    assert first == [(p, a) for p in ("/a.md", "/b.md", "/c.md") for a in ("twin", "twin-1")]
    assert all(where(index.search("zorbex", "/", limit=10)) == first for _ in range(5))


def test_importance_lifts_an_otherwise_equal_document(index: SectionIndex) -> None:
    fill(index)
    put(index, "/a.md", "# Same\n\n## Part\n\nzorbex text\n", importance="0.1")
    put(index, "/b.md", "# Same\n\n## Part\n\nzorbex text\n", importance="0.9")
    hits = index.search("zorbex", "/", limit=5)
    assert where(hits) == [("/b.md", "part"), ("/a.md", "part")]
    assert hits[0].importance == 0.9


# --- hostile input -----------------------------------------------------------------------

HOSTILE = [
    '"',
    '""',
    "*",
    "zorbex*",
    "NEAR(zorbex quetzal, 2)",
    "AND",
    "OR",
    "NOT",
    "zorbex AND",
    "-zorbex",
    "body:zorbex",
    "{meta trail}: zorbex",
    "^zorbex",
    "(",
    ")",
    "'",
    "\\",
    ":",
    "zorbex\x00quetzal",
    "🎉",
    "a",
    "",
    "   ",
    "x" * 5000,
    "zorbex " * 500,
    "rowid = 1; DROP TABLE fts",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise(index: SectionIndex, query: str) -> None:
    put(index, "/z.md", "# Z\n\n## Part\n\nzorbex quetzal body\n")
    hits = index.search(query, "/", limit=5)
    assert all(h.path == "/z.md" for h in hits)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(), scope=st.text(max_size=20))
def test_any_text_is_a_query_that_answers(index: SectionIndex, query: str, scope: str) -> None:
    if not index.indexed_versions():
        put(index, "/z.md", "# Z\n\n## Part\n\nzorbex quetzal body\n")
    if len(content_words(query)) > MAX_QUERY_TERMS:
        with pytest.raises(BadRequestError):
            index.search(query, "/" + scope, limit=3)
    else:
        assert isinstance(index.search(query, "/" + scope, limit=3), list)


# --- bounds ------------------------------------------------------------------------------

WORDS = [f"w{n}" for n in range(700)]
"""Made-up words, none a stop word, each its own stem."""


def test_more_than_max_query_terms_distinct_words_are_refused_naming_the_limit(
    index: SectionIndex,
) -> None:
    put(index, "/z.md", f"# Z\n\n## Part\n\n{WORDS[0]} {WORDS[63]}\n")
    for count in (MAX_QUERY_TERMS + 1, 600):
        with pytest.raises(BadRequestError, match=f"at most {MAX_QUERY_TERMS}"):
            index.search(" ".join(WORDS[:count] * 3), "/", limit=5)
    # exactly the limit is searched; stop words and repeats do not count toward it
    question = "what is the " + " and ".join(WORDS[:MAX_QUERY_TERMS] * 2)
    assert where(index.search(question, "/", limit=5)) == [("/z.md", "part")]


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The SQL text of every statement run on the connections opened from now on. Each
    distinct text is one entry in a connection's statement cache."""
    seen: set[str] = set()

    class Recording(sqlite3.Connection):
        def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
            seen.add(sql)
            return super().execute(sql, parameters)

        def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
            seen.add(sql)
            return super().executemany(sql, parameters)

    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, factory=Recording, **k))
    return seen


def test_distinct_large_lookups_reuse_a_small_fixed_set_of_statements(tmp_path: Path, statements: set[str]) -> None:
    rng = random.Random(12)
    with SectionIndex(tmp_path / "index.sqlite") as index:
        with index.bulk():
            for d in range(40):
                parts = "".join(f"## Part {s}\n\n{' '.join(rng.sample(WORDS[:200], 25))}\n\n" for s in range(3))
                put(index, f"/{'ab'[d % 2]}/d{d:02d}.md", f"# D{d}\n\n{parts}", tags=f"t{d % 3}")
        shapes = [("/", None), ("/a", None), ("/a/d00.md", None), ("/", Filter(tags=("t1",)))]

        def lookups(count: int) -> None:
            for n in range(count):
                scope, flt = shapes[n % len(shapes)]
                question = " ".join(rng.sample(WORDS[:200], MAX_QUERY_TERMS))
                assert index.search(question, scope, limit=10, flt=flt)

        lookups(12)
        warm = set(statements)
        lookups(60)
        assert statements == warm  # 60 more distinct lookups, not one new statement
    assert max(len(sql) for sql in statements) < 400


def test_a_filter_that_rejects_every_row_stops_fetching_at_the_bound(index: SectionIndex) -> None:
    with index.bulk():
        for d in range(400):  # one row each: a document without headings
            put(index, f"/n/d{d:03d}.md", f"A zorbex note, number {d}.\n")
    index.ranking = replace(index.ranking, candidates=4)
    judged: list[str] = []

    def reject(path: str) -> bool:
        judged.append(path)
        return False

    assert index.search("zorbex", "/", limit=1, visible=reject) == []
    assert len(judged) == 4 * MAX_FETCH_FACTOR  # not all 400 matching rows


# --- scope, visibility, limit, filter ----------------------------------------------------


@pytest.fixture
def spread(index: SectionIndex) -> SectionIndex:
    fill(index)
    put(index, "/docs/a.md", "# A\n\n## Part\n\nzorbex one\n", tags="adr,wire", importance="0.9")
    put(index, "/docs/sub/b.md", "# B\n\n## Part\n\nzorbex two\n", tags="adr", status="final")
    put(index, "/docsx/c.md", "# C\n\n## Part\n\nzorbex three\n", tags="wire")
    put(index, "/d.md", "# D\n\n## Part\n\nzorbex four\n", status="draft")
    index.update("/old.md", 1, {}, b"# E\n\n## Part\n\nzorbex five\n", datetime(2020, 1, 1, tzinfo=UTC))
    return index


def paths(hits: list[SectionHit]) -> list[str]:
    return sorted(h.path for h in hits)


def test_scope_keeps_the_folder_and_what_is_under_it_only(spread: SectionIndex) -> None:
    assert paths(spread.search("zorbex", "/docs", limit=10)) == ["/docs/a.md", "/docs/sub/b.md"]
    assert paths(spread.search("zorbex", "/docs/", limit=10)) == ["/docs/a.md", "/docs/sub/b.md"]
    assert paths(spread.search("zorbex", "/docs/a.md", limit=10)) == ["/docs/a.md"]
    assert len(spread.search("zorbex", "/", limit=10)) == 5


def test_visible_drops_rows_before_the_limit(spread: SectionIndex) -> None:
    everything = spread.search("zorbex", "/", limit=10)
    best = everything[0].path
    hidden = spread.search("zorbex", "/", limit=1, visible=lambda p: p != best)
    assert len(hidden) == 1 and hidden[0].path != best
    assert hidden[0] == everything[1]


def test_limit_cuts_after_ordering(spread: SectionIndex) -> None:
    everything = spread.search("zorbex", "/", limit=10)
    assert spread.search("zorbex", "/", limit=2) == everything[:2]
    assert spread.search("zorbex", "/", limit=0) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tag=adr", ["/docs/a.md", "/docs/sub/b.md"]),
        ("tag=ADR,tag=wire", ["/docs/a.md"]),
        ("status=draft", ["/d.md"]),
        ("modified-before=2021-01-01", ["/old.md"]),
        ("modified-after=2021-01-01,tag=wire", ["/docs/a.md", "/docsx/c.md"]),
    ],
)
def test_filters_judge_the_stored_document_fields(spread: SectionIndex, text: str, expected: list[str]) -> None:
    flt = parse_filter(text)
    assert paths(spread.search("zorbex", "/", limit=10, flt=flt)) == expected


def test_a_filter_that_rejects_most_candidates_still_fills_the_limit(index: SectionIndex) -> None:
    with index.bulk():
        for d in range(300):
            tags = "rare" if d % 100 == 7 else "common"
            put(
                index,
                f"/many/d{d:03d}.md",
                f"# D{d}\n\n## Part\n\nzorbex {'zorbex ' * (d % 5)}\n",
                tags=tags,
            )
    index.ranking = replace(index.ranking, candidates=20)  # most fetched rows fail the filter
    hits = index.search("zorbex", "/", limit=10, flt=Filter(tags=("rare",)))
    assert paths(hits) == ["/many/d007.md", "/many/d107.md", "/many/d207.md"]


def test_a_wide_scope_whose_rows_rank_below_the_rest_still_fills_the_limit(
    index: SectionIndex,
) -> None:
    with index.bulk():
        for d in range(30):  # the scope holds most documents, with weak matches
            put(index, f"/a/d{d:02d}.md", f"# D\n\n## Part\n\nzorbex {' '.join(FILLER)}\n")
        for d in range(25):  # the strong matches sit outside it
            put(index, f"/ab/d{d:02d}.md", "# D\n\n## Zorbex\n\nzorbex zorbex\n")
    index.ranking = replace(index.ranking, candidates=20)  # the first fetch is all /ab rows
    hits = index.search("zorbex", "/a", limit=10)
    assert len(hits) == 10 and all(h.path.startswith("/a/") for h in hits)
    assert len(index.search("zorbex", "/ab", limit=50)) == 25


# --- snippets ----------------------------------------------------------------------------


def test_snippets_are_one_line_of_at_most_240_bytes_around_the_match(index: SectionIndex) -> None:
    fill(index)
    long_text = ("Ünïcödé wörds 🎉 fill | this `cell` line.\n" * 40) + "The zorbex is here.\n" + "tail words " * 80
    put(index, "/long.md", "# Long\n\n## Part\n\n" + long_text)
    (hit,) = index.search("zorbex", "/", limit=1)
    assert "zorbex" in hit.snippet
    assert "\n" not in hit.snippet and "  " not in hit.snippet
    assert len(hit.snippet.encode("utf-8")) <= 240
    assert hit.snippet.startswith("…")


# --- upkeep ------------------------------------------------------------------------------


def test_update_replaces_every_row_of_the_document(index: SectionIndex) -> None:
    fill(index)
    put(index, "/u.md", "# U\n\n## Old\n\nzorbex text\n", version=1)
    put(index, "/u.md", "# U\n\n## New\n\nquetzal text\n", version=2)
    assert index.search("zorbex", "/", limit=5) == []
    assert where(index.search("quetzal", "/", limit=5)) == [("/u.md", "new")]
    assert index.indexed_versions()["/u.md"] == 2


def test_remove_drops_the_document_and_is_idempotent(index: SectionIndex) -> None:
    fill(index)
    put(index, "/r.md", "# R\n\n## Part\n\nzorbex\n", title="Quetzal")
    index.remove("/r.md")
    index.remove("/r.md")
    index.remove("/never.md")
    assert index.search("zorbex", "/", limit=5) == []
    assert index.search("quetzal", "/", limit=5) == []
    assert "/r.md" not in index.indexed_versions()


def test_the_index_persists_across_reopening(tmp_path: Path) -> None:
    with SectionIndex(tmp_path / "i.sqlite") as ix:
        put(ix, "/p.md", "# P\n\n## Part\n\nzorbex\n", version=3)
    with SectionIndex(tmp_path / "i.sqlite") as ix:
        assert ix.indexed_versions() == {"/p.md": 3}
        assert where(ix.search("zorbex", "/", limit=5)) == [("/p.md", "part")]


@pytest.mark.parametrize("other", [SCHEMA_VERSION - 1, SCHEMA_VERSION + 1])
def test_a_file_of_another_schema_version_is_emptied_for_a_rebuild(tmp_path: Path, other: int) -> None:
    with SectionIndex(tmp_path / "i.sqlite") as ix:
        put(ix, "/p.md", "# P\n\nzorbex\n")
    db = sqlite3.connect(tmp_path / "i.sqlite")
    db.execute(f"PRAGMA user_version = {other}")
    db.close()
    with SectionIndex(tmp_path / "i.sqlite") as ix:
        assert ix.indexed_versions() == {}
        put(ix, "/p.md", "# P\n\nzorbex\n")
        assert len(ix.search("zorbex", "/", limit=5)) == 1


def test_bulk_commits_once_and_rolls_everything_back_on_error(index: SectionIndex) -> None:
    with pytest.raises(RuntimeError), index.bulk():
        put(index, "/a.md", "# A\n\nzorbex\n")
        put(index, "/b.md", "# B\n\nzorbex\n")
        raise RuntimeError("boom")
    assert index.indexed_versions() == {}
    with index.bulk():
        put(index, "/a.md", "# A\n\nzorbex\n")
    assert index.indexed_versions() == {"/a.md": 1}


def test_searches_and_updates_from_many_threads_share_the_index(index: SectionIndex) -> None:
    fill(index, 5)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                put(index, f"/t{n}.md", f"# T\n\n## Part\n\nzorbex {i}\n", version=i + 1)
                index.search("zorbex", "/", limit=5)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    assert {p: v for p, v in index.indexed_versions().items() if p.startswith("/t")} == {
        f"/t{n}.md": 20 for n in range(4)
    }


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path / "store")


def test_rebuild_indexes_current_non_archived_documents_and_drops_the_rest(
    index: SectionIndex, store: FileStore
) -> None:
    store.write("/a.md", b"# A\n\n## One\n\nzorbex\n\n## Two\n\nquetzal\n", {"title": "A"})
    store.write("/a.md", b"# A\n\n## One\n\nzorbex again\n", {"title": "A"})
    store.write("/gone.md", b"# G\n\nzorbex\n", {})
    store.archive("/gone.md")
    put(index, "/stale.md", "# S\n\nzorbex\n")
    assert rebuild(index, store) == 2  # /a.md: its bare-path row and section "one"
    assert index.indexed_versions() == {"/a.md": 2}
    assert where(index.search("zorbex quetzal", "/", limit=5)) == [("/a.md", "one")]


def test_reconcile_repairs_an_index_that_missed_store_writes(index: SectionIndex, store: FileStore) -> None:
    store.write("/keep.md", b"# K\n\n## Part\n\nzorbex\n", {})
    store.write("/change.md", b"# C\n\n## Part\n\nzorbex\n", {})
    store.write("/archive.md", b"# A\n\n## Part\n\nzorbex\n", {})
    assert reconcile(index, store) == 3
    assert reconcile(index, store) == 0
    # drift: the store moves on while the index is not told (a crash between the two)
    store.write("/change.md", b"# C\n\n## Part\n\nquetzal\n", {})
    store.archive("/archive.md")
    store.write("/new.md", b"# N\n\n## Part\n\nquetzal\n", {})
    put(index, "/deleted.md", "# D\n\n## Part\n\nquetzal\n")
    assert reconcile(index, store) == 4
    assert index.indexed_versions() == {"/keep.md": 1, "/change.md": 2, "/new.md": 1}
    assert paths(index.search("zorbex", "/", limit=10)) == ["/keep.md"]
    assert paths(index.search("quetzal", "/", limit=10)) == ["/change.md", "/new.md"]
    store.unarchive("/archive.md")
    assert reconcile(index, store) == 1
    assert "/archive.md" in index.indexed_versions()


def test_a_search_after_a_write_reads_the_rows_it_wrote(index: SectionIndex) -> None:
    fill(index)
    put(index, "/a.md", "# A\n\n## Alpha\n\nquorum lease renewal\n")
    assert [h.heading for h in index.search("quorum lease", "/", limit=3)] == ["Alpha"]
    # the rewrite deletes the rows and inserts new ones, which may take the same ids
    put(index, "/a.md", "# A\n\n## Beta\n\nquorum lease renewal\n", version=2)
    assert [(h.heading, h.anchor) for h in index.search("quorum lease", "/", limit=3)] == [("Beta", "beta")]


@pytest.mark.parametrize("text", ["Leases_expire, unless renewed.", "Régie des baux: leases expire"])
def test_a_texts_words_are_read_once_and_kept_within_bounds(text: str) -> None:
    views = _Views(max_chars=1000)
    first = views.get(text)
    assert list(first.split) == tokens(text) and first.distinct == set(words(text))
    assert first.bounds is None  # offsets only for a text read again
    again = views.get(text)
    assert again.split is first.split and again.bounds == word_bounds(text)
    assert views.get(text) is views.get(text)  # kept
    for n in range(120):  # 1,080 characters of other texts push it out, oldest first
        views.get(f"text {n:04d}")
    assert views.get(text).split is not first.split
    large = "word " * 30  # over a tenth of the bound: split every time, never kept
    assert views.get(large) is not views.get(large)
