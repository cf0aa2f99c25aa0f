"""Block ids and the references to them (Logseq's `((id))`, Obsidian's `[[note#^id]]`):
pure, no store, but for one import of a folder."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from demarkus.importer.blockref import LABEL_CHARS, NEAR_LINES, Block, drop_block_ids, find_blocks
from demarkus.importer.note import NoteBlocks
from demarkus.importer.wikilink import FolderNames, Names, WikiLinks

from .test_folder import run, tool_texts

ID = "634fb3ee-cef0-4081-9085-c002d3be4e75"
OTHER = "11111111-2222-3333-4444-555555555555"
FORMAT = (
    f"id:: {OTHER.upper()}\n"  # among the page's properties: a block with no line of its own
    "\n"
    "## Functionality\n"
    "- **Where is the [[config edn file|config]] stored?**\n"
    "  It is a per-graph setting.\n"
    f"  id:: {ID}\n"
    "  collapsed:: true\n"
    "\t- `:file/name-format`\n"
    "- ## FAQ\n"
    "  id:: 22222222-2222-3333-4444-555555555555\n"
    "\t- id:: 33333333-2222-3333-4444-555555555555\n"  # a block that opens with its id
    "\t  8. Tasks tagged with the current page\n"
    "\t  #+BEGIN_QUERY\n"
)


def test_a_logseq_block_id_leads_to_its_section_and_its_first_line():
    assert find_blocks(FORMAT) == {
        OTHER: Block("", ""),
        ID: Block("functionality", "**Where is the config stored?**"),
        "22222222-2222-3333-4444-555555555555": Block("faq", "FAQ"),
        "33333333-2222-3333-4444-555555555555": Block("faq", "Tasks tagged with the current page"),
    }


def test_an_obsidian_block_id_ends_its_line_or_follows_its_block():
    body = (
        "Intro ^top\n\n## Usage\n\nA line of text. ^Para-1\n\n| a | b |\n|---|---|\n\n^tbl\n\n## Later\n\nx ^para-1\n"
    )
    assert find_blocks(body) == {
        "top": Block("", "Intro"),
        "para-1": Block("usage", "A line of text."),  # the first of two alike
        "tbl": Block("usage", "| a | b |"),  # the table's first line
    }


def test_an_obsidian_block_id_may_follow_an_embed_without_a_space():
    body = "## Sync\n\n![[version-history.png]]^history-image\n\nSee [[Plans]]^plans\n"
    assert find_blocks(body) == {
        "history-image": Block("sync", "version-history.png"),  # the embed's name, no `!`
        "plans": Block("sync", "See Plans"),
    }


def test_obsidian_block_ids_are_left_out_of_the_text_but_not_out_of_code():
    body = (
        "A line of text. ^para-1\n\n- item\n\n^list\n\n![[chart.png]]^chart\r\n\n"
        "```\nx ^kept\n```\n\n2^10 and `code ^id`\n"
    )
    assert drop_block_ids(body) == (
        "A line of text.\n\n- item\n\n\n![[chart.png]]\r\n\n```\nx ^kept\n```\n\n2^10 and `code ^id`\n"
    )
    assert drop_block_ids("no ids here\n") == "no ids here\n"


def test_a_blocks_first_line_is_looked_for_near_its_id_only():
    near = "- First line\n" + "  key:: value\n" * (NEAR_LINES - 1) + f"  id:: {ID}\n"
    far = "- First line\n" + "  key:: value\n" * NEAR_LINES + f"  id:: {ID}\n"
    assert find_blocks(near)[ID].label == "First line"
    assert find_blocks(far)[ID].label == ""  # each id walks a bounded way: linear in the note


def test_text_without_an_id_declares_no_block():
    for body in ("# T\n\nx^2 and 2^10\n", "a ^ b\n", "id:: not-a-uuid\n", "- id::" + ID + "\n", "[x](y)^2\n", ""):
        assert find_blocks(body) == {}


@given(st.text(alphabet="ab -#*[]|\t", max_size=3 * LABEL_CHARS))
def test_a_label_is_one_short_line(line: str):
    label = find_blocks(f"- {line}\n  id:: {ID}\n")[ID].label
    assert "\n" not in label and len(label) <= LABEL_CHARS + 1 and label == label.strip()


NAMES = Names.of(
    ["pages/Filename format.md", "pages/Usage.md", "b.md"],
    blocks={"pages/Filename format.md": find_blocks(FORMAT), "b.md": find_blocks("# B\n\n## Usage\n\nLine ^x1\n")},
)
WIKI = WikiLinks(NAMES, "/kb")


def test_a_block_reference_becomes_a_link_to_the_section_holding_it():
    text = (
        f"See (({ID.upper()})), [redo it]((({ID}))), {{{{embed (({ID})) }}}} and (({OTHER})).\n"
        f"Unknown ((00000000-0000-0000-0000-000000000000)), in code `(({ID}))`.\n"
        f"```\n(({ID}))\n```\n"
    )
    link = "<Filename format.md#functionality>"
    assert WIKI.localize(text, "/kb/pages/Usage.md") == (
        f"See [**Where is the config stored?**]({link}), [redo it]({link}), "
        f"[**Where is the config stored?**]({link}) and [Filename format](<Filename format.md>).\n"
        f"Unknown ((00000000-0000-0000-0000-000000000000)), in code `(({ID}))`.\n"
        f"```\n(({ID}))\n```\n"
    )
    assert WIKI.localize(f"Above: (({ID}))\n", "/kb/pages/Filename format.md") == (
        "Above: [**Where is the config stored?**](#functionality)\n"
    )


def test_an_id_two_notes_declare_leads_to_the_one_with_the_shortest_path():
    declared = {"b/copy.md": find_blocks(f"# Copy\n\n- x\n  id:: {ID}\n"), "a.md": find_blocks(FORMAT)}
    names = Names.of(["b/copy.md", "a.md"], blocks=declared)
    assert names.owners[ID] == "a.md"
    assert WikiLinks(names, "/kb").localize(f"(({ID}))\n", "/kb/b/copy.md") == (
        "[**Where is the config stored?**](../a.md#functionality)\n"
    )


def test_an_obsidian_block_link_leads_to_the_section_holding_the_block():
    assert WIKI.localize("[[b#^x1]], [[b#^X1|the line]], [[b#^nope]], ![[b#^x1]]\n", "/kb/a.md") == (
        "[b#^x1](b.md#usage), [the line](b.md#usage), [b#^nope](b.md), [Line](b.md#usage)\n"
    )  # an embedded block shows its text in place: its first line is the link's text


def test_an_import_writes_a_graphs_block_references_as_links(tmp_path: Path):
    graph = tmp_path / "graph"
    (graph / "pages").mkdir(parents=True)
    (graph / "pages" / "Filename format.md").write_text(FORMAT)
    (graph / "pages" / "Re-index.md").write_text(f"- Check the setting first: (({ID}))\n")
    root = tmp_path / "store"
    run(graph, root, wikilinks=True)
    page, target = asyncio.run(
        tool_texts(
            root,
            [("mark_fetch", {"url": "/kb/pages/Re-index.md"}), ("mark_fetch", {"url": "/kb/pages/Filename format.md"})],
        )
    )
    assert "- Check the setting first: [**Where is the config stored?**](<Filename format.md#functionality>)" in page
    assert f"id:: {ID}" not in target and "Where is the" in target  # the id is the file's, not the reader's
    blocks = NoteBlocks(graph)
    names = FolderNames(lambda: ["pages/Filename format.md", "pages/Re-index.md"], None, blocks).current()
    assert names.owners[ID] == "pages/Filename format.md"
    (graph / "pages" / "Filename format.md").write_text("# Moved away\n")
    assert blocks(["pages/Filename format.md"]) == {"pages/Filename format.md": {}}  # read again once changed
