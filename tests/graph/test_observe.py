"""Observation: a document's `rel-*` metadata and body links become its outgoing edges."""

from __future__ import annotations

import pytest

from demarkus.errors import BadRequestError
from demarkus.graph import Edge, node_url, observe_document

URL = "mark://localhost:7000/adr/0005.md"
HOST = "mark://localhost:7000"


def observe(body: str = "", **metadata: str) -> list[Edge]:
    keys = {k.replace("_", "-"): v for k, v in metadata.items()}
    return observe_document(URL, keys, body.encode())


def test_typed_relations_become_edges_with_absolute_targets() -> None:
    edges = observe(rel_supersedes="0002.md, /adr/0001.md", rel_depends_on="../arch.md")
    assert edges == [
        Edge(URL, f"{HOST}/adr/0001.md", "supersedes"),
        Edge(URL, f"{HOST}/adr/0002.md", "supersedes"),
        Edge(URL, f"{HOST}/arch.md", "depends-on"),
    ]


def test_body_links_carry_label_source_section_and_target_fragment() -> None:
    body = "# Title\n\n## Context\n\nSee [the setup](../guide.md#install).\n"
    assert observe(body) == [Edge(URL, f"{HOST}/guide.md", "", label="the setup", anchor="context", fragment="install")]


def test_links_in_the_preamble_have_no_anchor() -> None:
    assert observe("[b](b.md)\n\n# T\n") == [Edge(URL, f"{HOST}/adr/b.md", "", label="b")]


def test_relation_fragments_are_kept() -> None:
    assert observe(rel_implements="/spec.md#api") == [Edge(URL, f"{HOST}/spec.md", "implements", fragment="api")]


def test_other_authorities_are_kept_with_canonical_urls() -> None:
    body = "[a](mark://Peps.World:6309/pep-8.md) [b](mark://localhost:7001/x.md)\n"
    assert observe(body, rel_cites="mark://peps.world/pep-1.md") == [
        Edge(URL, "mark://localhost:7001/x.md", "", label="b"),
        Edge(URL, "mark://peps.world/pep-1.md", "cites"),
        Edge(URL, "mark://peps.world/pep-8.md", "", label="a"),
    ]


def test_own_authority_written_in_full_is_the_same_node() -> None:
    assert observe("[x](mark://localhost:7000/x.md)\n") == [Edge(URL, f"{HOST}/x.md", "", "x")]


def test_external_links_are_edges_to_the_url_as_written() -> None:
    edges = observe("[RFC](https://example.org/rfc#s2) [mail](mailto:a@b.c)\n")
    assert edges == [
        Edge(URL, "https://example.org/rfc", "", label="RFC", fragment="s2"),
        Edge(URL, "mailto:a@b.c", "", label="mail"),
    ]
    assert all(e.external for e in edges)


def test_self_references_are_skipped() -> None:
    body = "[me](0005.md) [me](#x) [me](mark://localhost:7000/adr/0005.md#y) [me](./0005.md#z)\n"
    assert observe(body, rel_related="0005.md, ./0005.md#ctx") == []


def test_repeated_links_aggregate_a_count_and_keep_the_first_labelled_occurrence() -> None:
    body = "# A\n\n[](b.md) [](b.md#one)\n\n# B\n\n[Bee](b.md#two) [Other label](b.md)\n"
    assert observe(body) == [Edge(URL, f"{HOST}/adr/b.md", "", label="Bee", anchor="b", fragment="two", count=4)]


def test_a_link_and_a_relation_to_one_target_are_two_edges() -> None:
    assert observe("[old](0002.md)\n", rel_supersedes="0002.md") == [
        Edge(URL, f"{HOST}/adr/0002.md", "", label="old"),
        Edge(URL, f"{HOST}/adr/0002.md", "supersedes"),
    ]


def test_one_relation_to_two_fragments_of_a_target_is_one_edge_counted_twice() -> None:
    assert observe(rel_depends_on="/s.md#a, /s.md#b") == [
        Edge(URL, f"{HOST}/s.md", "depends-on", fragment="a", count=2)
    ]


def test_rejected_relations_and_other_metadata_are_ignored() -> None:
    edges = observe(title="ADR 5", rel_="/x.md", rel_related="https://example.org/x, /a b.md, ,", tags="x")
    assert edges == []


def test_edges_are_sorted_by_target_then_rel() -> None:
    edges = observe("[z](z.md) [a](a.md)\n", rel_related="m.md", rel_cites="z.md")
    assert [(e.target, e.rel) for e in edges] == [
        (f"{HOST}/adr/a.md", ""),
        (f"{HOST}/adr/m.md", "related"),
        (f"{HOST}/adr/z.md", ""),
        (f"{HOST}/adr/z.md", "cites"),
    ]


def test_the_document_url_is_canonicalised_first() -> None:
    edges = observe_document("mark://Peps.World:6309/a.md#frag", {}, b"[b](b.md)\n")
    assert edges == [Edge("mark://peps.world/a.md", "mark://peps.world/b.md", "", label="b")]


@pytest.mark.parametrize(
    "url",
    ["/adr/a.md", "https://example.org/a.md", "mark:///a.md"],
    ids=["bare", "http", "no-host"],
)
def test_a_document_url_must_be_a_mark_url_with_a_host(url: str) -> None:
    with pytest.raises(BadRequestError):
        observe_document(url, {}, b"")


def test_a_body_that_is_not_utf8_is_a_bad_request() -> None:
    with pytest.raises(BadRequestError):
        observe_document(URL, {}, b"\xff\xfe")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mark://Host:6309/a.md#x", "mark://host/a.md"),
        ("mark://host:7000/a.md", "mark://host:7000/a.md"),
        ("https://example.org/a#b", "https://example.org/a"),
    ],
    ids=["default-port-and-fragment", "other-port", "external"],
)
def test_node_url_is_canonical_without_fragment(url: str, expected: str) -> None:
    assert node_url(url) == expected
