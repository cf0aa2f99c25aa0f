"""Page properties written as `key:: value` lines (Logseq's): pure, no store."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from demarkus.importer import parse_note
from demarkus.importer.properties import _PROPERTY, drop_hidden_properties, split_properties
from demarkus.importer.wikilink import Names, WikiLinks


def test_the_lines_a_page_opens_with_are_its_fields_and_leave_the_body():
    page = (
        "title:: Segment log\n"
        "Tags:: storage, [[adr]], #raft, #[[write path]]\n"
        "alias:: SL\n"
        "Depends_On:: [[Index layout]]\n"
        "empty::\n"
        "\n\n- Segments are append-only.\n  id:: 64f0c1\n"
    )
    fields, body = split_properties(page)
    assert fields == {
        "title": "Segment log",
        "tags": ["storage", "adr", "raft", "write path"],
        "alias": ["SL"],
        "depends-on": "[[Index layout]]",
    }
    assert body == "- Segments are append-only.\n  id:: 64f0c1\n"  # a block's own property stays


def test_a_page_that_opens_with_anything_else_has_no_properties():
    for text in (
        "# T\n\ntitle:: later\n",
        "text\ntitle:: x\n",
        " title:: indented\n",
        "a b:: c\n",
        "std::vector\n",
        "",
    ):
        assert split_properties(text) == ({}, text)


def test_a_vault_note_with_properties_has_them_as_metadata_and_its_relation_resolved():
    wiki = WikiLinks(Names.of(["Index layout.md", "log.md"]), "/kb")
    raw = b"title:: Segment log\ntags:: storage, [[adr]]\nalias:: SL\ndepends-on:: [[Index layout]]\n\n- Text #raft\n"
    note = parse_note(raw, "/kb/log.md", links=(wiki,), vault=True)
    assert dict(note.metadata) == {
        "title": "Segment log",
        "tags": "storage,adr,raft",
        "alias": "SL",
        "rel-depends-on": "/kb/Index%20layout.md",
    }
    assert note.body == b"- Text #raft\n"
    plain = parse_note(raw, "/kb/log.md")  # not a vault: the lines are text
    assert plain.body == raw and "tags" not in plain.metadata


def test_a_page_of_properties_only_keeps_them_as_its_text_too():
    raw = b"type:: [[Property]]\nurl:: https://schema.org/url\n"
    note = parse_note(raw, "/kb/url.md", vault=True)
    assert dict(note.metadata) == {"type": "[[Property]]", "url": "https://schema.org/url", "title": "url"}
    assert note.body == raw


def test_a_vault_note_without_a_title_or_heading_is_titled_by_its_page_name():
    def title(path: str, vault: bool = True) -> str | None:
        return parse_note(b"- a block\n", path, vault=vault).metadata.get("title")

    assert title("/kb/pages/Whiteboard___Object.md") == "Whiteboard/Object"  # Logseq's namespace
    assert title("/kb/pages/New to Logseq%3F.md") == "New to Logseq?"
    assert title("/kb/pages/Old%2FName.md") == "Old/Name"
    assert title("/kb/pages/odd%0Aname.md") is None  # no title holds a line break: none
    assert title("/kb/pages/Plain.md", vault=False) is None  # the catalog shows the file name
    # a Logseq journal by its day, as Logseq titles it by default
    days = ["01_01 Jan 1st", "02_02 Feb 2nd", "03_03 Mar 3rd", "04_11 Apr 11th", "05_12 May 12th"]
    days += ["06_13 Jun 13th", "07_21 Jul 21st", "08_22 Aug 22nd", "09_23 Sep 23rd", "12_31 Dec 31st"]
    for day in days:
        stem, name = day.split(" ", 1)
        assert title(f"/kb/journals/2024_{stem}.md") == f"{name}, 2024"
    assert title("/kb/journals/2024_02_30.md") == "2024_02_30"  # no such day
    assert title("/kb/pages/2024_01_15.md") == "2024_01_15"  # not a journal


def test_a_vault_note_with_a_frontmatter_block_keeps_its_property_like_lines_as_text():
    raw = b"---\ntitle: T\n---\nkey:: value\n"
    note = parse_note(raw, "/kb/t.md", vault=True)
    assert dict(note.metadata) == {"title": "T"} and note.body == b"key:: value\n"


@given(st.lists(st.sampled_from(["a:: 1", "B_c:: [[x]], #y", "tags:: p", "d::", "std::v", "- text", "", " e:: 2"])))
def test_only_the_property_lines_a_page_opens_with_and_the_blank_lines_after_them_are_taken(lines: list[str]):
    text = "\n".join(lines)
    fields, body = split_properties(text)
    assert text.endswith(body)
    taken = text[: len(text) - len(body)].splitlines()
    assert all(_PROPERTY.fullmatch(line) or not line.strip() for line in taken)
    assert bool(taken) == bool(lines and _PROPERTY.fullmatch(lines[0]))
    if body and _PROPERTY.match(body):  # more property lines only after a blank line ended them
        assert any(not line.strip() for line in taken)


def test_the_block_properties_logseq_never_shows_are_left_out():
    uuid = "634fb3ee-cef0-4081-9085-c002d3be4e75"
    raw = (
        f"- Where is the config stored?\n  id:: {uuid}\n  collapsed:: true\n  type:: [[Command]]\n"
        f"\t- id:: {uuid.upper()}\n\t  a block opening with its id\n"
        "- Text\n  collapsed:: maybe\n  id:: not-a-uuid\n"
        f"```\nid:: {uuid}\n```\n"
    )
    kept = (
        "- Where is the config stored?\n  type:: [[Command]]\n"
        f"\t- id:: {uuid.upper()}\n\t  a block opening with its id\n"
        "- Text\n  collapsed:: maybe\n  id:: not-a-uuid\n"
        f"```\nid:: {uuid}\n```\n"
    )
    assert parse_note(raw.encode(), "/kb/t.md", vault=True).body.decode() == kept
    assert parse_note(raw.encode(), "/kb/t.md").body.decode() == raw  # not a vault: as written
    assert drop_hidden_properties(kept) == kept
