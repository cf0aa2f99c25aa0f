"""The graph store: observations, persistence, incoming/outgoing edges, neighbourhoods, cursors."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from demarkus.errors import BadRequestError, IntegrityError
from demarkus.graph import Edge, GraphStore, NeighborhoodRow, Node, observe_document

W = "mark://w"
WHEN = datetime(2026, 10, 10, 12, 0, tzinfo=UTC)


def doc(name: str) -> str:
    return f"{W}/{name}.md"


def link(source: str, target: str, rel: str = "", **fields: object) -> Edge:
    return Edge(doc(source), doc(target), rel, **fields)  # type: ignore[arg-type]


@pytest.fixture
def store() -> Iterator[GraphStore]:
    graph = GraphStore(None)
    yield graph
    graph.close()


def put(store: GraphStore, source: str, *edges: Edge, version: int = 1) -> None:
    store.observe(doc(source), title=source.upper(), version=version, edges=edges, observed_at=WHEN)


def pairs(edges: list[Edge]) -> list[tuple[str, str, str]]:
    return [(e.source.removeprefix(f"{W}/"), e.target.removeprefix(f"{W}/"), e.rel) for e in edges]


# --- observations -------------------------------------------------------------------------


def test_an_observation_records_the_node_and_its_outgoing_edges(store: GraphStore) -> None:
    put(store, "a", link("a", "b", label="B", anchor="intro", fragment="x", count=2))
    assert store.node(doc("a")) == Node(doc("a"), "A", 1, WHEN)
    assert store.outgoing(doc("a")) == [link("a", "b", label="B", anchor="intro", fragment="x", count=2)]
    assert store.incoming(doc("b")) == store.outgoing(doc("a"))
    assert store.node(doc("b")) is None


def test_a_fresh_observation_replaces_the_whole_outgoing_set(store: GraphStore) -> None:
    put(store, "a", link("a", "b"), link("a", "c", "supersedes"))
    put(store, "a", link("a", "c", label="now labelled"), link("a", "d"), version=2)
    assert pairs(store.outgoing(doc("a"))) == [("a.md", "c.md", ""), ("a.md", "d.md", "")]
    assert store.incoming(doc("b")) == []
    assert store.incoming(doc("c")) == [link("a", "c", label="now labelled")]
    node = store.node(doc("a"))
    assert node is not None and node.version == 2


def test_observing_one_document_leaves_the_others_alone(store: GraphStore) -> None:
    put(store, "a", link("a", "c"))
    put(store, "b", link("b", "c"))
    put(store, "a")
    assert pairs(store.incoming(doc("c"))) == [("b.md", "c.md", "")]


def test_repeated_edges_in_one_observation_add_their_counts(store: GraphStore) -> None:
    put(store, "a", link("a", "b", count=2), link("a", "b", count=3))
    assert [e.count for e in store.outgoing(doc("a"))] == [5]


def test_an_edge_from_another_source_is_refused(store: GraphStore) -> None:
    with pytest.raises(ValueError, match="not the observed"):
        put(store, "a", link("b", "c"))
    assert store.node(doc("a")) is None


def test_a_naive_observation_time_is_refused(store: GraphStore) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        store.observe(doc("a"), title="", version=1, edges=[], observed_at=datetime(2026, 1, 1))


def test_observation_times_are_stored_in_utc(store: GraphStore) -> None:
    local = datetime(2026, 10, 10, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    store.observe(doc("a"), title="A", version=1, edges=[], observed_at=local)
    node = store.node(doc("a"))
    assert node is not None and node.observed_at == WHEN and node.observed_at.tzinfo == UTC


def test_forget_drops_outgoing_edges_keeps_incoming_and_marks_the_node_gone(
    store: GraphStore,
) -> None:
    put(store, "a", link("a", "b"))
    put(store, "b", link("b", "c"))
    store.forget(doc("b"))
    assert store.outgoing(doc("b")) == []
    assert store.incoming(doc("b")) == [link("a", "b")]
    assert store.node(doc("b")) == Node(doc("b"), "B", 1, WHEN, gone=True)
    put(store, "b", version=2)
    node = store.node(doc("b"))
    assert node is not None and not node.gone


def test_queries_canonicalise_the_url(store: GraphStore) -> None:
    put(store, "a", link("a", "b"))
    assert store.incoming("mark://W:6309/b.md#section") == [link("a", "b")]
    assert store.node("mark://w:6309/a.md") is not None


def test_titles_of_observed_documents(store: GraphStore) -> None:
    put(store, "a")
    store.observe(doc("u"), title="", version=1, edges=[], observed_at=WHEN)
    assert store.titles([doc("a"), doc("u"), doc("never")]) == {doc("a"): "A"}


def test_a_seed_gives_backlinks_of_documents_never_read(store: GraphStore) -> None:
    taken = store.seed({doc("a"): "A", doc("c"): "C"}, [link("a", "b", "supersedes"), link("c", "b")])
    assert taken == 2
    assert [e.source for e in store.backlinks(doc("b"))] == [doc("a"), doc("c")]
    assert store.titles([doc("a"), doc("b"), doc("c")]) == {doc("a"): "A", doc("c"): "C"}


def test_a_document_read_keeps_its_own_edges_against_any_seed(store: GraphStore) -> None:
    put(store, "a", link("a", "b"))
    assert store.seed({doc("a"): "Seeded title"}, [link("a", "c", "depends-on")]) == 0
    assert [e.target for e in store.outgoing(doc("a"))] == [doc("b")]
    assert store.titles([doc("a")]) == {doc("a"): "A"}
    put(store, "d")
    store.forget(doc("d"))  # a document read as gone stays gone
    store.seed({}, [link("d", "b")])
    assert store.outgoing(doc("d")) == []


def test_a_later_seed_replaces_what_an_earlier_one_gave(store: GraphStore) -> None:
    store.seed({}, [link("a", "b"), link("a", "c")])
    store.seed({}, [link("a", "c", "supersedes")])
    assert [(e.target, e.rel) for e in store.outgoing(doc("a"))] == [(doc("c"), "supersedes")]
    put(store, "a", link("a", "b"))  # then the document is read: its read wins
    assert [e.target for e in store.outgoing(doc("a"))] == [doc("b")]


def test_an_export_is_asked_for_once_an_interval_with_the_etag_last_taken_in(store: GraphStore) -> None:
    assert store.seed_due(W, 100.0, 300.0) == ""
    assert store.seed_due(W, 150.0, 300.0) is None  # asked for already, even before its answer
    store.seeded(W, "e1")
    assert store.seed_due(W, 399.0, 300.0) is None
    assert store.seed_due(W, 400.0, 300.0) == "e1"
    assert store.seed_due("mark://other", 150.0, 300.0) == ""


def test_the_store_persists_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "graph" / "graph.sqlite"
    edges = observe_document(doc("a"), {"rel-supersedes": "/old.md"}, b"# A\n\n[b](b.md)\n")
    with GraphStore(path) as first:
        first.observe(doc("a"), title="A", version=3, edges=edges, observed_at=WHEN)
    with GraphStore(path) as second:
        assert second.outgoing(doc("a")) == edges
        assert second.node(doc("a")) == Node(doc("a"), "A", 3, WHEN)
        assert second.backlinks(doc("old")) == [Edge(doc("a"), doc("old"), "supersedes")]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_store_from_a_newer_schema_is_refused_with_advice(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(IntegrityError, match="schema version 99"):
        GraphStore(path)


def test_a_file_that_is_not_sqlite_is_refused_with_advice(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    path.write_bytes(b"not a database at all, " * 100)
    with pytest.raises(IntegrityError, match="move it aside"):
        GraphStore(path)


def test_a_bulk_of_writes_is_one_transaction(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    with GraphStore(path) as store:
        with store.bulk():
            put(store, "a", link("a", "b"))
            put(store, "b", link("b", "c"))
            store.forget(doc("b"))
            with sqlite3.connect(path) as other:  # nothing is visible before the commit
                assert other.execute("SELECT count(*) FROM nodes").fetchone()[0] == 0
        assert store.node(doc("a")) == Node(doc("a"), "A", 1, WHEN)
        assert store.outgoing(doc("a")) == [link("a", "b")] and store.outgoing(doc("b")) == []
        with pytest.raises(RuntimeError), store.bulk():
            put(store, "c", link("c", "a"))
            raise RuntimeError("the seeding failed")
        assert store.node(doc("c")) is None  # every write of the bulk rolled back


def test_a_write_that_fails_inside_a_bulk_is_undone_alone(store: GraphStore) -> None:
    put(store, "a", link("a", "b"))
    with store.bulk():
        with pytest.raises(sqlite3.IntegrityError):  # the delete ran, then the insert failed
            store.observe(doc("a"), title=None, version=2, edges=[link("a", "c")], observed_at=WHEN)  # type: ignore[arg-type]
        put(store, "d", link("d", "a"))
    assert store.outgoing(doc("a")) == [link("a", "b")]
    assert store.node(doc("d")) is not None


def test_threads_can_share_one_store(tmp_path: Path) -> None:
    def work(i: int) -> int:
        put(store, f"s{i:02}", link(f"s{i:02}", "hub"))
        return store.neighborhood(doc("hub"), page_size=100).total_rows

    with GraphStore(tmp_path / "graph.sqlite") as store, ThreadPoolExecutor(8) as pool:
        totals = list(pool.map(work, range(40), timeout=30))
        assert all(1 <= t <= 40 for t in totals)
        assert len(store.backlinks(doc("hub"))) == 40


# --- incoming, outgoing, backlinks --------------------------------------------------------


def test_incoming_and_outgoing_are_sorted_by_the_other_end_then_rel(store: GraphStore) -> None:
    put(store, "x", link("x", "c", "supersedes"), link("x", "c"), link("x", "a"))
    put(store, "b", link("b", "x", "cites"), link("b", "x"))
    put(store, "a", link("a", "x"))
    assert pairs(store.outgoing(doc("x"))) == [
        ("x.md", "a.md", ""),
        ("x.md", "c.md", ""),
        ("x.md", "c.md", "supersedes"),
    ]
    assert pairs(store.incoming(doc("x"))) == [
        ("a.md", "x.md", ""),
        ("b.md", "x.md", ""),
        ("b.md", "x.md", "cites"),
    ]
    assert store.backlinks(doc("x")) == store.incoming(doc("x"))


def test_edges_to_other_authorities_and_external_urls_are_kept(store: GraphStore) -> None:
    far = Edge(doc("a"), "mark://peps.world/pep-8.md", "cites")
    web = Edge(doc("a"), "https://example.org/x", "", label="web")
    put(store, "a", far, web)
    assert store.outgoing(doc("a")) == [web, far]
    assert store.backlinks("mark://peps.world:6309/pep-8.md") == [far]
    assert store.backlinks("https://example.org/x") == [web]


# --- neighbourhoods -----------------------------------------------------------------------


@pytest.fixture
def star(store: GraphStore) -> GraphStore:
    """x links to a, c (link and supersedes) and itself; b and c link to x; d is elsewhere."""
    put(store, "x", link("x", "a"), link("x", "c"), link("x", "c", "supersedes"), link("x", "x"))
    put(store, "b", link("b", "x", "depends-on", count=2))
    put(store, "c", link("c", "x", label="back"))
    put(store, "d", link("d", "a"))
    return store


def rows(store: GraphStore, **query: object) -> list[tuple[str, list[tuple[str, str, str]]]]:
    page = store.neighborhood(doc("x"), **query)  # type: ignore[arg-type]
    return [(r.url.removeprefix(f"{W}/"), pairs(list(r.edges))) for r in page.rows]


def test_both_directions_give_distinct_neighbours_sorted_by_url(star: GraphStore) -> None:
    assert rows(star) == [
        ("a.md", [("x.md", "a.md", "")]),
        ("b.md", [("b.md", "x.md", "depends-on")]),
        ("c.md", [("c.md", "x.md", ""), ("x.md", "c.md", ""), ("x.md", "c.md", "supersedes")]),
        ("x.md", [("x.md", "x.md", "")]),
    ]
    page = star.neighborhood(doc("x"))
    assert (page.total_rows, page.remaining_rows, page.next_cursor) == (4, 0, None)


def test_incoming_only(star: GraphStore) -> None:
    assert [url for url, _ in rows(star, direction="incoming")] == ["b.md", "c.md", "x.md"]
    assert rows(star, direction="incoming")[1] == ("c.md", [("c.md", "x.md", "")])


def test_outgoing_only_keeps_the_self_loop(star: GraphStore) -> None:
    assert rows(star, direction="outgoing") == [
        ("a.md", [("x.md", "a.md", "")]),
        ("c.md", [("x.md", "c.md", ""), ("x.md", "c.md", "supersedes")]),
        ("x.md", [("x.md", "x.md", "")]),
    ]


def test_relations_filter_keeps_exact_predicates(star: GraphStore) -> None:
    assert rows(star, relations=["supersedes", "depends-on"]) == [
        ("b.md", [("b.md", "x.md", "depends-on")]),
        ("c.md", [("x.md", "c.md", "supersedes")]),
    ]


def test_the_empty_relation_selects_plain_links(star: GraphStore) -> None:
    assert rows(star, relations=[""], direction="outgoing") == [
        ("a.md", [("x.md", "a.md", "")]),
        ("c.md", [("x.md", "c.md", "")]),
        ("x.md", [("x.md", "x.md", "")]),
    ]


def test_the_page_reports_its_query(star: GraphStore) -> None:
    page = star.neighborhood("mark://w:6309/x.md#top", relations=["b", "a", "b"], page_size=1)
    assert (page.url, page.direction, page.relations) == (doc("x"), "both", ("a", "b"))
    assert (page.total_rows, page.rows) == (0, ())


def test_paging_visits_every_neighbour_exactly_once(store: GraphStore) -> None:
    put(store, "hub", *[link("hub", f"o{i:02}") for i in range(0, 25, 2)])
    for i in range(1, 25, 2):
        put(store, f"o{i:02}", link(f"o{i:02}", "hub", "cites"))
    put(store, "o04", link("o04", "hub"))
    seen: list[str] = []
    cursor = None
    remaining = []
    while True:
        page = store.neighborhood(doc("hub"), page_size=4, cursor=cursor)
        assert page.total_rows == 25
        seen += [r.url for r in page.rows]
        remaining.append(page.remaining_rows)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [doc(f"o{i:02}") for i in range(25)]
    assert remaining == [21, 17, 13, 9, 5, 1, 0]


def test_a_page_exactly_filled_has_no_next_cursor(store: GraphStore) -> None:
    put(store, "hub", link("hub", "a"), link("hub", "b"))
    page = store.neighborhood(doc("hub"), page_size=2)
    assert len(page.rows) == 2 and page.next_cursor is None and page.remaining_rows == 0


def test_a_row_keeps_twenty_edges_and_counts_the_rest(store: GraphStore) -> None:
    put(store, "x", *[link("x", "y", f"r{i:02}") for i in range(23)])
    (row,) = store.neighborhood(doc("x")).rows
    assert row == NeighborhoodRow(doc("y"), tuple(link("x", "y", f"r{i:02}") for i in range(20)), omitted_edges=3)


def test_a_node_with_a_thousand_incoming_edges(store: GraphStore) -> None:
    for i in range(1000):
        put(store, f"s{i:04}", link(f"s{i:04}", "hub", "supersedes" if i % 2 else ""))
    assert len(store.backlinks(doc("hub"))) == 1000
    page = store.neighborhood(doc("hub"), relations=["supersedes"], page_size=100)
    assert page.total_rows == 500 and page.remaining_rows == 400
    assert [r.url for r in page.rows][:2] == [doc("s0001"), doc("s0003")]
    last = store.neighborhood(doc("hub"), page_size=100, cursor=None)
    for _ in range(9):
        assert last.next_cursor is not None
        last = store.neighborhood(doc("hub"), page_size=100, cursor=last.next_cursor)
    assert last.rows[-1].url == doc("s0999") and last.next_cursor is None


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"direction": "sideways"}, "direction 'sideways' is not one of incoming, outgoing, both"),
        ({"page_size": 0}, "page_size 0 is out of range; call again with 1 to 100"),
        ({"page_size": 101}, "page_size 101 is out of range"),
        ({"relations": [str(i) for i in range(21)]}, "at most 20 are allowed"),
        ({"relations": "supersedes"}, "relations must be a list of predicates"),
    ],
    ids=["direction", "page-size-zero", "page-size-large", "too-many-relations", "bare-string"],
)
def test_bad_queries_are_bad_requests_saying_what_to_do(
    star: GraphStore, query: dict[str, object], message: str
) -> None:
    with pytest.raises(BadRequestError, match=message.replace("(", r"\(")):
        star.neighborhood(doc("x"), **query)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cursor",
    [
        "!!!",
        "bm90IGpzb24",  # base64, as cursors were once written
        "0123456789ab:",
        "0123456789AB:/a.md",
        "0123456789a:/a.md",
        "x" * 1025,
    ],
    ids=["no-identity", "old-form", "empty-after", "upper-case", "short-identity", "long"],
)
def test_a_malformed_cursor_says_to_call_again_without_one(star: GraphStore, cursor: str) -> None:
    with pytest.raises(BadRequestError, match="call again without a cursor"):
        star.neighborhood(doc("x"), cursor=cursor)


@pytest.mark.parametrize(
    "other",
    [
        {"url": doc("b")},
        {"direction": "incoming"},
        {"relations": [""]},
    ],
    ids=["other-url", "other-direction", "other-relations"],
)
def test_a_cursor_from_another_query_is_refused(star: GraphStore, other: dict[str, object]) -> None:
    first = star.neighborhood(doc("x"), page_size=1)
    assert first.next_cursor is not None
    query: dict[str, object] = {"url": doc("x"), "cursor": first.next_cursor, **other}
    url = str(query.pop("url"))
    with pytest.raises(BadRequestError, match="another query.*call again without a cursor"):
        star.neighborhood(url, **query)  # type: ignore[arg-type]


def test_a_cursor_survives_a_different_page_size_and_relation_order(star: GraphStore) -> None:
    first = star.neighborhood(doc("x"), relations=["", "supersedes"], page_size=1)
    assert first.next_cursor is not None
    rest = star.neighborhood(doc("x"), relations=["supersedes", "", ""], page_size=10, cursor=first.next_cursor)
    assert [r.url for r in first.rows + rest.rows] == [doc("a"), doc("c"), doc("x")]


def test_the_cursor_names_the_query_and_its_last_neighbour_by_path(star: GraphStore) -> None:
    cursor = star.neighborhood(doc("x"), page_size=2).next_cursor
    assert cursor is not None
    identity, _, after = cursor.partition(":")
    assert after == "/b.md" and len(identity) == 12 and int(identity, 16) >= 0


def test_a_cursor_reads_the_same_whatever_port_the_authority_listens_on() -> None:
    cursors = []
    for authority in ("mark://127.0.0.1:40001", "mark://127.0.0.1:50002"):
        graph = GraphStore(None)
        edges = [Edge(f"{authority}/x.md", f"{authority}/{name}.md", "") for name in "abc"]
        edges.append(Edge(f"{authority}/x.md", "https://example.org/page", ""))
        graph.observe(f"{authority}/x.md", title="X", version=1, edges=edges, observed_at=WHEN)
        first = graph.neighborhood(f"{authority}/x.md", page_size=2)
        assert first.next_cursor is not None
        rest = graph.neighborhood(f"{authority}/x.md", page_size=2, cursor=first.next_cursor)
        assert [r.url for r in first.rows + rest.rows] == [
            "https://example.org/page",
            f"{authority}/a.md",
            f"{authority}/b.md",
            f"{authority}/c.md",
        ]
        web = graph.neighborhood(f"{authority}/x.md", page_size=1).next_cursor
        assert web is not None and web.endswith(":https://example.org/page")
        cursors.append(first.next_cursor)
        graph.close()
    assert cursors[0] == cursors[1]


# --- invariant ----------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
RELS = st.sampled_from(["", "supersedes", "cites"])
GRAPHS = st.dictionaries(NAMES, st.lists(st.tuples(NAMES, RELS), max_size=6), max_size=5)
FILTERS = st.none() | st.lists(RELS, max_size=2)


@settings(max_examples=60, deadline=None)
@given(GRAPHS)
def test_backlinks_invert_outgoing_edges(graph: dict[str, list[tuple[str, str]]]) -> None:
    with GraphStore(None) as store:
        expected = observe_all(store, graph)
        for name in ["a", "b", "c", "d", "e"]:
            incoming = [e for e in expected if e.target == doc(name)]
            assert store.backlinks(doc(name)) == sorted(incoming, key=lambda e: (e.source, e.rel))
        for edge in expected:
            assert edge in store.outgoing(edge.source)
            assert edge in store.incoming(edge.target)


@settings(max_examples=60, deadline=None)
@given(GRAPHS, st.sampled_from(["incoming", "outgoing", "both"]), FILTERS, NAMES)
def test_paging_a_neighbourhood_yields_each_neighbour_once_with_honest_counts(
    graph: dict[str, list[tuple[str, str]]], direction: str, relations: list[str] | None, name: str
) -> None:
    with GraphStore(None) as store:
        kept = [e for e in observe_all(store, graph) if relations is None or e.rel in relations]
        center = doc(name)
        edges: dict[str, set[Edge]] = {}
        for e in kept:
            if direction != "outgoing" and e.target == center:
                edges.setdefault(e.source, set()).add(e)
            if direction != "incoming" and e.source == center:
                if not (direction == "both" and e.target == center):
                    edges.setdefault(e.target, set()).add(e)
        seen: dict[str, set[Edge]] = {}
        order: list[str] = []
        cursor = None
        while True:
            page = store.neighborhood(center, direction=direction, relations=relations, page_size=2, cursor=cursor)
            assert page.total_rows == len(edges)
            seen.update({r.url: set(r.edges) for r in page.rows})
            order += [r.url for r in page.rows]
            assert page.remaining_rows == len(edges) - len(seen)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert order == sorted(edges) and seen == edges


def observe_all(store: GraphStore, graph: dict[str, list[tuple[str, str]]]) -> set[Edge]:
    expected: set[Edge] = set()
    for source, targets in graph.items():
        edges = sorted({link(source, t, r) for t, r in targets}, key=lambda e: (e.target, e.rel))
        expected.update(edges)
        put(store, source, *edges)
    return expected
