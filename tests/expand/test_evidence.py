"""Budgeted evidence selection: properties over generated worlds, and worked examples."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from demarkus.errors import NotFoundError, TransportError
from demarkus.expand import frames
from demarkus.expand.candidates import Candidate
from demarkus.expand.document import MAX_FETCHES, Document, Fetched
from demarkus.expand.ledger import MAX_RELATED, Action, Ledger, Tally
from demarkus.expand.page import Page
from demarkus.expand.select import Selection, expand, select_evidence, weak
from demarkus.expand.show import show_leading, show_one
from demarkus.expand.table import Table
from demarkus.mcp.text import envelope
from demarkus.render import LookupRow, render_lookup
from demarkus.tokens import count_tokens

WORDS = ["retention", "snapshot", "quorum", "lease", "audit", "restore", "hashes", "segment", "voter", "backoff"]


@dataclass(frozen=True)
class World:
    docs: dict[str, tuple[str, dict[str, str]]]

    async def fetch(self, location: str, log: list[str]) -> Fetched:
        log.append(location)
        if location.startswith("mark://"):
            raise AssertionError(f"fetched on another authority: {location}")
        if location not in self.docs:
            raise NotFoundError(f"no document at {location}")
        body, meta = self.docs[location]
        return Fetched(location, body.encode(), 3, meta)


def head_for(rows: list[tuple[str, str]], query: str = "q") -> str:
    table = render_lookup(
        query,
        "/",
        [
            LookupRow(path, 0.8, "Fixture", ("graph",), anchor=anchor, heading="H" if anchor else "", snippet="s")
            for path, anchor in rows
        ],
        body_match=True,
    )
    return envelope("ok", {"matches": str(len(rows)), "match": "body"}, table, keys=("matches", "match"))


def run(
    world: World,
    rows: list[tuple[str, str]],
    budget: int,
    query: str = "q",
    informative: tuple[int, int] | None = None,
    telling: frozenset[str] | None = None,
) -> tuple[str, Selection, list[str]]:
    log: list[str] = []
    head = head_for(rows, query)
    table = Table.parse(head)
    assert table is not None

    async def fetch(location: str) -> Fetched:
        return await world.fetch(location, log)

    selection = asyncio.run(select_evidence(head, table.rows, query, budget, fetch, informative, telling))
    return head, selection, log


# --- generated worlds -------------------------------------------------------------------


@st.composite
def worlds(draw: st.DrawFn) -> tuple[World, list[tuple[str, str]], int, str]:
    count = draw(st.integers(2, 7))
    paths = [f"/d{i}.md" for i in range(count)]
    shared = draw(st.booleans())
    docs: dict[str, tuple[str, dict[str, str]]] = {}
    anchors: dict[str, list[str]] = {}
    for i, path in enumerate(paths):
        sections = draw(st.integers(1, 4))
        parts = [f"# Doc {i}\n\nOpening of doc {i}. marker-{i}-open\n\n"]
        names = [f"doc-{i}"]
        if draw(st.integers(0, 4)) == 0:  # text before the first heading, as notes often begin
            filler = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=30)))
            parts.insert(0, f"{filler}. marker-{i}-pre\n\n")
        for j in range(sections):
            level = draw(st.integers(2, 3))
            word = draw(st.sampled_from(WORDS))
            if shared and j == 0 and i < 2:
                parts.append("## Shared\n\nThe same words in two places. marker-shared\n\n")
                names.append("shared")
                continue
            paragraphs = []
            for k in range(draw(st.integers(1, 4))):  # long sections can be cut between blocks
                filler = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=30)))
                paragraphs.append(f"{filler}. marker-{i}-{j}-{k}\n\n")
                if draw(st.integers(0, 5)) == 0:
                    paragraphs.append(f"```\n{filler}\n\n{filler}\n```\n\n")
            parts.append(f"{'#' * level} {word.title()} {j}\n\n" + "".join(paragraphs))
            names.append(f"{word}-{j}")
        if draw(st.integers(0, 3)) == 0:  # past the whole-document limit: shown by its paragraphs
            filler = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=20, max_size=30)))
            parts.append(
                "## Long\n\n" + "".join(f"{filler} {WORDS[k % len(WORDS)]}. marker-{i}-long-{k}\n\n" for k in range(50))
            )
            names.append("long")
        rels: dict[str, str] = {}
        for predicate in draw(
            st.lists(st.sampled_from(["supersedes", "depends-on", "related", "derived-from"]), max_size=2, unique=True)
        ):
            target = draw(st.sampled_from(paths + ["/missing.md", "mark://other.world/x.md"]))
            if target != path:
                rels[f"rel-{predicate}"] = target
        docs[path] = ("".join(parts), rels)
        anchors[path] = names
    if draw(st.integers(0, 3)) == 0:  # one document declares many prerequisites: the hop may reach the fetch limit
        many = [f"/p{k}.md" for k in range(draw(st.integers(4, 12)))]
        for k, target in enumerate(many):
            text = " ".join(draw(st.lists(st.sampled_from([*WORDS, "unrelated"]), min_size=1, max_size=12)))
            docs[target] = (f"# P {k}\n\n{text}. marker-p{k}\n", {})
        body, rels = docs[paths[0]]
        docs[paths[0]] = (body, rels | {"rel-depends-on": ", ".join(filter(None, [rels.get("rel-depends-on"), *many]))})
    row_paths = draw(st.lists(st.sampled_from(paths + ["/missing.md"]), min_size=1, max_size=14))
    rows = []
    for path in row_paths:
        names = anchors.get(path, ["nope"])
        anchor = draw(st.sampled_from(["", *names, "unknown-anchor"]))
        rows.append((path, anchor))
    budget = draw(st.integers(40, 4000))
    query = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
    return World(docs), rows, budget, query


FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(worlds())
def test_whole_result_stays_within_the_budget_whenever_the_table_fits(case):
    world, rows, budget, query = case
    head, selection, _ = run(world, rows, budget, query)
    if count_tokens(head) <= budget:
        assert count_tokens(head + selection.text) <= budget


@FAST
@given(worlds())
def test_no_text_is_printed_twice(case):
    world, rows, budget, query = case
    _, selection, _ = run(world, rows, budget, query)
    for marker in set(re.findall(r"marker-[\w-]+", selection.text)):
        assert selection.text.count(marker + "\n") <= 1, marker


def test_a_range_cut_after_its_leading_blocks_does_not_reprint_a_section_shown_elsewhere():
    # found by the property above: /d1.md printed cut after its leading blocks, which hold
    # its Shared section's own text but not that section's sub-section; the same text was
    # printed by /d0.md#shared before (a lead's rest prints this way)
    shared = "## Shared\n\nThe same words in two places. marker-shared\n\n"
    retention = "".join(
        f"{'#' * level} Retention {j}\n\nretention. marker-1-{j}-0\n\n```\nretention\n\nretention\n```\n\n"
        for level, j in ((3, 1), (2, 2), (2, 3))
    )
    d0 = Document.read("/d0.md", Fetched("/d0.md", ("# Doc 0\n\nOpening of doc 0.\n\n" + shared).encode(), 3, {}))
    body = "# Doc 1\n\nOpening of doc 1. marker-1-open\n\n" + shared + retention
    d1 = Document.read("/d1.md", Fetched("/d1.md", body.encode(), 3, {}))
    page = Page(Ledger("head", 120, Tally(rows=2)))
    section = d0.outline.find("shared")
    assert section is not None
    assert show_one(page, d0, Candidate("shared", section.start, section.end, "the section"), "row 1") is None
    assert show_leading(page, d1, Candidate("doc-1", 0, len(body.encode()), "the document"), "row 2")
    text = page.ledger.close()
    assert ">>> /d1.md/v3#doc-1\n" in text and "marker-1-open" in text and "marker-1-3-0" not in text
    assert text.count("marker-shared\n") == 1


def test_a_section_shown_in_two_parts_is_marked_once_where_a_wider_block_holds_it():
    # a lead printed cut after its first paragraph, then the rest of it: two ranges of one
    # section, and a block of the whole document later names that section once
    body = "# Doc\n\nOpening.\n\n## Part\n\nFirst paragraph.\n\nSecond paragraph.\n\n## After\n\nMore.\n"
    doc = Document.read("/a.md", Fetched("/a.md", body.encode(), 3, {}))
    page = Page(Ledger("head", 1000, Tally(rows=1)))
    part = doc.outline.find("part")
    assert part is not None
    middle = body.encode().index(b"Second")
    page.remember(doc, part.start, middle, doc.loc("part"))
    page.remember(doc, middle, part.end, doc.loc("part"))
    text = page.uncovered(doc, 0, len(body.encode())).text
    assert text.count("[#part shown above]") == 1
    assert "Opening." in text and "More." in text and "paragraph" not in text


@FAST
@given(worlds())
def test_a_cut_block_never_splits_a_code_fence_and_names_the_rest(case):
    world, rows, budget, query = case
    _, selection, _ = run(world, rows, budget, query)
    for block in re.split(r"(?m)^>>> ", selection.text)[1:]:
        assert block.count("```") % 2 == 0, block
        rest = re.search(r"^\[… ~(\d+) tokens more: fetch (\S+)\]$", block, re.M)
        if rest:
            assert int(rest.group(1)) > 0
            assert rest.group(2) == block.split()[0]  # the rest is in the block's own section


MARKER = re.compile(
    r"^\[(…|… ~\d+ tokens more: fetch \S+|#\S+ shown above|#\S+: same text as \S+ above|sub-sections not shown: .*)\]$"
)
OUTLINE_LINE = re.compile(r"^\s*- .* \(#[^,]+, \d+ lines\)$")


@FAST
@given(worlds())
def test_every_block_prints_only_its_own_documents_text_and_markers(case):
    world, rows, budget, query = case
    _, selection, _ = run(world, rows, budget, query)
    for block in re.split(r"(?m)^>>> ", selection.text)[1:]:
        header, _, content = block.partition("\n")
        location = header.split()[0]
        if not content.strip() or location in ("note:", "rel:"):
            continue
        body = world.docs[location.split("/v3", 1)[0]][0]
        for chunk in (c.strip("\n") for c in content.split("\n\n")):
            if not chunk or MARKER.match(chunk) or all(OUTLINE_LINE.match(line) for line in chunk.splitlines()):
                continue
            assert chunk in body, (location, chunk)


@FAST
@given(worlds())
def test_fetches_stay_on_the_authority_and_within_the_bound(case):
    world, rows, budget, query = case
    _, selection, log = run(world, rows, budget, query)
    assert len(log) <= MAX_FETCHES
    assert len(log) == len(set(log))
    assert all(not loc.startswith("mark://") for loc in log)
    assert list(selection.fetched) == log


@FAST
@given(worlds())
def test_related_documents_are_one_hop_and_at_most_three(case):
    world, rows, budget, query = case
    _, selection, log = run(world, rows, budget, query)
    assert len(selection.related) <= MAX_RELATED
    in_table = {path for path, _ in rows}
    expanded_direct = set(re.findall(r"^>>> (/d\d+\.md)/v3", selection.text, re.M)) & in_table
    for location in log:
        if location in in_table:
            continue
        parents = [
            p
            for p in expanded_direct
            if any(location in value.split(", ") for value in world.docs.get(p, ("", {}))[1].values())
        ]
        assert parents, f"{location} was fetched without an expanded table document relating to it"


@FAST
@given(worlds())
def test_output_is_deterministic(case):
    world, rows, budget, query = case
    assert run(world, rows, budget, query)[1] == run(world, rows, budget, query)[1]


@FAST
@given(worlds())
def test_the_top_row_prints_first_whenever_its_block_fits(case):
    world, rows, budget, query = case
    top_path, top_anchor = rows[0]
    if top_path not in world.docs:
        return
    head, selection, _ = run(world, rows, 100_000, query)
    frames = re.findall(r"^>>> (\S+)", selection.text, re.M)
    first_block = frames[0] if frames else ""
    if top_anchor == "unknown-anchor":
        return
    block_cost = count_tokens(selection.text.split(">>> ", 2)[1]) if frames else 0
    if count_tokens(head) + block_cost + 120 <= budget:
        _, small, _ = run(world, rows, budget, query)
        assert re.findall(r"^>>> (\S+)", small.text, re.M)[0] == first_block
        assert first_block.startswith(top_path + "/v3")


@FAST
@given(worlds())
def test_every_row_is_shown_noted_or_counted(case):
    world, rows, budget, query = case
    head, selection, _ = run(world, rows, budget, query)
    if count_tokens(head) > budget or not selection.text:
        return
    text = selection.text
    closing = re.search(r"expanded (\d+) of (\d+) rows", text)
    assert closing and int(closing.group(2)) == len(rows)
    assert int(closing.group(1)) == selection.expanded_rows
    failed = sum(1 for path, anchor in rows if path not in world.docs or anchor == "unknown-anchor")
    accounted = selection.expanded_rows + failed + selection.fetch_limited + len(selection.omitted)
    assert accounted >= len(rows)
    omitted_note = re.search(r"did not fit: (.*)", text)
    if selection.omitted:
        assert omitted_note, text
        listed = [item for item in omitted_note.group(1).split(", ") if "tokens)" in item]
        assert all(int(n) > 0 for n in re.findall(r"\(~(\d+) tokens\)", omitted_note.group(1))), text
        more = re.search(r"\+(\d+) more|(\d+) blocks?", omitted_note.group(1))
        counted = len(listed) + (int(more.group(1) or more.group(2)) if more else 0)
        assert counted == len(selection.omitted)


# --- worked examples --------------------------------------------------------------------

CHAIN = World(
    {
        "/adr/3.md": ("# ADR 3\n\nUse SQLite. It holds 2,000 jobs per second.\n", {"rel-superseded-by": "/adr/7.md"}),
        "/adr/7.md": (
            "# ADR 7\n\nUse a segment log. It holds 18,000 jobs per second.\n",
            {"rel-supersedes": "/adr/3.md", "rel-superseded-by": "/adr/12.md"},
        ),
        "/adr/12.md": ("# ADR 12\n\nReplicate the log with Raft across 3 voters.\n", {"rel-supersedes": "/adr/7.md"}),
        "/ops/restore.md": (
            "# Restore\n\n## Steps\n\nRun the quorum check first.\n",
            {"rel-depends-on": "/ops/health.md#quorum-check, mark://partner.world/spec.md"},
        ),
        "/ops/health.md": (
            "# Health\n\n## Lag\n\nLag under 1,000 entries.\n\n## Quorum check\n\nTwo of three voters must answer.\n",
            {},
        ),
    }
)


def test_a_supersession_chain_brings_in_the_successor_headed_with_its_relation():
    _, selection, log = run(CHAIN, [("/adr/7.md", "")], 1500, "segment log jobs")
    text = selection.text
    assert text.startswith("\n>>> /adr/7.md/v3#adr-7 (superseded by /adr/12.md)\n\n# ADR 7\n")
    assert ">>> rel: /adr/7.md/v3 supersedes /adr/3.md\n" in text
    assert ">>> rel: /adr/7.md/v3 superseded-by /adr/12.md\n" in text
    assert ">>> /adr/3.md/v3#adr-3 (via /adr/7.md/v3 supersedes)\n\n# ADR 3\n" in text
    assert ">>> /adr/12.md/v3#adr-12 (via /adr/7.md/v3 superseded-by)\n" in text
    assert ">>> rel: /adr/12.md/v3 supersedes /adr/7.md\n" in text
    assert log == ["/adr/7.md", "/adr/3.md", "/adr/12.md"]
    assert "expanded 1 of 1 rows and 2 related documents" in text


def test_a_stale_document_says_so_once_on_its_first_block():
    body = "# Old\n\n## Steps\n\nRestore the quorum first.\n\n## Notes\n\nThe quorum needs two voters.\n"
    tagged = World(
        {
            "/old.md": (body, {"tags": "ops, Status:Withdrawn"}),
            "/new.md": (body.replace("first", "at once"), {"status": "final"}),
        }
    )
    _, selection, _ = run(tagged, [("/old.md", "steps"), ("/old.md", "notes"), ("/new.md", "steps")], 1500, "quorum")
    headers = [line[4:] for line in selection.text.splitlines() if line.startswith(">>> /")]
    assert headers == ["/old.md/v3#steps (withdrawn)", "/old.md/v3#notes", "/new.md/v3#steps"]
    assert [b.stale for b in frames.blocks(selection.text)] == ["withdrawn", "", ""]


def test_a_stale_rows_lead_follows_its_block_before_the_next_row():
    """What made a text stale (its withdrawal notice) is read with it, not after the later
    rows: a current document's lead still waits for the leftovers."""
    old = "# Old\n\nWithdrawn in 2024: the quorum moved to the new runbook.\n\n## Steps\n\nRestore the quorum first.\n"
    new = "# New\n\nThe current runbook.\n\n## Steps\n\nRestore the quorum at once.\n"
    world = World({"/old.md": (old, {"status": "withdrawn"}), "/new.md": (new, {"status": "final"})})
    _, selection, _ = run(world, [("/old.md", "steps"), ("/new.md", "steps")], 1500, "restore quorum")
    headers = [line[4:] for line in selection.text.splitlines() if line.startswith(">>> /")]
    assert headers == ["/old.md/v3#steps (withdrawn)", "/old.md/v3#old", "/new.md/v3#steps", "/new.md/v3#new"]
    assert "Withdrawn in 2024: the quorum moved to the new runbook." in frames.blocks(selection.text)[1].text
    reasons = [d.why for d in selection.decisions if d.location == "/old.md/v3#old"]
    assert reasons == ["row 1, stale: lead, first paragraph: what it says it is"]


def test_a_related_document_without_a_titled_summary_shows_its_paragraphs_holding_the_query_terms():
    filler = "".join(f"## Detail {i}\n\n" + "Unrelated words here. " * 40 + "\n\n" for i in range(12))
    target = (
        "# EIP 9\n\n## Hard fork\n\nSpurious Dragon.\n\n"
        + filler
        + "## Specification\n\nRaise the nonce of new contracts by one.\n"
    )
    world = World({"/a.md": ("# A\n\nNonce rules.\n", {"rel-depends-on": "/b.md"}), "/b.md": (target, {})})
    _, selection, _ = run(world, [("/a.md", "")], 1500, "dragon nonce contracts")
    related = [b for b in frames.blocks(selection.text) if b.via is not None]
    assert related[0].location.anchor == "specification"


_FILLER = "".join(f"## Detail {i}\n\n" + "Unrelated words here. " * 40 + "\n\n" for i in range(12))
PREREQUISITE = World(
    {
        "/a.md": ("# A\n\nThe quorum rule of the zorbex.\n", {"rel-depends-on": "/b.md, /c.md"}),
        "/b.md": (  # too large to print whole
            "# B\n\n## Abstract\n\nA rule for every network.\n\n" + _FILLER + "## Zorbex\n\nThe zorbex keeps a log.\n",
            {},
        ),
        "/c.md": ("# C\n\n## Abstract\n\nAnother rule for the network.\n", {}),
    }
)


def test_a_related_document_shows_the_paragraphs_holding_the_querys_informative_words():
    _, selection, _ = run(PREREQUISITE, [("/a.md", "")], 1500, "quorum rule zorbex", telling=frozenset({"zorbex"}))
    related = [b for b in frames.blocks(selection.text) if b.via is not None]
    # its abstract holds "rule", no informative word: it does not lead, even with room left
    assert [(b.location.path, b.location.anchor) for b in related] == [("/b.md", "zorbex")]
    assert ">>> rel: /a.md/v3 depends-on /c.md\n" in selection.text  # /c.md holds no informative word: its line only
    assert selection.related == ("/b.md",)
    dropped = [d for d in selection.decisions if d.location == "/c.md"]
    assert [(d.action, d.tokens) for d in dropped] == [(Action.DROP, 0)]
    assert "no paragraph of it holds a query word" in dropped[0].why


def test_without_informative_words_every_query_word_chooses_a_related_documents_paragraphs():
    _, selection, _ = run(PREREQUISITE, [("/a.md", "")], 1500, "quorum rule zorbex")  # an authority without the key
    related = {(b.location.path, b.location.anchor) for b in frames.blocks(selection.text) if b.via is not None}
    assert related == {("/b.md", "zorbex"), ("/b.md", "abstract"), ("/c.md", "c")}  # "rule" counts: abstracts lead


def test_a_related_document_holding_no_query_word_prints_only_its_relation_line():
    _, selection, log = run(PREREQUISITE, [("/a.md", "")], 1500, "zorbex")
    assert "/c.md" in log and ">>> rel: /a.md/v3 depends-on /c.md\n" in selection.text
    assert ">>> /c.md" not in selection.text and selection.related == ("/b.md",)


def test_a_large_rows_sections_are_chosen_by_the_querys_informative_words():
    body = "# A\n\n## Common\n\nThe rule of the network.\n\n" + _FILLER + "## Zorbex\n\nThe zorbex keeps a log.\n"
    world = World({"/a.md": (body, {})})
    query = "rule network zorbex"
    _, told, _ = run(world, [("/a.md", "")], 1500, query, telling=frozenset({"zorbex"}))
    _, every, _ = run(world, [("/a.md", "")], 1500, query)  # without the key: every query word counts
    assert frames.blocks(told.text)[0].location.anchor == "zorbex"
    assert frames.blocks(every.text)[0].location.anchor == "common"  # two query words against one


def test_a_dependency_on_a_section_prints_that_section_and_keeps_the_cross_authority_line():
    _, selection, log = run(CHAIN, [("/ops/restore.md", "steps")], 1500, "restore quorum")
    text = selection.text
    assert (
        ">>> /ops/health.md/v3#quorum-check (via /ops/restore.md/v3 depends-on)\n\n## Quorum check\n\nTwo of three voters must answer.\n"
        in text
    )
    assert "Lag under" not in text
    assert ">>> rel: /ops/restore.md/v3 depends-on mark://partner.world/spec.md\n" in text
    assert all(not loc.startswith("mark://") for loc in log)


def test_a_related_target_already_in_the_table_is_not_fetched_twice():
    _, selection, log = run(CHAIN, [("/adr/7.md", ""), ("/adr/3.md", "")], 1500)
    # each once; /adr/12.md as soon as /adr/7.md names it, to keep room for its first block
    assert log == ["/adr/7.md", "/adr/12.md", "/adr/3.md"]
    assert "(via /adr/7.md/v3 supersedes)" not in selection.text
    assert selection.related == ("/adr/12.md",)


def test_a_fetch_that_fails_is_a_note_and_the_next_row_still_expands():
    class Flaky(World):
        async def fetch(self, location: str, log: list[str]) -> Fetched:
            if location == "/adr/3.md":
                log.append(location)
                raise TransportError("mark://demo did not answer FETCH /adr/3.md")
            return await super().fetch(location, log)

    _, selection, _ = run(Flaky(CHAIN.docs), [("/adr/3.md", ""), ("/adr/12.md", "")], 1500)
    assert selection.text.startswith(
        "\n>>> note: /adr/3.md: mark://demo did not answer FETCH /adr/3.md\n>>> /adr/12.md/v3#adr-12\n"
    )


def test_a_tight_budget_where_only_the_table_fits_says_so_with_both_numbers():
    rows = [("/adr/7.md", ""), ("/adr/3.md", "")]
    head = head_for(rows)
    table_tokens = count_tokens(head)
    _, selection, _ = run(CHAIN, rows, table_tokens - 5)
    assert selection.text.startswith(
        f"\n>>> note: the table alone is {table_tokens} tokens, over the budget of {table_tokens - 5}; raise the budget to "
    )
    assert "or fetch /adr/7.md" in selection.text


@pytest.mark.parametrize(
    "informative, is_weak",
    [
        ((1, 8), True),
        ((0, 3), True),
        ((1, 3), True),
        ((2, 8), False),
        ((1, 2), False),  # of two words, the missing one may be a synonym
        ((0, 2), False),
        ((0, 1), False),
        ((0, 0), False),
        (None, False),
    ],
)
def test_a_match_is_weak_when_its_best_row_holds_at_most_one_of_three_or_more_informative_words(
    informative: tuple[int, int] | None, is_weak: bool
):
    assert weak(informative) is is_weak


def test_a_weak_match_prints_the_table_and_one_note_and_fetches_nothing():
    rows = [("/adr/7.md", ""), ("/adr/3.md", "")]
    head, selection, log = run(CHAIN, rows, 1500, informative=(1, 8))
    assert selection.text == (
        "\n>>> note: weak match: the best row holds 1 of the query's 8 informative words; no evidence printed "
        "(the documents may not hold the answer: fetch a row to check, or ask with other words)\n"
    )
    assert log == [] and selection.fetched == ()
    assert [d.action for d in selection.decisions] == [Action.TABLE, Action.NOTE]
    assert count_tokens(head + selection.text) == sum(d.tokens for d in selection.decisions) <= 1500
    strong = run(CHAIN, rows, 1500, informative=(2, 8))[1]
    assert strong.fetched and ">>> /adr/7.md/v3" in strong.text


def test_a_weak_match_whose_note_does_not_fit_prints_the_table_alone():
    rows = [("/adr/7.md", "")]
    head = head_for(rows)
    _, selection, log = run(CHAIN, rows, count_tokens(head) + 5, informative=(0, 4))
    assert selection.text == "" and log == []
    assert [d.action for d in selection.decisions] == [Action.TABLE, Action.DROP]


def test_a_weak_match_whose_table_is_over_the_budget_says_so_as_any_table_does():
    rows = [("/adr/7.md", "")]
    head = head_for(rows)
    _, selection, _ = run(CHAIN, rows, count_tokens(head) - 5, informative=(1, 8))
    assert selection.text.startswith("\n>>> note: the table alone is ")


def test_nested_rows_coalesce_into_one_copy_of_each_byte_range():
    world = World({"/r.md": ("# R\n\n## Checks\n\nVerify.\n\n### Hashes\n\nUse sha256.\n", {})})
    _, selection, _ = run(world, [("/r.md", "hashes"), ("/r.md", "checks"), ("/r.md", "hashes")], 1500)
    text = selection.text
    assert text.count("Use sha256.") == 1
    assert ">>> /r.md/v3#checks\n\n## Checks\n\nVerify.\n\n[#hashes shown above]\n" in text
    assert ">>> /r.md/v3#hashes: within /r.md/v3#hashes above\n" in text


def test_identical_text_on_two_documents_prints_once_with_both_locations():
    body = "# Policy\n\nKeep backups for 30 days.\n"
    world = World({"/a.md": (body, {}), "/b.md": (body, {})})
    _, selection, _ = run(world, [("/a.md", ""), ("/b.md", "")], 1500)
    assert selection.text.count("Keep backups for 30 days.") == 1
    assert ">>> /b.md/v3#policy: same text as /a.md/v3#policy above\n" in selection.text


@pytest.mark.parametrize("budget", [0, -3])
def test_no_budget_means_no_expansion(budget: int):
    assert asyncio.run(expand(head_for([("/adr/7.md", "")]), "q", budget, lambda loc: CHAIN.fetch(loc, []))) == ""


def test_a_large_related_document_leads_with_its_opening_section():
    filler = "".join(f"## Detail {i}\n\n" + "Exception groups detail text. " * 40 + "\n\n" for i in range(8))
    big = "# PEP 654\n\n## Abstract\n\nThis document introduces exception groups and except star.\n\n" + filler
    world = World(
        {
            "/notes.md": ("# Notes\n\nNotes on exceptions.\n", {"rel-depends-on": "/groups.md"}),
            "/groups.md": (big, {}),
        }
    )
    _, selection, _ = run(world, [("/notes.md", "")], 1500, "exception groups")
    assert (
        ">>> /groups.md/v3#abstract (via /notes.md/v3 depends-on)\n\n## Abstract\n\nThis document introduces exception groups"
        in selection.text
    )


def test_what_is_left_shows_the_leads_of_the_documents_on_the_page():
    world = World(
        {
            "/adr/9.md": (
                "# ADR 9\n\n> Superseded by ADR 12.\n\n## Context\n\nWhy we looked again.\n\n"
                "## Abstract\n\nWe store jobs in a segment log.\n\n## Numbers\n\nIt holds 18,000 jobs per second.\n",
                {},
            ),
        }
    )
    _, selection, _ = run(world, [("/adr/9.md", "numbers")], 1500, "jobs per second")
    text = selection.text
    assert text.startswith("\n>>> /adr/9.md/v3#numbers\n")  # the row's own evidence first
    assert ">>> /adr/9.md/v3#adr-9\n\n# ADR 9\n\n> Superseded by ADR 12.\n" in text  # the banner under the title
    assert ">>> /adr/9.md/v3#abstract\n\n## Abstract\n\nWe store jobs" in text  # an abstract before the first section
    assert "Why we looked again" not in text
    assert text.index("#numbers") < text.index("#adr-9") < text.index("#abstract")


def test_a_short_lead_prints_whole_and_a_long_one_its_first_paragraph_first():
    short = "We store jobs in a segment log.\n\nOne log per queue.\n"
    long = "".join(f"Paragraph {i} on how the log is kept. " * 6 + "\n\n" for i in range(3))

    def doc(abstract: str) -> str:
        return f"# T\n\n## Abstract\n\n{abstract}\n## Numbers\n\nIt holds 18,000 jobs per second.\n"

    world = World({"/a.md": (doc(short), {}), "/b.md": (doc(long), {})})
    _, selection, _ = run(world, [("/a.md", "numbers"), ("/b.md", "numbers")], 1500, "jobs per second")
    text = selection.text
    assert ">>> /a.md/v3#abstract\n\n## Abstract\n\n" + short in text  # whole, in one frame
    assert "/a.md/v3#abstract]" not in text  # no rest to fetch, no stub pointing back
    # the long one: its first paragraph first, then the rest, joined to that block
    whys = [d.why for d in selection.decisions if d.location == "/b.md/v3#abstract"]
    assert whys == [
        "lead, first paragraph: what it says it is, cut after its leading blocks",
        "lead: what it says it is: the rest of the block above",
    ]
    assert text.count(">>> /b.md/v3#abstract") == 1 and "Paragraph 2 on how" in text


def test_a_waiting_block_prints_before_the_rest_of_a_titles_own_text():
    # the title's own text is an introduction (or a byline): its first paragraph prints
    # with the leads, its rest only after the blocks that waited, so the section the
    # search ranked for the question is not crowded out by it
    intro = "".join(
        f"Introduction paragraph {i} on how the broker keeps its queue log. " * 3 + "\n\n" for i in range(5)
    )
    numbers = "".join(f"Filler paragraph {i} about unrelated matters and more words. " * 4 + "\n\n" for i in range(8))
    numbers += "The queue log holds 18,000 jobs per second at most.\n\n"
    body = "# Broker\n\n" + intro + "## Usage\n\nStart the broker.\n\n## Numbers\n\n" + numbers
    rows = [("/a.md", "usage"), ("/a.md", "numbers")]
    head, selection, _ = run(World({"/a.md": (body, {})}), rows, 380, "queue log jobs per second")
    assert "18,000 jobs per second" in selection.text
    whys = [d.why for d in selection.decisions if d.location.startswith("/a.md/v3#")]
    assert whys == [
        "row 1: the section",
        "lead, first paragraph: what it says it is, cut after its leading blocks",
        "row 2, left over: 1 of its paragraphs holding the most query terms",
        "lead: what it says it is, cut after its leading blocks",
    ]
    assert count_tokens(head + selection.text) <= 380


def test_the_rest_of_a_lead_cut_just_before_joins_its_block():
    # the leads' first pass prints a long lead's first paragraph and names the rest; when
    # the second pass prints the rest next (a summary's rest: before the blocks that
    # waited), it extends that block instead of opening a new frame of the same section
    # that marks its first paragraph as shown above
    lead = "".join(f"Lead paragraph {i} says what the broker is. " * 3 + "\n\n" for i in range(4))
    docs = {
        "/a.md": ("# Doc\n\n## Summary\n\n" + lead + "## Quorum\n\n" + _paragraphs("quorum", 2), {}),
        "/b.md": ("# B\n\nB opening.\n\n## Quorum\n\n" + _paragraphs("quorum", 6), {}),
    }
    head, selection, _ = run(World(docs), [("/a.md", "quorum"), ("/b.md", "quorum")], 500, "quorum")
    text = selection.text
    assert text.count(">>> /a.md/v3#summary") == 1
    assert "[#summary shown above]" not in text and "fetch /a.md/v3#summary]" not in text
    (block,) = [b for b in frames.blocks(text) if str(b.location) == "/a.md/v3#summary"]
    assert all(f"Lead paragraph {i}" in block.text for i in range(4))
    assert any(d.why.endswith("the rest of the block above") for d in selection.decisions)
    assert count_tokens(head + text) <= 500


def test_a_titles_list_of_fields_is_not_a_lead():
    body = (
        "# ADR 9\n\n- Start Date: 2024-05-04\n- Discussion: #1105\n\n## Context\n\nWhy we looked again.\n\n"
        "## Abstract\n\nWe store jobs in a segment log.\n\n## Numbers\n\nIt holds 18,000 jobs per second.\n"
    )
    _, selection, _ = run(World({"/adr/9.md": (body, {})}), [("/adr/9.md", "numbers")], 1500, "jobs per second")
    assert "Start Date" not in selection.text and "#adr-9" not in selection.text
    assert ">>> /adr/9.md/v3#abstract\n\n## Abstract\n\nWe store jobs" in selection.text  # the summary still leads


def test_a_section_that_does_not_fit_whole_prints_its_best_blocks_and_where_the_rest_is():
    paragraphs = "".join(
        f"Paragraph {i} about lease renewal and heartbeats. " * 6
        + ("After a quorum loss the lease lapses. " if i in (3, 9) else "")
        + "\n\n"
        for i in range(12)
    )
    world = World({"/leases.md": ("# Leases\n\n## Renewal\n\n" + paragraphs, {})})
    head, selection, _ = run(world, [("/leases.md", "renewal")], 400, "lease renewal quorum loss")
    text = selection.text
    assert count_tokens(head + text) <= 400
    assert text.startswith("\n>>> /leases.md/v3#renewal\n\nParagraph 0 about")  # ties keep document order
    assert "Paragraph 3 about" in text and "Paragraph 9 about" in text  # the blocks holding the most query terms
    assert text.index("Paragraph 3 about") < text.index(
        "\n\n[…]\n\nParagraph 9 about"
    )  # in document order, the gap marked
    assert "Paragraph 8 about" not in text and "Paragraph 11 about" not in text
    rest = re.search(r"^\[… ~(\d+) tokens more: fetch /leases.md/v3#renewal\]$", text, re.M)
    assert rest and int(rest.group(1)) > 100
    assert "did not fit" not in text and "expanded 1 of 1 rows" in text


def test_a_large_related_document_shows_the_paragraphs_holding_the_query_terms():
    filler = "".join(
        f"## Detail {i}\n\n"
        + "Exception groups detail text. " * 40
        + "\n\n"
        + ("The star syntax handles each group member once.\n\n" if i == 5 else "")
        for i in range(8)
    )
    big = "# PEP 654\n\n## Abstract\n\nThis document introduces exception groups.\n\n" + filler
    world = World(
        {
            "/notes.md": ("# Notes\n\nNotes on exceptions.\n", {"rel-depends-on": "/groups.md"}),
            "/groups.md": (big, {}),
        }
    )
    _, selection, _ = run(world, [("/notes.md", "")], 700, "exception star syntax handles")
    text = selection.text
    assert (
        ">>> /groups.md/v3#abstract (via /notes.md/v3 depends-on)\n\n## Abstract\n\n" in text
    )  # it says what it is first
    assert (
        ">>> /groups.md/v3#detail-5 (via /notes.md/v3 depends-on)\n\n[…]\n\n"
        "The star syntax handles each group member once.\n\n>>> "
    ) in text  # the paragraph, its cut marked
    assert "## Detail" not in text


def test_every_related_target_shows_its_best_evidence_before_any_shows_more():
    def big(name: str) -> str:
        return f"# {name}\n\n" + "".join(
            f"## Part {i}\n\n" + f"{name} quorum part {i}. " * 25 + "\n\n" for i in range(12)
        )

    world = World(
        {
            "/notes.md": ("# Notes\n\nNotes.\n", {"rel-depends-on": "/a.md, /b.md"}),
            "/a.md": (big("Alpha"), {}),
            "/b.md": (big("Beta"), {}),
        }
    )
    _, selection, _ = run(world, [("/notes.md", "")], 900, "quorum")
    text = selection.text
    assert selection.related == ("/a.md", "/b.md")
    frames = re.findall(r"^>>> (/[ab]\.md)/v3#\S+ \(via", text, re.M)
    assert frames[:2] == ["/a.md", "/b.md"], frames  # one each first
    assert len(frames) > 2  # then more of each while the budget lasts


def test_a_related_section_target_is_not_widened_to_its_documents_lead():
    _, selection, _ = run(CHAIN, [("/ops/restore.md", "steps")], 3000, "restore quorum")
    assert "#quorum-check (via /ops/restore.md/v3 depends-on)" in selection.text
    assert "Lag under" not in selection.text


def test_related_fetches_past_the_fetch_limit_stay_within_the_budget():
    docs = {
        f"/d{i}.md": (f"# Doc {i}\n\n" + "quorum snapshot words. " * 30 + "\n", {"rel-depends-on": f"/r{i}.md"})
        for i in range(9)
    }
    docs |= {f"/r{i}.md": (f"# Related {i}\n\nquorum text.\n", {}) for i in range(9)}
    rows = [(f"/d{i}.md", "") for i in range(9)]
    for budget in range(300, 1500, 37):
        head, selection, log = run(World(docs), rows, budget, "quorum")
        assert len(log) <= MAX_FETCHES
        assert count_tokens(head + selection.text) <= budget, budget


def test_the_closing_keeps_room_to_count_related_documents_only_once_the_hop_has_a_target():
    # room kept for a clause the closing cannot print is lost to the evidence: on a page
    # whose documents declare no relation (most people's notes) it never counts any
    ledger = Ledger(head_for([("/a.md", "")]), 1500, Tally(rows=1))
    free = ledger.left()
    ledger.keep_related_clause()
    kept = free - ledger.left()
    clause = count_tokens(frames.closing(1, 1, MAX_RELATED, 1500, 1500)) - count_tokens(
        frames.closing(1, 1, 0, 1500, 1500)
    )
    assert kept == clause > 0
    ledger.keep_related_clause()
    assert free - ledger.left() == kept  # kept once


def test_a_page_whose_hop_has_no_target_spends_the_related_clause_on_evidence():
    # the same page, its one relation line to a document in the table (which the hop does
    # not follow) or to one outside it (a target holding no query word, which prints
    # nothing): only the second keeps room to count related documents, so the first prints
    # row 2 whole at a smaller budget
    a = "# A\n\n## Quorum\n\n" + _paragraphs("quorum", 1)
    b = "# B\n\n## Quorum\n\n" + _paragraphs("quorum", 3)
    t = ("# T\n\nUnrelated words.\n", {})
    rows = [("/a.md", "quorum"), ("/b.md", "quorum")]

    def smallest(target: str) -> tuple[int, int]:
        world = World({"/a.md": (a, {"rel-depends-on": target}), "/b.md": (b, {}), "/t.md": t})
        for budget in range(300, 600):
            head, selection, _ = run(world, rows, budget, "quorum")
            if "Quorum paragraph 2." in selection.text:
                return budget, count_tokens(head + selection.text)
        raise AssertionError("row 2 never printed whole")

    (inside, used), (outside, used_too) = smallest("/b.md"), smallest("/t.md")
    assert used == used_too and inside < outside


def test_rows_that_cannot_reach_the_fetch_limit_keep_no_room_for_its_note():
    # seven, eight or nine rows of documents declaring no relation: they fetch at most nine
    # documents, so the note on the fetch limit of ten can never print, and at the
    # smallest budget that prints every row the page leaves the same tokens unspent
    docs = {f"/d{i}.md": (f"# D{i}\n\n## Quorum\n\nQuorum words of d{i}.\n", {}) for i in range(9)}

    def unspent(count: int) -> int:
        rows = [(f"/d{i}.md", "quorum") for i in range(count)]
        for budget in range(200, 800):
            head, selection, _ = run(World(docs), rows, budget, "quorum")
            if selection.expanded_rows == count:
                return budget - count_tokens(head + selection.text)
        raise AssertionError("the rows never all printed")

    assert unspent(7) == unspent(8) == unspent(9)


def test_a_long_note_without_headings_prints_its_paragraph_holding_the_query_words():
    # past the whole-document limit a row without an anchor prints its sections holding
    # the query's words; a note with no heading has none, and its outline says nothing
    filler = "".join(f"Unrelated paragraph {i} about other matters entirely.\n\n" for i in range(200))
    world = World({"/flat.md": (filler + "The lease timeout is 9 seconds.\n\n" + filler, {})})
    _, selection, _ = run(world, [("/flat.md", "")], 1500, "lease timeout")
    assert "The lease timeout is 9 seconds." in selection.text
    assert "no headings" not in selection.text
    assert selection.text.count("[…]") == 2  # text left out before and after it


def test_a_long_chinese_note_prints_its_paragraph_holding_the_query_words():
    # no spaces between the words: the query's pairs of characters choose the paragraph
    filler = "".join(f"第{i}段讲的是别的事情，与此无关。\n\n" for i in range(300))
    world = World({"/zh.md": (filler + "数据库的索引每周重建一次。\n\n" + filler, {})})
    _, selection, _ = run(world, [("/zh.md", "")], 1500, "索引 重建")
    assert "数据库的索引每周重建一次。" in selection.text
    assert selection.text.count("[…]") == 2


def test_a_long_document_whose_preamble_alone_holds_the_query_words_prints_that_paragraph():
    filler = "".join(f"Unrelated paragraph {i} about other matters entirely.\n\n" for i in range(200))
    body = "Quorum needs three voters.\n\n# Title\n\n## Other\n\n" + filler
    _, selection, _ = run(World({"/pre.md": (body, {})}), [("/pre.md", "")], 1500, "quorum voters")
    assert selection.text.startswith("\n>>> /pre.md/v3\n\nQuorum needs three voters.\n")


def test_targets_that_print_nothing_may_reach_the_fetch_limit_and_the_page_still_fits_and_says_so():
    # a target holding no query word prints nothing and does not count towards the three
    # related documents, so the hop tries the next: one document declaring a dozen
    # prerequisites reaches the fetch limit where the rows alone could not
    targets = [f"/t{i}.md" for i in range(12)]
    docs = {"/a.md": ("# A\n\n" + _paragraphs("quorum", 2), {"rel-depends-on": ", ".join(targets)})}
    docs |= {target: (f"# T\n\nUnrelated words {target}.\n", {}) for target in targets}
    docs |= {f"/{name}.md": (f"# {name}\n\n" + _paragraphs("quorum", 40), {}) for name in ("b", "c")}
    rows = [("/a.md", ""), ("/b.md", ""), ("/c.md", "")]
    reached, said = 0, 0
    for budget in range(150, 2400, 7):
        head, selection, log = run(World(docs), rows, budget, "quorum")
        assert count_tokens(head + selection.text) <= budget, budget
        if len(log) < MAX_FETCHES:
            continue
        reached += 1
        if "fetch limit of 10 documents reached; 5 not fetched" in selection.text:
            said += 1
        else:  # the one note whose room is not kept from the start: left out only when full
            assert any(d.why == "the fetch limit's note: no room left for it" for d in selection.decisions)
    assert said >= reached * 0.9 > 0  # the room is kept from the row's turn on


def _paragraphs(word: str, count: int, size: int = 12) -> str:
    return "".join(f"{word.title()} paragraph {i}. " + f"{word} text here. " * size + "\n\n" for i in range(count))


def test_a_later_row_larger_than_its_share_waits_so_the_hop_prints():
    world = World(
        {
            "/a.md": ("# A\n\n## Decision\n\nThe quorum rule is two of three.\n", {"rel-superseded-by": "/c.md"}),
            "/b.md": ("# B\n\n## Background\n\n" + _paragraphs("quorum", 12), {}),
            "/c.md": ("# C\n\nThe quorum now needs three of five voters.\n", {}),
        }
    )
    rows = [("/a.md", "decision"), ("/b.md", "background")]
    _, alone, _ = run(world, rows, 100_000, "quorum")
    before_hop = alone.text.split(">>> /c.md")[0]  # the two rows whole, as a larger budget prints them
    budget = count_tokens(head_for(rows, "quorum")) + count_tokens(before_hop) + 60
    head, selection, _ = run(world, rows, budget, "quorum")
    text = selection.text
    assert count_tokens(head + text) <= budget
    assert ">>> /c.md/v3#c (via /a.md/v3 superseded-by)\n\n# C\n\nThe quorum now needs three of five voters.\n" in text
    assert text.index("#decision") < text.index("/c.md/v3") < text.index(">>> /b.md/v3#background")  # it waited
    assert re.search(r"^\[… ~\d+ tokens more: fetch /b.md/v3#background\]$", text, re.M)  # then its best paragraphs
    assert selection.related == ("/c.md",) and selection.expanded_rows == 2


def _row_or_hop(relations: dict[str, str]) -> Selection:
    """A top row relating to /c.md (and /d.md), a second row, and a budget just enough for
    the top row, one of the second row and /c.md's first block, and the closing notes."""
    world = World(
        {
            "/a.md": ("# A\n\n## Decision\n\nThe quorum rule is two of three.\n", relations),
            "/b.md": ("# B\n\n## Note\n\n" + _paragraphs("quorum", 1, 20), {}),
            "/c.md": ("# C\n\n" + _paragraphs("voters", 1, 20), {}),
            "/d.md": ("# D\n\n" + _paragraphs("voters", 1, 20), {}),
        }
    )
    rows = [("/a.md", "decision"), ("/b.md", "note")]
    query = "quorum voters"  # the related documents hold a query word: they have something to show
    head = head_for(rows, query)
    _, only_top, _ = run(world, rows[:1], 100_000, query)
    block = count_tokens(frames.block("/b.md/v3#note", "## Note\n\n" + _paragraphs("quorum", 1, 20)))
    top = only_top.text.split(">>> /c.md")[0].split(">>> /d.md")[0]
    budget = count_tokens(head) + 1 + count_tokens(top) + block + 60
    return run(world, rows, budget, query)[1]


@pytest.mark.parametrize(
    "relations",
    [
        {"rel-superseded-by": "/c.md"},
        {"rel-depends-on": "/c.md"},
        {"rel-depends-on": "/d.md, /c.md#c"},  # a named section is needed: its room is kept, it prints first
    ],
)
def test_a_later_row_leaves_room_for_the_first_block_of_a_known_related_target(relations):
    selection = _row_or_hop(relations)
    assert selection.related == ("/c.md",)  # the hop kept its room
    assert "did not fit: /b.md#note" in selection.text


def test_a_later_row_keeps_no_room_for_one_of_several_prerequisites():
    selection = _row_or_hop({"rel-depends-on": "/c.md, /d.md"})
    assert ">>> /b.md/v3#note\n" in selection.text and "did not fit: /b.md#note" not in selection.text
    assert selection.related == ()  # what the rows left is too little for either


def test_every_predecessor_keeps_its_room():
    selection = _row_or_hop({"rel-supersedes": "/c.md, /d.md"})
    assert selection.related and "did not fit: /b.md#note" in selection.text


def test_a_top_section_whose_sub_sections_would_crowd_the_page_prints_its_own_text_first():
    body = (
        "# A\n\n## Design\n\nThe design of quorum reads.\n\n### Reads\n\n"
        + _paragraphs("reads", 8)
        + "### Writes\n\n"
        + _paragraphs("writes", 8)
    )
    world = World(
        {
            "/a.md": (body, {"rel-depends-on": "/c.md"}),
            "/c.md": ("# C\n\nQuorum reads need a lease.\n", {}),
        }
    )
    head, selection, _ = run(world, [("/a.md", "design")], 700, "quorum reads")
    text = selection.text
    assert count_tokens(head + text) <= 700
    assert text.startswith(
        "\n>>> /a.md/v3#design\n\n## Design\n\nThe design of quorum reads.\n\n[sub-sections not shown: #reads, #writes]\n"
    )
    assert ">>> /c.md/v3#c (via /a.md/v3 depends-on)\n\n# C\n\nQuorum reads need a lease.\n" in text
    assert "Reads paragraph 0." in text  # the rest of the section, from what is left


def test_a_block_that_waited_prints_whole_when_what_is_left_holds_it():
    world = World(
        {
            "/a.md": ("# A\n\n## Decision\n\nThe quorum rule is two of three.\n", {"rel-superseded-by": "/c.md"}),
            "/b.md": ("# B\n\n## Background\n\n" + _paragraphs("quorum", 6), {}),
            "/c.md": ("# C\n\nThe quorum now needs three of five voters.\n", {}),
        }
    )
    _, selection, _ = run(world, [("/a.md", "decision"), ("/b.md", "background")], 700, "quorum")
    text = selection.text
    assert text.index("/c.md/v3") < text.index(">>> /b.md/v3#background")  # it waited
    assert ">>> /b.md/v3#background\n\n## Background\n\n" + _paragraphs("quorum", 6).strip("\n") + "\n\n>>> " in text
    assert "tokens more" not in text and "did not fit" not in text


@FAST
@given(worlds())
def test_the_spent_decisions_add_up_to_the_closing_count(case):
    world, rows, budget, query = case
    head, selection, _ = run(world, rows, budget, query)
    closing = [frame for frame in frames.parse(selection.text) if isinstance(frame, frames.Closing)]
    spent = sum(decision.tokens for decision in selection.decisions if decision.spent)
    assert selection.decisions[0].action == Action.TABLE
    if closing:
        assert spent == closing[0].used == count_tokens(head + selection.text)
        assert closing[0].used <= budget
        omitted = [d for d in selection.decisions if d.action == Action.OMIT]
        assert len(omitted) >= len(selection.omitted)
    else:  # the table leaves no room: one note (or nothing) says so
        assert [d.action for d in selection.decisions[1:]] in ([Action.NOTE], [Action.DROP])


def test_a_failure_named_by_two_rows_is_said_once():
    world = World({"/a.md": ("# A\n\nquorum text.\n", {})})
    rows = [("/gone.md", ""), ("/a.md", "nope"), ("/gone.md", "x"), ("/a.md", "nope")]
    _, selection, log = run(world, rows, 1500, "quorum")
    assert selection.text.count(">>> note: /gone.md: no document at /gone.md\n") == 1
    assert selection.text.count(">>> note: /a.md: section #nope not found\n") == 1
    assert log == ["/gone.md", "/a.md"]
    repeats = [d for d in selection.decisions if d.why.endswith("the note above says so")]
    assert [d.location for d in repeats] == ["/gone.md#x", "/a.md#nope"]


def test_a_waiting_block_whose_share_holds_none_of_its_paragraphs_prints_its_best_one_from_what_is_left():
    # Four rows wait, each larger than its allowance; what is left at the end, shared four
    # ways, holds no paragraph. The first takes its paragraph holding the most query terms
    # from what is left (as within its share), not its leading blocks in document order.
    filler = "".join(f"Filler paragraph {i}. " + "nothing to see here. " * 12 + "\n\n" for i in range(8))
    lapse = "The quorum lapse rule: " + "a lease lapses when the quorum is lost. " * 8 + "\n\n"
    docs = {"/a.md": ("# A\n\n## Decision\n\nThe quorum rule is two of three.\n", {})}
    docs["/b.md"] = ("# B\n\n## Detail\n\n" + filler + lapse + filler, {})
    for name in "cde":
        docs[f"/{name}.md"] = (f"# {name.upper()}\n\n## Detail\n\n" + _paragraphs("quorum", 12), {})
    world = World(docs)
    rows = [("/a.md", "decision")] + [(f"/{name}.md", "detail") for name in "bcde"]
    query = "quorum lapse"
    _, top_only, _ = run(world, rows[:1], 100_000, query)
    budget = count_tokens(head_for(rows, query)) + count_tokens(top_only.text) + 200
    head, selection, _ = run(world, rows, budget, query)
    text = selection.text
    assert count_tokens(head + text) <= budget
    assert ">>> /b.md/v3#detail\n\n[…]\n\nThe quorum lapse rule" in text
    assert "Filler paragraph 0" not in text
    reasons = [d.why for d in selection.decisions if d.location.startswith("/b.md")]
    assert "row 2, left over: 1 of its paragraphs holding the most query terms" in reasons
