"""A heading's child blocks indented under it, as Logseq writes them: pure, no store."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from demarkus.importer import parse_note
from demarkus.importer.outliner import heading_lists
from demarkus.importer.wikilink import Names, WikiLinks
from demarkus.markdown import block_starts

PAGE = (
    "title:: Code block\n"
    "\n"
    "## Usage\n"
    "\t- Type the [[Command]] and pick a language. #editing\n"
    "\t\t- type:: [[Command]]\n"
    "\t- An example looks like:\n"
    "\t  ```clojure\n"
    "\t  (def x 1)\n"
    "\t  ```\n"
    "## Other\n"
    "text\n"
)


def test_an_outliners_children_under_a_heading_are_a_list_with_their_links_and_tags():
    wiki = WikiLinks(Names.of(["Code block.md", "Command.md"]), "/pages")
    note = parse_note(PAGE.encode(), "/pages/Code block.md", links=(wiki,), vault=True)
    assert note.body.decode() == (
        "## Usage\n"
        "- Type the [Command](Command.md) and pick a language. #editing\n"
        "\t- type:: [Command](Command.md)\n"
        "- An example looks like:\n"
        "  ```clojure\n"
        "  (def x 1)\n"
        "  ```\n"
        "## Other\n"
        "text\n"
    )
    assert note.metadata["tags"] == "editing"
    items = [note.body.index(b"- Type"), note.body.index(b"- An example")]
    assert set(items) <= set(block_starts(note.body))  # a lookup can print one item of it
    plain = parse_note(PAGE.encode(), "/pages/Code block.md", links=(wiki,))
    assert b"\t- Type the [[Command]]" in plain.body  # not read as a vault: markdown's code


def test_indented_code_that_is_no_outliners_list_stays_code():
    for text in (
        "## Example\n\n\t- a YAML list, set apart by a blank line\n",
        "## Example\n    x = 1\n    - y\n",  # opens with no list item
        "Text.\n\n    - after a paragraph\n",
        "## Fenced\n```\n\t- inside a fence\n```\n",
        "- ## In a list\n\t- a child item, already a list\n",
        "## No indent\n- a list\n",
    ):
        assert heading_lists(text) is text


def test_spaces_line_endings_and_setext_headings_are_read_alike():
    assert heading_lists("# A\r\n    - x\r\n        - y\r\n") == "# A\r\n- x\r\n    - y\r\n"
    assert heading_lists("A\n---\n\t- x\n") == "A\n---\n- x\n"
    assert heading_lists("## A\n\t\t- deep\n\t\t\t- deeper\n") == "## A\n- deep\n\t- deeper\n"
    assert heading_lists("\ufeff# A\n\t- x\n") == "\ufeff# A\n- x\n"  # a byte-order mark moves no line


_LINES = st.sampled_from(
    ["## H", "H", "---", "", "\t- item", "\t\t- child", "\t  more", "    - four", "text", "```", "\t"]
)


@given(st.lists(_LINES, max_size=12), st.sampled_from(["\n", "\r\n"]))
def test_it_only_ever_takes_indentation_off_a_line(lines: list[str], end: str):
    text = end.join(lines) + end
    out = heading_lists(text)
    before, after = text.split(end), out.split(end)
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        assert old.endswith(new) and not old[: len(old) - len(new)].strip(" \t")
