"""Frontmatter to metadata, and one file to one note: pure, no store."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from demarkus.errors import BadRequestError
from demarkus.importer import document_path, parse_note
from demarkus.markdown import parse_relations
from demarkus.markdown.frontmatter import map_metadata, parse_frontmatter, split_frontmatter


def note(text: str, path: str = "/notes/dir/a.md") -> dict[str, str]:
    return dict(parse_note(text.encode("utf-8"), path).metadata)


def test_split_removes_the_block_and_the_blank_lines_after_it():
    parts = split_frontmatter("\ufeff---\ntitle: A\n---\n\n\n# A\n\nbody\n")
    assert parts.block == "title: A\n" and parts.body == "# A\n\nbody\n"
    assert split_frontmatter("---\r\ntitle: A\r\n...\r\nbody\r\n").body == "body\r\n"
    assert split_frontmatter("# no block\n---\n").block is None
    assert split_frontmatter("---\n---\nbody").block == ""


def test_an_unclosed_block_is_refused_with_the_fix():
    with pytest.raises(BadRequestError, match="never closes it; add a closing `---`"):
        split_frontmatter("---\ntitle: A\n# A\n")


def test_values_stay_text_as_written():
    assert parse_frontmatter("date: 2026-01-31\ndraft: yes\nn: 010\n") == {
        "date": "2026-01-31",
        "draft": "yes",
        "n": "010",
    }


@pytest.mark.parametrize(
    "block, fragment",
    [
        ("title: [open\n", "not valid YAML at line 3 of the file"),
        ("- a\n- b\n", "must be `key: value` lines"),
        ("a: b: c\n", "not valid YAML"),
    ],
)
def test_bad_yaml_is_refused(block: str, fragment: str):
    with pytest.raises(BadRequestError, match=fragment):
        parse_frontmatter(block)


def test_a_toml_block_between_plus_lines_is_read_as_hugo_writes_it():
    parts = split_frontmatter('+++\ntitle = "A"\n+++\n\nbody\n')
    assert (parts.block, parts.body, parts.toml) == ('title = "A"\n', "body\n", True)
    meta = note(
        '+++\ntitle = "Segment log"\ndate = 2024-01-31\ntags = ["storage", "adr"]\ndraft = false\n'
        'weight = 5\nsupersedes = "../old.md"\n+++\n\ntext\n'
    )
    assert meta == {
        "title": "Segment log",
        "date": "2024-01-31",
        "tags": "storage,adr",
        "draft": "false",
        "weight": "5",
        "rel-supersedes": "/notes/old.md",
    }
    with pytest.raises(BadRequestError, match="never closes it; add a closing `\\+\\+\\+`"):
        split_frontmatter('+++\ntitle = "A"\n# A\n')
    with pytest.raises(BadRequestError, match="not valid TOML"):
        parse_frontmatter("title = \n", toml=True)
    assert split_frontmatter("+++ b/file.py\n").block is None  # a diff's header line, not a block


def test_tags_as_a_list_or_a_comma_string_are_stored_comma_joined():
    assert note("---\ntags: [a, b c]\n---\nx\n")["tags"] == "a,b c"
    assert note("---\ntags:\n  - a\n  - b\n---\nx\n")["tags"] == "a,b"
    assert note("---\ntags: 'a, b ,,c'\n---\nx\n")["tags"] == "a,b,c"


def test_every_relation_alias_and_rel_key_as_string_or_list_resolves_relative_files():
    meta = note(
        "---\n"
        "supersedes: old.md\n"
        "superseded-by: [../next.md]\n"
        "depends-on: b.md, sub/c.md#api\n"
        "implements: /spec/x.md\n"
        "derived-from: mark://other.world/y.md\n"
        "related: [b.md, 'https://example.org/z']\n"
        "rel-cites: [../../top.md]\n"
        "rel-depends-on: b.md\n"
        "---\n# Title\n"
    )
    assert meta == {
        "title": "Title",
        "rel-supersedes": "/notes/dir/old.md",
        "rel-superseded-by": "/notes/next.md",
        "rel-depends-on": "/notes/dir/b.md, /notes/dir/sub/c.md#api",
        "rel-implements": "/spec/x.md",
        "rel-derived-from": "mark://other.world/y.md",
        "rel-related": "/notes/dir/b.md, https://example.org/z",
        "rel-cites": "/top.md",
    }


@given(st.text(alphabet=st.sampled_from("ab é,%#?_-"), min_size=1, max_size=12))
def test_a_relation_to_a_file_whose_name_needs_escapes_names_that_file_when_read(stem: str):
    name = stem.strip() or "x"
    reference = quote(name) + ".md"
    meta = note(f"---\ndepends-on: '{reference}'\n---\n# A\n", "/notes/dir/self.md")
    relations, rejected = parse_relations(meta, "/notes/dir/self.md")
    assert rejected == [] and [r.target for r in relations] == [f"/notes/dir/{name}.md"]


def test_a_title_comes_from_the_frontmatter_else_the_first_h1_outside_code():
    assert note("---\ntitle: Given\n---\n# Heading\n")["title"] == "Given"
    assert note("```\n# not a heading\n```\n\n## Two\n\n# One\n")["title"] == "One"
    assert "title" not in note("no heading\n")
    # as a documentation site shows it: without the id the heading gives itself
    assert note("# 组件实例 {#component-instance}\n")["title"] == "组件实例"
    assert note("# {#only-an-id}\n")["title"] == "{#only-an-id}"
    # a `# ` bullet is one of an outliner page's blocks (it is a section), not the page's title
    assert "title" not in note("- # Big bullet\n\t- text\n")
    assert note("- # Big bullet\n\n# Page\n")["title"] == "Page"


def test_other_scalar_keys_are_kept_and_lists_joined():
    assert note("---\nowner: ops\naliases: [x, y]\nempty:\n---\nbody\n") == {"owner": "ops", "aliases": "x, y"}


def test_keys_an_editor_spells_its_own_way_are_metadata_keys_and_the_rest_left_out():
    """`created_at`, `Due Date` and `Title` as the metadata rules spell them, a value over
    several lines on one line, a status as a tag; a key nothing spells, or one the server
    sets, left out (and named) rather than the note refused."""
    text = (
        "---\ncreated_at: 2024-01-02\nDue Date: tomorrow\nTitle: A\nstatus: draft, review\n"
        "modified: 2024-02-03\n作者: me\ndescription: |\n  two\n  lines\n---\nx\n"
    )
    parsed = parse_note(text.encode("utf-8"), "/a.md")
    assert dict(parsed.metadata) == {
        "created-at": "2024-01-02",
        "due-date": "tomorrow",
        "title": "A",
        "description": "two lines",
        "tags": "status:draft,status:review",
    }
    assert parsed.keys_unspelled == ("作者",) and parsed.keys_taken == ("modified",)
    assert parsed.keys_left_out == ("作者", "modified")
    assert parse_note(b"---\ntitle: A\nTitle: B\n---\nx\n", "/a.md").keys_taken == ("Title",)
    nested = parse_note(b"---\nowner: {team: ops}\ntags: [[a]]\nauthors:\n  - name: A\nyear: 2020\n---\nx\n", "/a.md")
    assert dict(nested.metadata) == {"year": "2020"} and nested.keys_nested == ("authors", "owner", "tags")


def test_frontmatter_over_the_metadata_limits_gives_up_its_longest_values_not_the_note():
    text = "---\ntitle: Paper\nabstract: " + "x" * 1500 + "\nyear: 2020\nrel-supersedes: old.md\n---\nx\n"
    parsed = parse_note(text.encode("utf-8"), "/a.md")
    assert dict(parsed.metadata) == {"title": "Paper", "year": "2020", "rel-supersedes": "/old.md"}
    assert parsed.keys_left_out == ("abstract",)
    many = "".join(f"k{n}: v\n" for n in range(60))
    crowded = parse_note(f"---\ntitle: T\n{many}---\nx\n".encode(), "/a.md")
    assert len(crowded.metadata) == 50 and crowded.metadata["title"] == "T" and len(crowded.keys_left_out) == 11


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("---\ntitle: A\n---\n\n", "no text besides its frontmatter"),
        ("---\nrel-related: " + ", ".join(f"n{n}.md" for n in range(300)) + "\n---\nx\n", "at most 1024 bytes"),
    ],
)
def test_metadata_the_rules_refuse_is_refused_with_a_reason(text: str, fragment: str):
    with pytest.raises(BadRequestError, match=fragment):
        note(text)


def test_bytes_that_are_not_utf8_or_too_many_are_refused():
    with pytest.raises(BadRequestError, match=r"not valid UTF-8 \(byte 3\)"):
        parse_note(b"caf\xe9\n", "/a.md")
    with pytest.raises(BadRequestError, match="at most 1048576"):
        parse_note(b"x" * (1024 * 1024 + 1), "/a.md")


@pytest.mark.parametrize(
    "relative, fragment",
    [
        ("versions/a.md", "reserved for version history"),
        (".hidden.md", "hidden names"),
        ("a\x01b.md", "control character"),
        ("caf\udce9.md", "not valid UTF-8"),
        ("x" * 201 + ".md", "longer than 200 bytes"),
    ],
)
def test_file_names_that_cannot_be_document_paths_are_refused(relative: str, fragment: str):
    with pytest.raises(BadRequestError, match=fragment):
        document_path(relative, "/notes")


def test_document_paths_go_under_the_prefix():
    assert document_path("a/b.md", "/notes/") == "/notes/a/b.md"
    assert document_path("b.md", "/") == "/b.md"


def test_map_metadata_merges_an_alias_with_its_rel_key_once():
    assert map_metadata({"supersedes": "a.md", "rel-supersedes": ["a.md", "b.md"]}, lambda r: r) == (
        {"rel-supersedes": "a.md, b.md"},
        (),
    )


@given(st.text())
def test_text_without_an_opening_block_is_its_own_body(text: str):
    text = text.lstrip("\ufeff")
    if text.startswith("---"):
        text = "x" + text
    parts = split_frontmatter(text)
    assert parts.block is None and parts.body == text


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12).filter(
    lambda w: not w.startswith("-")
)


@given(st.lists(_WORD, min_size=1, max_size=6), st.booleans())
def test_tags_read_back_in_order_whichever_shape_they_were_written_in(tags: list[str], as_list: bool):
    written = "[" + ", ".join(f'"{t}"' for t in tags) + "]" if as_list else '"' + ", ".join(tags) + '"'
    assert note(f"---\ntags: {written}\n---\nbody\n")["tags"] == ",".join(tags)
