"""Wiki links made links to the notes they name: pure, no store."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from demarkus.importer import parse_note
from demarkus.importer.note import FRONTMATTER_HEAD, MAX_FILE, NoteAliases
from demarkus.importer.site import Site, Sites
from demarkus.importer.wikilink import FolderNames, Names, WikiLinks
from demarkus.markdown import extract_links

FILES = (
    "Segment log.md",
    "adr/Replicated log.md",
    "adr/0002 Replicated.md",
    "adr/Index.md",
    "Index.md",
    "people/ann.md",
    "team/Index.md",
    "archive/2019/Index.md",
    "wiki/Getting-Started.md",
)
WIKI = WikiLinks(Names.of(FILES), "/kb")


def local(body: str, path: str = "/kb/adr/a.md", wiki: WikiLinks = WIKI) -> str:
    return wiki.localize(body, path)


@pytest.mark.parametrize(
    "written, expected",
    [
        ("[[Segment log]]", "[Segment log](<../Segment log.md>)"),
        ("[[segment LOG.md]]", "[segment LOG.md](<../Segment log.md>)"),  # case and `.md` aside
        (
            "[[Replicated log#Failover and fencing]]",
            "[Replicated log#Failover and fencing](<Replicated log.md#failover-and-fencing>)",
        ),
        (
            "[[Replicated log#Setup#Keys|the keys]]",
            "[the keys](<Replicated log.md#keys>)",
        ),  # a heading's path: the last
        ("[[Replicated log#^a1b2c3]]", "[Replicated log#^a1b2c3](<Replicated log.md>)"),  # a block id is no anchor
        ("[[ann|Ann [lead]]]", "[[ann|Ann [lead]]]"),  # brackets inside: not a wiki link
        ("[[people/ann|Ann]]", "[Ann](../people/ann.md)"),
        ("[[/people/ann]]", "[/people/ann](../people/ann.md)"),
        ("[[#Context]]", "[#Context](#context)"),  # a heading of the note itself
        ("[[Index]]", "[Index](Index.md)"),  # of several, the one beside the linking note
        ("[[team/index]]", "[team/index](../team/Index.md)"),
        ("[[2019/Index]]", "[2019/Index](../archive/2019/Index.md)"),  # the end of a path
        ("| [[ann\\|Ann]] |", "| [Ann](../people/ann.md) |"),  # in a table the pipe is escaped
        ("[[Nowhere]]", "[[Nowhere]]"),  # no such note
        # a GitHub wiki: hyphens for spaces in its files' names, the text first
        ("[[Getting Started]]", "[Getting Started](../wiki/Getting-Started.md)"),
        ("[[the guide|getting started#First steps]]", "[the guide](../wiki/Getting-Started.md#first-steps)"),
        ("[[Getting Started|the guide]]", "[the guide](../wiki/Getting-Started.md)"),
        ("[[Nowhere|Elsewhere]]", "[[Nowhere|Elsewhere]]"),
        ("![[Segment log]]", "[Segment log](<../Segment log.md>)"),  # an embedded note: a link to it
        ("![[ann#Role|her role]]", "[her role](../people/ann.md#role)"),
        ("![[map.png]]", "![[map.png]]"),  # an embedded picture: no note
        ("{{embed [[Segment log]]}}", "[Segment log](<../Segment log.md>)"),  # Logseq's embed: as `![[...]]`
        ("{{embed  [[ann|Ann]] }}", "[Ann](../people/ann.md)"),
        ("{{embed [[Nowhere]]}}", "{{embed [[Nowhere]]}}"),
        ("`{{embed [[ann]]}}`", "`{{embed [[ann]]}}`"),
        ("![[map.png|300]]", "![[map.png|300]]"),
        ("[[1]](https://example.org/1)", "[[1]](https://example.org/1)"),  # a markdown link's text
        ("[see [[ann]] too](https://example.org/)", "[see [[ann]] too](https://example.org/)"),  # inside one
        ("[[ann]] and [x](y.md)", "[ann](../people/ann.md) and [x](y.md)"),  # beside one
        ("`[[Segment log]]`", "`[[Segment log]]`"),  # a code span is text
        ("[[]]", "[[]]"),
        ("[[#]]", "[[#]]"),
    ],
)
def test_a_wiki_link_to_a_note_of_the_folder_becomes_a_markdown_link(written: str, expected: str):
    assert local(f"# A\n\nSee {written} now.\n") == f"# A\n\nSee {expected} now.\n"


def test_of_several_notes_so_named_the_shortest_path_wins_then_path_order():
    assert local("[[Index]]", "/kb/people/ann.md") == "[Index](../Index.md)"
    names = Names.of(["b/x.md", "a/x.md", "c/d/x.md"])
    assert names.find("x", "e/y.md") == "a/x.md" and names.find("X.md", "c/d/z.md") == "c/d/x.md"
    assert names.find("d/x", "a/y.md") == "c/d/x.md" and names.find("e/x", "a/y.md") is None


def test_a_note_read_from_an_mdx_or_markdown_file_is_named_as_its_document():
    wiki = WikiLinks(Names.of(["guide/Setup.mdx", "blog/First post.markdown"]), "/kb")
    body = "See [[setup]], [[First post#Why|why]] and [[guide/Setup.md]].\n"
    assert wiki.localize(body, "/kb/a.md") == (
        "See [setup](guide/Setup.md), [why](<blog/First post.md#why>) and [guide/Setup.md](guide/Setup.md).\n"
    )


def test_code_and_html_blocks_stay_as_written_and_the_links_resolve():
    body = (
        "# A\r\n\r\n[[Segment log]] and [[people/ann|Ann]].\r\n\r\n"
        "```\n[[Segment log]]\n```\n\n"
        "    [[Segment log]]\n\n"
        "<div>\n[[Segment log]]\n</div>\n"
    )
    out = local(body)
    assert out.startswith("# A\r\n\r\n[Segment log](<../Segment log.md>) and [Ann](../people/ann.md).\r\n")
    assert out.count("[[Segment log]]") == 3
    assert [(link.target, link.label) for link in extract_links(out.encode(), "/kb/adr/a.md")] == [
        ("/kb/Segment log.md", "Segment log"),
        ("/kb/people/ann.md", "Ann"),
    ]


def test_a_body_without_wiki_links_is_returned_as_it_is():
    plain = "# A\n\n[b](b.md) and [x]\n"
    assert local(plain) is plain
    almost = "# A\n\n[b](b.md) and [[x] y]\r\n"
    assert local(almost) == almost


def test_a_relation_written_as_a_wiki_link_names_the_document():
    assert WIKI.document("[[Replicated log#Failover]]", "/kb/adr/a.md") == ("/kb/adr/Replicated log.md", "failover")
    assert WIKI.document(" [[ann]] ", "/kb/adr/a.md") == ("/kb/people/ann.md", "")
    assert WIKI.document("[[Nowhere]]", "/kb/adr/a.md") is None
    assert WIKI.document("[[ann]] and [[Index]]", "/kb/adr/a.md") is None
    assert WIKI.document("![[ann]]", "/kb/adr/a.md") is None
    assert WIKI.document("ann.md", "/kb/adr/a.md") is None


def test_a_note_parsed_with_wiki_links_and_a_site_has_both_made_local():
    raw = (
        b"---\nrelated: ['[[Segment log]]', '[[ann]]']\nsuperseded-by: https://example.org/adr/Index.md\n---\n"
        b"# A\n\n[[Segment log]] and [b](https://example.org/adr/b.md)\n"
    )
    site = Sites((Site("https://example.org/"),), "/kb")
    note = parse_note(raw, "/kb/adr/a.md", links=(site, WIKI))
    assert dict(note.metadata) == {
        "title": "A",
        "rel-related": "/kb/Segment%20log.md, /kb/people/ann.md",  # whitespace escaped in a rel- value
        "rel-superseded-by": "/kb/adr/Index.md",
    }
    assert note.body == b"# A\n\n[Segment log](<../Segment log.md>) and [b](b.md)\n"


def test_the_folder_names_are_read_once_and_again_from_a_listing_given():
    listed: list[list[str]] = [["a.md"]]
    names = FolderNames(lambda: listed[-1])
    assert names.current().find("a", "x.md") == "a.md"
    listed.append(["b.md"])
    assert names.current().find("b", "x.md") is None  # read once
    names.read(["b.md"])
    assert names.current().find("b", "x.md") == "b.md" and names.current().find("a", "x.md") is None


def test_a_list_item_that_is_a_typed_wiki_link_declares_a_relation():
    body = (
        "# A\n\n## Relations\n"
        "- implements [[Segment log]]\n"
        "- depends_on [[people/ann|Ann]] (she owns it)\n"
        "* Superseded By [[Replicated log#Failover]]\r\n"
        "- relates to [[Index]]\n"
        "- implements [[segment log.md]]\n"  # the same target again: once
        "- [decision] uses [[Segment log]]\n"  # an observation, not a relation
        "- implements [[Nowhere]]\n"
        "- part_of [[Index]] and [[ann]]\n"
        "- implements [[#Context]]\n"  # the note itself
        "- café [[Index]]\n"
        "- `implements [[Index]]`\n"
        "```\n- implements [[Index]]\n```\n"
        "    - implements [[ann]]\n"
    )
    assert WIKI.relations(body, "/kb/adr/a.md") == {
        "implements": [("/kb/Segment log.md", "")],
        "depends-on": [("/kb/people/ann.md", "")],
        "superseded-by": [("/kb/adr/Replicated log.md", "failover")],
        "relates-to": [("/kb/adr/Index.md", "")],
    }
    assert "- implements [Segment log](<../Segment log.md>)\n" in local(body)  # the link is made as well


def test_relations_in_the_body_join_those_of_the_frontmatter_each_once():
    raw = b"---\ndepends-on: ../people/ann.md\n---\n# A\n\n- depends_on [[ann]]\n- depends_on [[Segment log]]\n- see [[ann]]\n"
    note = parse_note(raw, "/kb/adr/a.md", links=(WIKI,))
    assert note.metadata["rel-depends-on"] == "/kb/people/ann.md, /kb/Segment%20log.md"
    assert note.metadata["rel-see"] == "/kb/people/ann.md"
    assert (
        "rel-depends-on"
        not in parse_note(raw.replace(b"depends-on: ../people/ann.md\n", b"x: y\n"), "/kb/adr/a.md").metadata
    )


NAME_CHARS = st.sampled_from(list("abcXYZ é()<>,;'&!%?_-.0\t`*"))
"""Characters of note names and link texts: anything but the brackets and the pipe, which
no wiki link's text holds."""


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.text(NAME_CHARS, min_size=1, max_size=10), min_size=1, max_size=4), st.text(NAME_CHARS, max_size=8))
def test_every_wiki_link_made_a_link_leads_to_the_note_it_names(stems: list[str], alias: str):
    files = sorted({f"dir {i}/{stem.strip()}.md" for i, stem in enumerate(stems) if stem.strip()})
    wiki = WikiLinks(Names.of(files), "/kb")
    for file in files:
        written = file[: -len(".md")].split("/")[-1]
        name = f"{written}|{alias}" if alias.strip() else written
        body = f"# A\n\nSee [[{name}]] here.\n"
        out = wiki.localize(body, "/kb/top/a.md")
        links = extract_links(out.encode(), "/kb/top/a.md")
        if out == body:  # left as written: only a name a link cannot carry
            assert any(ch in name for ch in "<>\t") or not links
            continue
        assert out.startswith("# A\n\nSee [") and out.endswith(") here.\n")
        assert [(link.target, link.fragment) for link in links] == [wiki.document(f"[[{name}]]", "/kb/top/a.md")]


def test_a_note_is_named_by_its_aliases_when_no_file_is_so_named():
    names = Names.of(
        ["adr/Segment log.md", "Log.md", "team/ann.md", "people/ann.md"],
        {"adr/Segment log.md": ["SL", "log", "a/b"], "team/ann.md": ["Lead"], "people/ann.md": ["lead"]},
    )
    assert names.find("sl", "x.md") == "adr/Segment log.md"
    assert names.find("Log", "adr/x.md") == "Log.md"  # a file so named wins over an alias
    assert names.find("a/b", "x.md") is None  # an alias is a name, not a path
    assert names.find("LEAD", "people/x.md") == "people/ann.md" and names.find("lead", "x.md") == "people/ann.md"


def test_folder_names_read_each_notes_aliases(tmp_path: Path):
    (tmp_path / "adr").mkdir()
    (tmp_path / "adr" / "Segment log.md").write_text("---\naliases: [SL, Segment]\n---\n# Segment log\n")
    (tmp_path / "glossary.md").write_text("---\nalias: terms, words\n---\n# Glossary\n")
    (tmp_path / "broken.md").write_text("---\naliases: [unclosed\n---\n# Broken\n")
    (tmp_path / "plain.md").write_text("# Plain\n")
    (tmp_path / "page.md").write_text("alias:: [[Logseq page]], LP\n\n- a block\n")  # Logseq's properties
    aliases = NoteAliases(tmp_path)
    listed = ["adr/Segment log.md", "glossary.md", "broken.md", "plain.md", "page.md", "gone.md"]
    found = FolderNames(lambda: listed, aliases).current()
    assert [found.find(name, "x.md") for name in ("sl", "segment", "Terms", "words", "unclosed", "lp")] == [
        "adr/Segment log.md",
        "adr/Segment log.md",
        "glossary.md",
        "glossary.md",
        None,
        "page.md",
    ]
    assert found.find("logseq page", "x.md") == "page.md"
    assert aliases(["plain.md", "gone.md"]) == {"plain.md": ()}


def test_a_logseq_page_is_named_by_its_namespace_and_its_title(tmp_path: Path):
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "New to Logseq%3F.md").write_text("title:: New to Logseq?\n\n- Welcome\n")
    listed = ["pages/New to Logseq%3F.md", "pages/Whiteboard___Object.md", "pages/Old%2FName.md", "pages/a___b.md"]
    names = FolderNames(lambda: listed, NoteAliases(tmp_path)).current()
    assert names.find("New to Logseq?", "pages/x.md") == "pages/New to Logseq%3F.md"  # its title
    assert names.find("Whiteboard/Object", "pages/x.md") == "pages/Whiteboard___Object.md"
    assert names.find("old/name", "pages/x.md") == "pages/Old%2FName.md"  # the older file name
    assert names.find("a/b", "x.md") == "pages/a___b.md" and names.find("a", "x.md") is None


def test_a_logseq_journal_is_named_by_its_date_as_logseq_links_it():
    names = Names.of(["journals/2024_01_15.md", "journals/2024_02_30.md", "pages/2024_03_01.md"])
    wiki = WikiLinks(names, "/kb")
    assert wiki.localize("Met on [[Jan 15th, 2024]].\n", "/kb/pages/Meeting.md") == (
        "Met on [Jan 15th, 2024](../journals/2024_01_15.md).\n"
    )
    assert names.find("2024_01_15", "pages/x.md") == "journals/2024_01_15.md"  # the file name still
    assert names.find("2024_02_30", "x.md") == "journals/2024_02_30.md"  # no such day: its file name
    assert names.find("Mar 1st, 2024", "x.md") is None  # a page named like a day is no journal


def test_aliases_are_read_again_only_when_the_file_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import demarkus.importer.note as note_module

    note = tmp_path / "a.md"
    note.write_text("---\naliases: [one]\n---\n# A\n")
    reads: list[Path] = []
    real = note_module._aliases
    monkeypatch.setattr(note_module, "_aliases", lambda file: reads.append(file) or real(file))
    aliases = NoteAliases(tmp_path)
    assert aliases(["a.md"]) == {"a.md": ("one",)} == aliases(["a.md"]) and len(reads) == 1
    note.write_text("---\naliases: [one, two]\n---\n# A\n")
    assert aliases(["a.md"]) == {"a.md": ("one", "two")} and len(reads) == 2
    assert aliases([]) == {} and aliases(["a.md"]) == {"a.md": ("one", "two")} and len(reads) == 3  # kept no longer


def test_aliases_come_from_the_head_of_a_file_of_any_size(tmp_path: Path):
    (tmp_path / "big.md").write_bytes(b"---\naliases: [Big]\n---\n# Big\n\n" + "é".encode() * (2 * MAX_FILE))
    (tmp_path / "endless.md").write_bytes(b"---\naliases: [Never]\n" + b"x: y\n" * FRONTMATTER_HEAD)
    assert NoteAliases(tmp_path)(["big.md", "endless.md"]) == {"big.md": ("Big",), "endless.md": ()}
