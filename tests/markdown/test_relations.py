"""`rel-*` metadata: resolution, authorities, fragments, rejections, order, duplicates."""

from __future__ import annotations

import pytest

from demarkus.errors import BadRequestError
from demarkus.markdown import PREFERRED, RejectedRelation, Relation, parse_relations

BASE = "/adr/0004-edges.md"
URL_BASE = "mark://world.example/adr/0004-edges.md"


@pytest.mark.parametrize(
    ("value", "base", "target", "fragment", "authority"),
    [
        ("/adr/0002.md", BASE, "/adr/0002.md", "", None),
        ("0003.md", BASE, "/adr/0003.md", "", None),
        ("../arch.md", BASE, "/arch.md", "", None),
        ("0003.md#context", BASE, "/adr/0003.md", "context", None),
        ("mark://Other-World:6309/s.md", BASE, "mark://other-world/s.md", "", "mark://other-world"),
        ("mark://o:6310/s.md#api", URL_BASE, "mark://o:6310/s.md", "api", "mark://o:6310"),
        ("0003.md", URL_BASE, "/adr/0003.md", "", None),
        ("mark://world.example/arch.md", URL_BASE, "/arch.md", "", None),
    ],
    ids=[
        "absolute",
        "relative",
        "parent",
        "fragment",
        "other-authority-canonical",
        "other-authority-from-url-base",
        "relative-from-url-base-is-bare",
        "own-authority-is-bare",
    ],
)
def test_references_resolve_like_links(
    value: str, base: str, target: str, fragment: str, authority: str | None
) -> None:
    expected = Relation("depends-on", target, fragment, authority, raw=value)
    assert parse_relations({"rel-depends-on": value}, base) == ([expected], [])


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("rel-", "/x.md", "empty predicate"),
        ("rel-related", "/a b.md", "whitespace in reference"),
        ("rel-related", "/a\tb.md", "whitespace in reference"),
        ("rel-related", "0004-edges.md", "self reference"),
        ("rel-related", "./0004-edges.md#x", "self reference"),
        ("rel-related", "#context", "self reference"),
        ("rel-related", "https://example.org/x", "external reference"),
        ("rel-related", "mark:///x.md", "invalid mark URL"),
    ],
    ids=[
        "empty-predicate",
        "space-inside",
        "tab-inside",
        "self-relative",
        "self-with-dot-and-fragment",
        "fragment-only-is-self",
        "external",
        "mark-url-without-host",
    ],
)
def test_bad_references_are_reported_not_raised(key: str, value: str, reason: str) -> None:
    assert parse_relations({key: value}, BASE) == ([], [RejectedRelation(key, value, reason)])


def test_a_mark_url_to_the_document_itself_is_a_self_reference() -> None:
    metadata = {"rel-related": "mark://world.example:6309/adr/0004-edges.md"}
    assert parse_relations(metadata, URL_BASE) == (
        [],
        [RejectedRelation("rel-related", metadata["rel-related"], "self reference")],
    )


def test_keys_are_read_sorted_pieces_trimmed_empty_pieces_skipped_duplicates_kept_once() -> None:
    metadata = {
        "title": "Edges",
        "rel-supersedes": " 0002.md ,, /adr/0002.md, 0002.md#a,",
        "rel-depends-on": "/arch.md, mark://other/spec.md",
        "relations": "/not-a-rel.md",
        "rel-superseded-by": "0005.md",
    }
    relations, rejected = parse_relations(metadata, BASE)
    assert rejected == []
    assert relations == [
        Relation("depends-on", "/arch.md", "", None, "/arch.md"),
        Relation("depends-on", "mark://other/spec.md", "", "mark://other", "mark://other/spec.md"),
        Relation("superseded-by", "/adr/0005.md", "", None, "0005.md"),
        Relation("supersedes", "/adr/0002.md", "", None, "0002.md"),
        Relation("supersedes", "/adr/0002.md", "a", None, "0002.md#a"),
    ]


def test_the_same_target_under_two_predicates_is_two_relations() -> None:
    relations, _ = parse_relations({"rel-implements": "/a.md", "rel-related": "/a.md"}, BASE)
    assert [(r.predicate, r.target) for r in relations] == [
        ("implements", "/a.md"),
        ("related", "/a.md"),
    ]


def test_good_references_survive_next_to_rejected_ones() -> None:
    relations, rejected = parse_relations({"rel-related": "/a.md, b c.md, /d.md"}, BASE)
    assert [r.target for r in relations] == ["/a.md", "/d.md"]
    assert [r.value for r in rejected] == ["b c.md"]


def test_a_malformed_mark_url_base_is_a_bad_request() -> None:
    with pytest.raises(BadRequestError):
        parse_relations({"rel-related": "/a.md"}, "mark://:bad/x.md")


def test_preferred_predicates_are_the_evidence_carrying_ones_in_order() -> None:
    assert PREFERRED == ("supersedes", "superseded-by", "depends-on", "implements", "derived-from")
