"""The catalog's matching rules: tags case-insensitively, title substrings, rank order."""

from __future__ import annotations

from datetime import UTC, datetime

from demarkus.catalog import Catalog, make_entry, parse_filter, query_terms, score

WHEN = datetime(2026, 11, 30, tzinfo=UTC)


def entry(path: str, tags: str, title: str = "", importance: str = "0.5"):  # type: ignore[no-untyped-def]
    return make_entry(path, {"tags": tags, "title": title, "importance": importance}, b"", WHEN)


def test_terms_match_tags_whatever_their_case_and_title_substrings():
    decision = entry("/adr/7.md", "ADR, Storage, status:Accepted", "Segment Log for Jobs")
    assert score(decision, query_terms("adr STORAGE status:accepted")) == 3
    assert score(decision, query_terms("segment jobs")) == 2  # title substrings, any case
    assert score(decision, query_terms("stor")) == 0  # a tag matches whole, the title did not hold it
    assert score(decision, query_terms("log")) == 1


def test_terms_match_alias_substrings_as_they_match_the_title():
    glossary = make_entry("/g.md", {"title": "Glossary", "aliases": "Terms, Word list", "alias": "Lexicon"}, b"", WHEN)
    assert score(glossary, query_terms("terms list lexicon")) == 3
    assert score(glossary, query_terms("glossary")) == 1 and score(glossary, query_terms("missing")) == 0
    assert score(entry("/t.md", "", "Glossary"), query_terms("terms")) == 0


def test_a_tag_filter_ignores_case_and_the_order_is_score_then_importance():
    catalog = Catalog()
    catalog.put(entry("/a.md", "Runbook, Snapshot", importance="0.4"))
    catalog.put(entry("/b.md", "runbook", importance="0.9"))
    catalog.put(entry("/c.md", "RUNBOOK, snapshot", importance="0.8"))
    found = catalog.search(query_terms("runbook snapshot"), "/", parse_filter("tag=Runbook"), 10)
    assert [e.path for e in found] == ["/c.md", "/a.md", "/b.md"]
    assert [e.path for e in catalog.search(["*"], "/", parse_filter("tag=snapshot"), 10)] == ["/c.md", "/a.md"]


def test_a_nested_tag_is_also_under_each_tag_above_it():
    catalog = Catalog()
    catalog.put(entry("/reading.md", "Inbox/To-read"))
    catalog.put(entry("/deep.md", "inbox/later/someday"))
    catalog.put(entry("/other.md", "inboxes, myjob/work"))
    inbox = parse_filter("tag=inbox")
    assert [e.path for e in catalog.search(["*"], "/", inbox, 10)] == ["/deep.md", "/reading.md"]
    assert [e.path for e in catalog.search(["*"], "/", parse_filter("tag=inbox/later"), 10)] == ["/deep.md"]
    assert [e.path for e in catalog.search(["*"], "/", parse_filter("tag=work"), 10)] == []  # below, not above
    assert [e.path for e in catalog.search(["*"], "/", parse_filter("tag=to-read"), 10)] == []
    assert score(entry("/r.md", "inbox/to-read"), query_terms("inbox to-read")) == 1


def test_a_tags_leading_hash_is_how_a_note_writes_it_not_part_of_it():
    catalog = Catalog()
    catalog.put(entry("/a.md", "work"))
    catalog.put(entry("/b.md", "#Work"))  # as a frontmatter may hold it
    catalog.put(entry("/c.md", "homework"))
    for written in ("tag=#work", "tag=work", "tag=WORK"):
        assert [e.path for e in catalog.search(["*"], "/", parse_filter(written), 10)] == ["/a.md", "/b.md"]
    assert score(entry("/a.md", "work"), query_terms("#work")) == 1


def test_the_generation_counts_every_change_and_only_changes():
    catalog = Catalog()
    start = catalog.generation
    catalog.put(entry("/b.md", "", "B"))
    catalog.put(entry("/a.md", "", "A"))
    assert catalog.generation == start + 2
    assert [e.path for e in catalog.entries()] == ["/a.md", "/b.md"]
    catalog.remove("/missing.md")
    assert catalog.generation == start + 2
    catalog.remove("/a.md")
    assert catalog.generation == start + 3 and [e.path for e in catalog.entries()] == ["/b.md"]
