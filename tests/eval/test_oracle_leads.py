"""The oracle's leads from a lookup result: table rows and the frames of `expand.frames`."""

from __future__ import annotations

from demarkus.eval.oracle import Leads, OracleReader
from demarkus.eval.questions import Evidence
from demarkus.eval.scoring import Corpus

LOOKUP = """status: ok
matches: 2

| Path | Importance |
|---|---|
| /a.md#intro | 0.8 |
| /b.md | 0.5 |

>>> /b.md/v2#x

Evidence of b.

[sub-sections not shown: #x-1, #x-2]

>>> /c.md/v1 (via /b.md/v2 supersedes)

Evidence of c.
| /quoted.md | a table row inside the evidence |

>>> /b.md/v2#y: within /b.md/v2#x above
>>> /d.md/v4: same text as /b.md/v2#x above
>>> rel: /b.md/v2 supersedes /e.md, /f.md#z
>>> rel: /b.md/v2 declares 7 relations; fetch it to see them
>>> mark://elsewhere/h.md/v1

Text from another authority.

>>> note: did not fit: /g.md/v3#w (~120 tokens) +2 more
>>> note: expanded 2 of 2 rows and 1 related document; used 300 of 1500 tokens
"""


def test_a_lookup_shows_rows_blocks_stubs_relations_and_omissions_as_leads() -> None:
    leads = Leads()
    leads.absorb("mark_lookup", {"query": "q"}, LOOKUP)
    assert leads.order == ["/a.md", "/b.md", "/c.md", "/quoted.md", "/d.md", "/e.md", "/f.md", "/g.md"]
    assert leads.anchors == {
        "/a.md": {"intro"},
        "/b.md": {"x", "x-1", "x-2", "y"},
        "/c.md": set(),
        "/quoted.md": set(),
        "/d.md": set(),
        "/e.md": set(),
        "/f.md": {"z"},
        "/g.md": {"w"},
    }
    assert leads.versions == {"/b.md": {2}, "/c.md": {1}, "/d.md": {4}, "/g.md": {3}}


def test_locations_holding_spaces_or_escapes_are_leads_by_their_names() -> None:
    """A note named with spaces: its table row, its frames in angle brackets, a link in
    angle brackets or percent-escaped, a cell's escaped underscore."""
    leads = Leads()
    leads.absorb(
        "mark_lookup",
        {"query": "q"},
        "status: ok\n\n| Path | Importance |\n|---|---|\n"
        "| /pages/User configuration.md#usage | 0.5 |\n| /pages/Changelog\\_07.md | 0.5 |\n\n"
        ">>> </pages/Undo and Redo.md/v1#usage>\n\ntext\n\n"
        ">>> </pages/Undo and Redo.md/v1#faq>: within </pages/Undo and Redo.md/v1#usage> above\n"
        ">>> rel: </pages/Undo and Redo.md/v1> depends-on </pages/Key map.md>, /pages/b.md\n"
        ">>> note: did not fit: </pages/Logseq Protocol.md> (~704 tokens)\n",
    )
    leads.absorb("mark_fetch", {"url": "/pages/b.md"}, "status: ok\n\n[c](<config edn file.md>) [d](My%20d.md)\n")
    assert leads.order == [
        "/pages/User configuration.md",
        "/pages/Changelog_07.md",
        "/pages/Undo and Redo.md",
        "/pages/Key map.md",
        "/pages/b.md",
        "/pages/Logseq Protocol.md",
        "/pages/config edn file.md",
        "/pages/My d.md",
    ]
    assert leads.anchors["/pages/Undo and Redo.md"] == {"usage", "faq"}
    assert leads.versions["/pages/Undo and Redo.md"] == {1}


def test_a_stub_line_names_its_row_without_the_colon() -> None:
    """`LOC: within ... above`: the lead is LOC itself (once read with its colon, as anchor `y:`)."""
    leads = Leads()
    leads.absorb(
        "mark_lookup", {}, ">>> /b.md/v2#y: within /b.md/v2#x above\n>>> /d.md/v4: same text as /b.md/v2#x above\n"
    )
    assert leads.anchors == {"/b.md": {"y"}, "/d.md": set()}
    assert leads.versions == {"/b.md": {2}, "/d.md": {4}}


def test_a_required_document_not_yet_visible_sends_the_oracle_to_explore_what_it_saw() -> None:
    leads = Leads(follow_body_links=False)
    leads.absorb("mark_lookup", {}, LOOKUP)
    missing = [Evidence("/unseen.md", 1, "x", "the quote")]
    oracle = OracleReader(None, {})  # type: ignore[arg-type]  # `_next` reads only its arguments
    first = oracle._next(missing, leads, set(), set())
    assert first == ("mark_explore", {"url": leads.order[0]})
    assert oracle._next(missing, leads, set(), set(leads.order)) is None


def test_a_sub_section_named_as_not_shown_is_fetched_by_its_anchor() -> None:
    """A reader told which sub-sections a block left out asks for the one it needs, not
    for the whole document."""
    leads = Leads()
    leads.absorb("mark_lookup", {}, LOOKUP)
    oracle = OracleReader(None, {})  # type: ignore[arg-type]  # `_next` reads only its arguments
    missing = [Evidence("/b.md", 2, "x-2", "the quote")]
    assert oracle._next(missing, leads, set(), set()) == ("mark_fetch", {"url": "/b.md/v2#x-2"})


def test_a_name_holding_escaped_characters_is_read_as_the_world_names_it_and_passed_back_as_printed() -> None:
    """The tools print `/notes/C#.md` as `/notes/C%23.md` and Logseq's page file
    `/pages/New%3F.md` as `/pages/New%253F.md`; v0.1.0 printed the latter as it is."""
    corpus = Corpus({"/notes/C#.md": ["# C\n"], "/pages/New%3F.md": ["# New?\n"], "/b.md": ["# B\n"]})
    now = Leads(named=corpus.named)
    now.absorb("mark_lookup", {}, ">>> /notes/C%23.md/v1#usage\n\ntext\n\n>>> /pages/New%253F.md/v1\n\ntext\n")
    assert now.anchors == {"/notes/C#.md": {"usage"}, "/pages/New%3F.md": set()}
    then = Leads(named=corpus.named)
    then.absorb("mark_lookup", {}, "| Path | Importance |\n|---|---|\n| /pages/New%3F.md | 0.5 |\n")
    assert then.order == ["/pages/New%3F.md"]
    oracle = OracleReader(corpus, {})  # type: ignore[arg-type]
    missing = [Evidence("/notes/C#.md", 1, "usage", "q"), Evidence("/pages/New%3F.md", 1, "x", "q")]
    assert oracle._next(missing, now, set(), set()) == ("mark_fetch", {"url": "/notes/C%23.md/v1#usage"})
    assert oracle._next(missing[1:], now, set(), set()) == ("mark_fetch", {"url": "/pages/New%253F.md/v1"})
    assert oracle._next(missing[1:], then, set(), set()) == ("mark_fetch", {"url": "/pages/New%3F.md"})
