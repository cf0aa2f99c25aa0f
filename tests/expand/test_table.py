"""The lookup table as values: parsed back exactly as the authority wrote it, named,
compacted for a budgeted lookup."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from demarkus.expand.table import Table, TableRow
from demarkus.mcp.text import envelope
from demarkus.render import LookupRow, render_lookup
from demarkus.tokens import count_tokens

_text = st.text(alphabet=st.sampled_from(list('ab |\\#*_[]()`~›"')), max_size=12)
_rows = st.builds(
    LookupRow,
    st.lists(st.text(alphabet="ab_|#\\ .", min_size=1, max_size=6), min_size=1, max_size=3).map(
        lambda parts: "/" + "/".join(parts) + ".md"
    ),
    st.floats(0, 1),
    _text,
    st.lists(_text, max_size=3).map(tuple),
    st.sampled_from(["", "x", "step-1"]),
    _text,
    _text,
)


def _head(rows: list[LookupRow], *, body_match: bool = True, query: str = "q", scope: str = "/") -> str:
    table = render_lookup(query, scope, rows, body_match=body_match)
    return envelope("ok", {"matches": str(len(rows))}, table, keys=("matches",))


@given(st.lists(_rows, max_size=6), st.booleans(), _text)
def test_a_table_renders_back_to_the_very_text_it_was_parsed_from(rows: list[LookupRow], body_match: bool, query):
    text = _head(rows, body_match=body_match, query=query, scope='/d"o in /cs')
    table = Table.parse(text)
    assert table is not None and table.render() == text
    assert [(row.document, row.anchor) for row in table.rows] == [(row.path, row.anchor) for row in rows]


def test_naming_changes_the_scope_and_the_rows_and_nothing_else():
    rows = [LookupRow("/a_b.md", 0.8, "T", ("t",), anchor="x", heading="H", snippet="s")]
    table = Table.parse(_head(rows, scope="/docs"))
    assert table is not None
    named = table.named(lambda path: "mark://w" + path).render()
    assert '# Lookup matches for "q" in mark://w/docs\n' in named
    assert "| mark://w/a\\_b.md#x | 0.80 | T › H | t | s |\n" in named
    assert named.replace("mark://w", "") == table.render()
    assert named.startswith("status: ok\nmatches: 1\n\n")


def test_text_without_a_table_is_not_a_table():
    assert Table.parse("status: not-found\n\nno such scope\n") is None


def test_a_budgeted_table_drops_the_snippet_and_tags_columns_and_keeps_escaped_pipes():
    head = _head([LookupRow("/a|b.md", 0.8, "T | U", ("t",), anchor="x", heading="H", snippet="snip | pet")])
    table = Table.parse(head)
    assert table is not None
    compact = table.compact().render()
    assert "| Path | Importance | Title |\n|------|------------|-------|\n" in compact
    assert "| /a\\|b.md#x | 0.80 | T \\| U › H |\n" in compact
    assert "snip" not in compact and "Tags" not in compact
    assert table.compact().rows[0].location == table.rows[0].location == "/a|b.md#x"
    catalog = Table.parse(_head([LookupRow("/a.md", 0.8, "T", ("t",))], body_match=False))
    assert catalog is not None and catalog.compact() == catalog


def test_a_budgeted_table_ditto_marks_the_title_of_the_document_above():
    rows = [
        LookupRow("/a|b.md", 0.7, "T | U", ("t", "u"), anchor="x", heading="First", snippet="s"),
        LookupRow("/a|b.md", 0.7, "T | U", ("t", "u"), anchor="y", heading="Second › part", snippet="s"),
        LookupRow("/c.md", 0.5, "T | U", ("t", "u"), anchor="z", heading="Other", snippet="s"),
        LookupRow("/a|b.md", 0.7, "T | U", ("t", "u"), anchor="w", heading="Again", snippet="s"),
    ]
    head = _head(rows)
    table = Table.parse(head)
    assert table is not None
    compact = table.compact().render()
    assert compact.splitlines()[-4:] == [
        "| /a\\|b.md#x | 0.70 | T \\| U › First |",
        "| /a\\|b.md#y | 0.70 | ″ › Second › part |",  # the same document as the row above
        "| /c.md#z | 0.50 | T \\| U › Other |",  # another document: said in full
        "| /a\\|b.md#w | 0.70 | T \\| U › Again |",  # not the row above: said in full again
    ]
    assert [row.location for row in table.compact().rows] == [row.location for row in table.rows]
    assert count_tokens(compact) < count_tokens(head)


def test_a_row_knows_its_importance_and_location():
    row = TableRow("/a.md", "x", ("0.75", "T", "t"))
    assert (row.importance, row.location) == (0.75, "/a.md#x")
    assert TableRow("/a.md", "", ("high",)).importance == 0.0
