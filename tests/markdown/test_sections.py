"""Sections: headings, anchors, exact byte ranges, outline text, opening paragraph."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from demarkus.errors import BadRequestError
from demarkus.markdown import (
    Outline,
    Section,
    block_starts,
    opening_paragraph,
    outline_text,
    parse_blocks,
    parse_outline,
    slugify,
)
from demarkus.markdown.frontmatter import first_heading
from demarkus.markdown.sections import shown_title


def titles(body: str) -> list[tuple[int, str]]:
    return [(s.level, s.title) for s in parse_outline(body.encode()).sections]


def anchors(body: str) -> list[str]:
    return [s.anchor for s in parse_outline(body.encode()).sections]


# --- which headings count --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("# One\n## Two\n###### Six\n", [(1, "One"), (2, "Two"), (6, "Six")]),
        ("####### seven hashes\n", []),
        ("#no-space\n", []),
        ("   ### indented three ###   \n", [(3, "indented three")]),
        ("Title\n=====\n\nSub\n---\n", [(1, "Title"), (2, "Sub")]),
        ("Two line\nsetext\n===\n", [(1, "Two line setext")]),
        ("```\n# fenced\n```\n~~~md\n## tilde\n~~~\n", []),
        ("    # indented code\n", []),
        ("- # in a list\n1. ## in an ordered list\n", [(1, "in a list"), (2, "in an ordered list")]),
        ("> # in a quote\n", []),
        ("<div>\n# in html\n</div>\n", []),
        ("#\n\n# #\n\n##   ##\n\nreal\n===\n", [(1, "real")]),
        ("# <br>\n# ![](x.png)\n", []),
        ("para\n# interrupts\nmore\n", [(1, "interrupts")]),
    ],
    ids=[
        "atx-levels",
        "seven-hashes-is-text",
        "atx-needs-space",
        "atx-indent-and-closing-hashes",
        "setext-both-levels",
        "setext-multi-line-joined-by-space",
        "fenced-code",
        "indented-code",
        "lists",
        "blockquote",
        "html-block",
        "empty-headings-ignored",
        "headings-with-only-markup-ignored",
        "heading-interrupts-paragraph",
    ],
)
def test_atx_and_setext_headings_at_top_level_or_in_list_items_become_sections(
    body: str, expected: list[tuple[int, str]]
) -> None:
    assert titles(body) == expected


@pytest.mark.parametrize(
    ("heading", "title"),
    [
        ("# Foo *bar* __baz__", "Foo bar baz"),
        ("# Use `mark_fetch` now", "Use mark_fetch now"),
        ("# See [the spec](spec.md)", "See the spec"),
        ("# Logo ![the *logo*](l.png)", "Logo the logo"),
        ("# Raw <em>html</em>", "Raw html"),
        ("# Fish &amp; chips", "Fish & chips"),
        ("# Escaped \\*stars\\*", "Escaped *stars*"),
    ],
    ids=["emphasis", "code-span", "link", "image-alt", "inline-html", "entity", "escapes"],
)
def test_heading_title_is_the_text_with_inline_markup_stripped(heading: str, title: str) -> None:
    assert titles(heading + "\n") == [(1, title)]


# --- anchors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("Problem Statement", "problem-statement"),
        ("API: v2 (draft)", "api-v2-draft"),
        ("snake_case and kebab-case", "snake_case-and-kebab-case"),
        ("Two  spaces\tand tab", "two--spaces-and-tab"),
        ("Ünïcödé Straße", "ünïcödé-straße"),
        ("日本語の見出し", "日本語の見出し"),
        ("Roman Ⅻ and ½", "roman-ⅻ-and-½"),
        ("Emoji 🎉 party", "emoji--party"),
        ("C++ & C#", "c--c"),
        ("!!!", ""),
    ],
    ids=[
        "words",
        "punctuation-dropped",
        "underscore-and-hyphen-kept",
        "each-whitespace-char-is-a-hyphen",
        "unicode-letters-kept",
        "cjk",
        "unicode-numbers-kept",
        "emoji-dropped",
        "symbols-dropped",
        "nothing-left",
    ],
)
def test_slugify_follows_the_github_rule(text: str, slug: str) -> None:
    assert slugify(text) == slug


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("# Notes\n# Notes\n# Notes\n", ["notes", "notes-1", "notes-2"]),
        ("# Notes\n# Notes\n# Notes-1\n", ["notes", "notes-1", "notes-1-1"]),
        ("# Notes-1\n# Notes\n# Notes\n", ["notes-1", "notes", "notes-2"]),
        ("# NOTES\n## notes\n", ["notes", "notes-1"]),
        ("# !!!\n# 🎉\n# Section\n", ["section", "section-1", "section-2"]),
    ],
    ids=[
        "repeats-numbered",
        "generated-suffix-counts-as-taken",
        "written-suffix-counts-as-taken",
        "case-insensitive-repeat",
        "empty-slug-becomes-section",
    ],
)
def test_repeated_anchors_get_numbered_suffixes_in_document_order(body: str, expected: list[str]) -> None:
    assert anchors(body) == expected


def test_thousands_of_repeated_headings_get_consecutive_suffixes() -> None:
    got = anchors("# Notes\n" * 3000)
    assert got == ["notes"] + [f"notes-{i}" for i in range(1, 3000)]


# --- byte ranges ----------------------------------------------------------------------------


def test_sections_carry_exact_byte_ranges_lines_and_parents() -> None:
    body = (
        "Preface é\r\n"  # 12 bytes: é is two
        "\r\n"  # 14
        "# Über\r\n"  # 23
        "text\n"  # 28
        "### Deep\r"  # 37
        "x\n"  # 39
        "\n"  # 40
        "Setext two\n"  # 51
        "----------\n"  # 62
        "# Last"  # 68, no final line ending
    ).encode()
    outline = parse_outline(body)
    assert outline.sections == (
        Section("über", "Über", 1, 14, 62, 23, 28, 7, None),
        Section("deep", "Deep", 3, 28, 40, 37, 40, 3, "über"),
        Section("setext-two", "Setext two", 2, 40, 62, 62, 62, 2, "über"),
        Section("last", "Last", 1, 62, 68, 68, 68, 1, None),
    )
    assert outline.preamble == "Preface é\r\n\r\n".encode()
    assert outline.text(outline.sections[0]) == body[14:62]
    assert outline.own_text(outline.sections[0]) == "# Über\r\ntext\n".encode()


@pytest.mark.parametrize(
    ("body", "lines"),
    [
        (b"# A\n", [1]),
        (b"# A", [1]),
        (b"# A\n\n", [2]),
        (b"# A\r\nb\r\n# B\rc", [2, 2]),
        (b"# A\nx\x0by\x0cz\xc2\x85w\xe2\x80\xa8v\n", [2]),
    ],
    ids=["one-line", "no-final-newline", "blank-line", "crlf-and-lone-cr", "not-splitlines"],
)
def test_lines_count_commonmark_line_endings_only(body: bytes, lines: list[int]) -> None:
    assert [s.lines for s in parse_outline(body).sections] == lines


def test_a_heading_under_a_skipped_level_takes_the_nearest_higher_heading_as_parent() -> None:
    outline = parse_outline(b"# A\n### C\n## B\n#### D\n# E\n")
    assert [(s.anchor, s.parent) for s in outline.sections] == [
        ("a", None),
        ("c", "a"),
        ("b", "a"),
        ("d", "b"),
        ("e", None),
    ]
    assert [s.end for s in outline.sections] == [22, 10, 22, 22, 26]


def test_empty_headings_stay_inside_the_section_before_them() -> None:
    body = b"# A\n#\ntext\n# B\n"
    a, b = parse_outline(body).sections
    assert (a.start, a.own_end, a.end, b.start) == (0, 11, 11, 11)


def test_a_document_without_headings_is_all_preamble() -> None:
    outline = parse_outline(b"just text\n")
    assert outline.sections == ()
    assert outline.preamble == b"just text\n"


def test_a_byte_order_mark_does_not_hide_the_first_heading() -> None:
    body = "\ufeff# Title\n\nIntro.\n\n## Part\n\nText.\n".encode()
    outline = parse_outline(body)
    assert [(s.level, s.anchor, s.start) for s in outline.sections] == [
        (1, "title", 0),
        (2, "part", body.index(b"## Part")),
    ]
    assert outline.preamble == b""
    assert list(block_starts(body)) == [0, body.index(b"Intro."), body.index(b"## Part"), body.index(b"Text.")]


def test_yaml_front_matter_is_preamble_not_a_heading() -> None:
    body = b"---\ntitle: Segment log\ntags: a, b\n---\n\n# Segment log\n\nText.\n"
    outline = parse_outline(body)
    assert [(s.level, s.anchor, s.start) for s in outline.sections] == [(1, "segment-log", body.index(b"# Segment"))]
    assert outline.preamble == b"---\ntitle: Segment log\ntags: a, b\n---\n\n"
    # an opening rule that is never closed is not front matter
    assert titles("---\n# Intro\n\nText.\n") == [(1, "Intro")]


def test_a_body_that_is_not_utf8_is_a_bad_request() -> None:
    with pytest.raises(BadRequestError, match="UTF-8"):
        parse_outline(b"# caf\xe9\n")


# --- find -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "anchor"),
    [
        ("problem-statement", "problem-statement"),
        ("#problem-statement", "problem-statement"),
        ("#Problem-Statement", "problem-statement"),
        ("Problem Statement", "problem-statement"),
        ("  notes-1 ", "notes-1"),
        ("Notes", "notes"),
        ("section", "section"),
        ("missing", None),
        ("", None),
    ],
    ids=[
        "exact",
        "leading-hash",
        "case-insensitive",
        "slug-fallback",
        "surrounding-space",
        "text-finds-first-of-repeats",
        "empty-slug-anchor",
        "unknown",
        "empty",
    ],
)
def test_find_accepts_anchor_with_or_without_hash_or_heading_text(query: str, anchor: str | None) -> None:
    outline = parse_outline(b"# Problem Statement\n# Notes\n# Notes\n# ???\n")
    found = outline.find(query)
    assert (found.anchor if found else None) == anchor


@pytest.mark.parametrize(
    ("heading", "query"),
    [
        ("## Aims {#goals}", "goals"),
        ("## Aims {#Goals .lead}", "#goals"),
        ("## Aims {: #goals }", "goals"),
        ("## 计算属性缓存 vs 方法 {#computed-caching-vs-methods}", "computed-caching-vs-methods"),
    ],
)
def test_a_heading_is_also_found_by_the_id_it_gives_itself(heading: str, query: str) -> None:
    outline = parse_outline(f"# Guide\n\n{heading}\n\ntext\n\n## Goals of others\n".encode())
    found = outline.find(query)
    assert found is not None and found.title.startswith(heading.removeprefix("## ").split(" {")[0])
    assert found.anchor != query.removeprefix("#")  # the GitHub-style anchor stays its address


def test_an_id_is_found_only_where_it_closes_the_heading() -> None:
    outline = parse_outline(b"# Guide\n\n## Use {#x} in templates\n")
    assert outline.find("x") is None


def test_an_outline_shows_a_heading_as_its_site_does_without_its_id() -> None:
    outline = parse_outline(b"# Guide {#guide}\n\n## Aims {#goals}\n\ntext\n")
    assert outline_text(outline) == "- Guide (#guide-guide, 5 lines)\n  - Aims (#aims-goals, 3 lines)\n"


# --- outline text and opening ---------------------------------------------------------------


def test_outline_text_indents_two_spaces_per_level_and_counts_lines() -> None:
    body = b"# Guide\nintro\n\n## Install *now*\nsteps\n### Linux\nx\n## Use\n"
    assert outline_text(parse_outline(body)) == (
        "- Guide (#guide, 8 lines)\n"
        "  - Install now (#install-now, 4 lines)\n"
        "    - Linux (#linux, 2 lines)\n"
        "  - Use (#use, 1 lines)\n"
    )


def test_outline_text_of_a_document_without_headings_is_empty() -> None:
    assert outline_text(parse_outline(b"text\n")) == ""


@pytest.mark.parametrize(
    ("body", "opening"),
    [
        ("# Title\n\n  First *para*\ncontinues  \n\nSecond.\n", "First *para*\ncontinues"),
        ("Before the title.\n\n# Title\n\nAfter.\n", "Before the title."),
        ("# T\n\n- list para\n\n> quote para\n\n    code\n\nReal one.\n", "Real one."),
        ("# T\r\n\r\nline one\r\nline two\rthree\r\n", "line one\nline two\nthree"),
        ("Setext\n===\n\n[ref]: /x.md\n\nbody\n", "body"),
        ("# Only a heading\n", ""),
        ("", ""),
    ],
    ids=[
        "raw-markdown-trimmed",
        "preamble-paragraph",
        "skips-nested-and-code",
        "line-endings-normalised",
        "setext-and-definitions-are-not-paragraphs",
        "none",
        "empty-body",
    ],
)
def test_opening_paragraph_is_the_first_top_level_paragraph(body: str, opening: str) -> None:
    assert opening_paragraph(body.encode()) == opening


# --- properties -----------------------------------------------------------------------------

_NEWLINES = st.sampled_from(["\n", "\r\n", "\r"])
_PIECES = ["a", "Zé", "09", " ", "中", "🎉", "#", "=", "-", "*", "**", "_", "`", "\\", "&amp;"]
_PIECES += ["[", "](x.md)", "![", "<b>", "<", "!", "*em*", "__st__", "`co de`", "[l *i*](x.md)"]
_PIECES += ["![i](p.png)", "\\*"]
_WORDS = st.lists(st.sampled_from(_PIECES), max_size=8).map("".join)


@st.composite
def _block(draw: st.DrawFn) -> list[str]:
    """One markdown block as a list of lines (without line endings)."""
    kind = draw(st.sampled_from(["atx", "setext", "para", "fence", "indented", "list", "quote", "blank", "html"]))
    words = draw(_WORDS)
    if kind == "atx":
        closing = draw(st.sampled_from(["", " #", " ###"]))
        indent = draw(st.sampled_from(["", " ", "   "]))
        return [f"{indent}{'#' * draw(st.integers(1, 6))} {words}{closing}"]
    if kind == "setext":
        underline = draw(st.sampled_from(["===", "---", "-"]))
        return [draw(_WORDS) + "x", *draw(st.lists(_WORDS, max_size=1)), underline]
    if kind == "para":
        return ["p " + words, *draw(st.lists(_WORDS, max_size=2))]
    if kind == "fence":
        return ["```", f"# {words}", "Title", "===", "```"]
    if kind == "indented":
        return ["", f"    # {words}", ""]
    if kind == "list":
        return [f"- # {words}", f"  ## {words}", "1. item"]
    if kind == "quote":
        return [f"> # {words}", "> text", "> ==="]
    if kind == "html":
        return ["<div>", f"# {words}", "</div>", ""]
    return [""]


@st.composite
def _documents(draw: st.DrawFn) -> bytes:
    lines = [line for block in draw(st.lists(_block(), max_size=25)) for line in block]
    out = []
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        out.append(line + ("" if last and draw(st.booleans()) else draw(_NEWLINES)))
    return "".join(out).encode()


_ANY_TEXT = st.text(alphabet=st.sampled_from(list("ab #=-`~>*\t\r\n é")), max_size=200).map(str.encode)


def _check_invariants(body: bytes) -> Outline:
    outline = parse_outline(body)
    sections = outline.sections
    # the preamble and every section's own text partition the body
    assert outline.preamble + b"".join(outline.own_text(s) for s in sections) == body
    for s in sections:
        assert s.end >= s.own_end >= s.heading_end > s.start
        assert s.start == 0 or body[s.start - 1 : s.start] in (b"\n", b"\r")
        text = outline.text(s)
        ends = len(re.findall(rb"\r\n|\r|\n", text))
        assert s.lines == ends + (0 if re.search(rb"[\r\n]\Z", text) else 1)
    # [start, end) holds exactly the descendants
    by_anchor = {s.anchor: s for s in sections}
    assert len(by_anchor) == len(sections)
    for s in sections:
        inside = {t.anchor for t in sections if s.start < t.start < s.end}
        descendants = set()
        for t in sections:
            parent = t.parent
            while parent is not None:
                if parent == s.anchor:
                    descendants.add(t.anchor)
                parent = by_anchor[parent].parent
        assert inside == descendants
        assert all(by_anchor[d].end <= s.end for d in descendants)
    return outline


@settings(max_examples=300, deadline=None)
@given(_documents())
def test_sections_partition_any_generated_document_exactly(body: bytes) -> None:
    outline = _check_invariants(body)
    # a block never runs across a section's start (a list item's heading included)
    assert {s.start for s in outline.sections} <= set(block_starts(body))
    # each top-level heading's own bytes, parsed alone (inline too), are that heading with
    # that title (one in a list item is read in its item: alone, `    # a` is code)
    md = MarkdownIt("commonmark")
    for s in outline.sections:
        if s.in_list:
            continue
        tokens = md.parse(body[s.start : s.heading_end].decode())
        assert [(t.type, t.tag) for t in tokens[:1]] == [("heading_open", f"h{s.level}")]
        assert len([t for t in tokens if t.type == "heading_open"]) == 1
        assert _plain_text(tokens[1].children or []).strip() == s.title


def _plain_text(children: list[Token]) -> str:
    return "".join(
        " "
        if t.type in ("softbreak", "hardbreak")
        else _plain_text(t.children or [])
        if t.type == "image"
        else t.content
        if t.type in ("text", "text_special", "code_inline")  # text_special: an escape, decoded
        else ""
        for t in children
    )


@settings(max_examples=300, deadline=None)
@given(_ANY_TEXT)
def test_sections_partition_arbitrary_markdown_soup_exactly(body: bytes) -> None:
    _check_invariants(body)


def test_block_starts_are_where_a_section_can_be_cut():
    body = (
        b"# T\n\nPara one\nline two\n\n- a\n- b\n  more\n\n```\ncode\n\ncode\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    starts = block_starts(body)
    assert [body[s:].split(b"\n", 1)[0] for s in starts] == [b"# T", b"Para one", b"- a", b"- b", b"```", b"| a | b |"]


def test_an_outliners_headings_in_list_items_are_sections_but_a_quoted_heading_is_not():
    body = (
        b"title:: Tasks\n"
        b"- ## Usage\n"
        b"\t- Two flavours of markers\n"
        b"- ## Functionality\n"
        b"\t- ### Priorities\n"
        b"\t\t- Three built-in priorities\n"
        b"\t- ### Deadline\n"
        b"\t\t- Set a date\n"
        b"> ## Quoted template heading\n"
        b"# Top\n"
    )
    outline = parse_outline(body)
    assert [(s.anchor, s.level, s.parent, s.in_list) for s in outline.sections] == [
        ("usage", 2, None, True),
        ("functionality", 2, None, True),
        ("priorities", 3, "functionality", True),
        ("deadline", 3, "functionality", True),
        ("top", 1, None, False),
    ]
    deadline = outline.sections[3]
    assert outline.text(deadline) == b"\t- ### Deadline\n\t\t- Set a date\n> ## Quoted template heading\n"
    assert outline.own_text(outline.sections[1]) == b"- ## Functionality\n"  # marker included
    assert outline.preamble == b"title:: Tasks\n"


def test_a_heading_in_a_list_item_is_cut_as_a_top_level_one_is():
    """At its line, at each block after it in its item, at each item of a list there; the
    item's deeper items stay in their parent's block."""
    body = b"- ## A\n  para one\n\n  para two\n  - x\n  - y\n    - deep\n- plain item\n- ## B\n  - z\n"
    starts = block_starts(body)
    assert [body[s:].split(b"\n", 1)[0] for s in starts] == [
        b"- ## A",
        b"  para one",
        b"  para two",
        b"  - x",
        b"  - y",
        b"- plain item",
        b"- ## B",
        b"  - z",
    ]


@settings(max_examples=100, deadline=None)
@given(_ANY_TEXT)
def test_one_parse_gives_the_same_outline_and_block_starts(body: bytes) -> None:
    try:
        expected = (parse_outline(body), block_starts(body))
    except BadRequestError:
        with pytest.raises(BadRequestError):
            parse_blocks(body)
        return
    assert parse_blocks(body) == expected


LINES = st.sampled_from(
    [
        "# Title",
        "#Title",
        "## Sub",
        "Title",
        "===",
        "---",
        "   # Indented",
        "    # Code",
        "```",
        "- # Bullet",
        "  # Under a bullet",
        "> # Quoted",
        "<div>",
        "</div>",
        "# a | b",
        "|---|---|",
        "~~~",
        "<!-- a",
        "-->",
        "***",
        "text",
        "",
        "#",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(LINES, max_size=12))
def test_the_first_heading_read_from_the_text_up_to_it_is_the_whole_bodys(lines: list[str]) -> None:
    """`first_heading` parses only the text up to a line that may hold the title: it finds
    what a parse of the whole body finds."""
    body = ("\n".join(lines) + "\n").encode()
    whole = next(
        (
            shown_title(s.title)
            for s in parse_outline(body).sections
            if s.level == 1 and not s.in_list and s.title.strip()
        ),
        None,
    )
    assert first_heading(body) == whole
