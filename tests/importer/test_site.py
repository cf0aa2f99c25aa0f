"""Links to a folder's published copy, made links to its notes: pure, no store."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from demarkus.errors import BadRequestError
from demarkus.importer import parse_note
from demarkus.importer.site import Pages, Site, Sites, parse_site, rendered_from
from demarkus.markdown import extract_links

SITE = "https://github.com/org/repo/blob/main/"
MIRROR = "https://git.example.org/repo/+/main/"
SITES = Sites((Site(SITE), Site(MIRROR)), "/kb")


def local(body: str, path: str = "/kb/design/a.md", sites: Sites = SITES) -> str:
    return sites.localize(body, path)


@pytest.mark.parametrize(
    "written, expected",
    [
        (f"[b]({SITE}design/b.md)", "[b](b.md)"),
        (f"[b]({SITE}design/b.md#goals)", "[b](b.md#goals)"),
        (f"[b]({MIRROR}design/sub/c.md)", "[b](sub/c.md)"),
        (f"[top]({SITE}README.md)", "[top](../README.md)"),
        (f'[b](<{SITE}design/b.md> "the next one")', '[b](<b.md> "the next one")'),
        (f"[b]( {SITE}design/b.md )", "[b]( b.md )"),
        (f"[café]({SITE}design/caf%C3%A9.md)", "[café](café.md)"),
        # not a note's markdown file, not inside the folder, or not this site: as written
        (f"[page]({SITE}design/b)", f"[page]({SITE}design/b)"),
        (f"[issue]({SITE}design/b.md?plain=1)", f"[issue]({SITE}design/b.md?plain=1)"),
        (f"[up]({SITE}../other/b.md)", f"[up]({SITE}../other/b.md)"),
        (f"[spaced]({SITE}design/my%20note.md)", "[spaced](<my note.md>)"),
        (f"[spaced](<{SITE}design/my%20note.md#x>)", "[spaced](<my note.md#x>)"),
        (f"[paren]({SITE}design/a%281%29.md)", "[paren](<a(1).md>)"),
        (f"[tab]({SITE}design/a%09b.md)", f"[tab]({SITE}design/a%09b.md)"),  # no destination holds a tab
        ("[other](https://github.com/org/other/blob/main/design/b.md)", None),
        (f"<{SITE}design/b.md>", None),  # an autolink needs its scheme
        (f"`[b]({SITE}design/b.md)`", None),  # a code span is text
    ],
)
def test_a_link_to_a_note_by_its_published_address_becomes_relative(written: str, expected: str | None):
    assert local(f"# A\n\nSee {written} now.\n") == f"# A\n\nSee {expected or written} now.\n"


def test_reference_definitions_change_and_code_and_html_blocks_do_not():
    body = (
        "# A\n\n"
        "See [b][] and [c][c].\n\n"
        f"[b]: {SITE}design/b.md\n"
        f"   [c]: <{MIRROR}design/c.md#x> 'c'\n"
        f'[t]: {SITE}design/t.md "a title, not a link: [x]({SITE}design/x.md)"\n\n'
        "```\n"
        f"[d]({SITE}design/d.md)\n"
        "```\n\n"
        f"    [e]({SITE}design/e.md)\n\n"
        f'<div><a href="{SITE}design/f.md">f</a>\n'
        f"[g]({SITE}design/g.md)</div>\n"
    )
    out = local(body)
    assert "[b]: b.md\n" in out and "   [c]: <c.md#x> 'c'\n" in out
    assert f'[t]: t.md "a title, not a link: [x]({SITE}design/x.md)"\n' in out
    assert f"[d]({SITE}design/d.md)" in out and f"[e]({SITE}design/e.md)" in out
    assert f"[g]({SITE}design/g.md)" in out  # inside the HTML block: text
    assert out.count(SITE) == 5 and MIRROR not in out


def test_the_links_resolve_to_the_documents_and_nothing_else_moves():
    body = f"# A\r\n\r\nSee [b]({SITE}design/b.md) and [web](https://example.org/x).\r\n\u2028tail [c]({SITE}c.md)\n"
    out = local(body)
    assert out == body.replace(f"{SITE}design/b.md", "b.md").replace(f"{SITE}c.md", "../c.md")
    assert [(link.target, link.external) for link in extract_links(out.encode(), "/kb/design/a.md")] == [
        ("/kb/design/b.md", False),
        ("https://example.org/x", True),
        ("/kb/c.md", False),
    ]


def test_without_sites_or_their_links_the_body_is_returned_as_it_is():
    body = f"# A\n\n[b]({SITE}design/b.md)\n"
    assert Sites((), "/").localize(body, "/a.md") is body
    plain = "# A\n\n[b](https://example.org/b.md)\n"
    assert local(plain) is plain


def test_the_document_a_reference_names_keeps_the_prefix_and_fragment():
    assert SITES.document(f"{SITE}design/b.md#goals") == ("/kb/design/b.md", "goals")
    assert Sites((Site(SITE),), "/").document(f"{SITE}b.md") == ("/b.md", "")
    assert SITES.document(f"{SITE}design/b") is None
    assert SITES.document(f"{SITE}.hidden/b.md") is None  # not a document path
    assert SITES.document("https://example.org/b.md") is None


def test_a_note_parsed_with_sites_has_local_links_and_relations():
    raw = (
        f"---\nsuperseded-by: {SITE}design/b.md\nrelated: [{MIRROR}c.md, ../d.md]\n---\n# A\n\n[b]({SITE}design/b.md)\n"
    ).encode()
    note = parse_note(raw, "/kb/design/a.md", links=(SITES,))
    assert dict(note.metadata) == {
        "title": "A",
        "rel-superseded-by": "/kb/design/b.md",
        "rel-related": "/kb/c.md, /kb/d.md",
    }
    assert note.body == b"# A\n\n[b](b.md)\n"
    assert parse_note(raw, "/kb/design/a.md").body == f"# A\n\n[b]({SITE}design/b.md)\n".encode()


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("ftp://example.org/repo/", "not a web address"),
        ("github.com/org/repo/", "not a web address"),
        ("https:///repo/", "not a web address"),
        ("https://example.org/repo/?tab=1", "query or fragment"),
        ("https://example.org/repo/#top", "query or fragment"),
    ],
)
def test_a_site_that_is_not_a_folder_address_is_refused_with_the_fix(url: str, fragment: str):
    with pytest.raises(BadRequestError, match=fragment):
        parse_site(url)


def test_a_site_ends_in_a_slash_so_it_matches_only_its_folder():
    assert parse_site(" https://example.org/repo ") == Site("https://example.org/repo/")
    assert parse_site("https://example.org/repo/") == Site("https://example.org/repo/")
    sites = Sites((parse_site("https://example.org/repo"),), "/")
    assert sites.document("https://example.org/repository/b.md") is None


@pytest.mark.parametrize(
    "text, folder",
    [
        ("https://golang.org/design/=design", "design/"),
        ("https://golang.org/design=./design/", "design/"),
        ("https://example.org/docs/=docs/guide/", "docs/guide/"),
        ("https://example.org/=", ""),
        ("https://example.org/=.", ""),
        ("https://example.org/=/design", "design/"),  # the folder's own root, not the disk's
        ("https://example.org/a%3Db/", ""),
    ],
)
def test_a_site_may_show_a_folder_inside_the_imported_one(text: str, folder: str):
    assert parse_site(text).folder == folder


@pytest.mark.parametrize(
    "text", ["https://example.org/=../x", "https://example.org/=a/../..", "https://example.org/=.."]
)
def test_a_site_folder_outside_the_imported_one_is_refused(text: str):
    with pytest.raises(BadRequestError, match="outside the one imported.*folder inside it"):
        parse_site(text)


def test_a_site_of_a_folder_inside_names_the_notes_there():
    sites = Sites((parse_site("https://golang.org/design/=design"), Site(SITE)), "/")
    assert sites.document("https://golang.org/design/b.md") == ("/design/b.md", "")
    assert local(f"[b](https://golang.org/design/b.md#x) [c]({SITE}c.md)", "/design/a.md", sites) == (
        "[b](b.md#x) [c](../c.md)"
    )


@pytest.mark.parametrize(
    "page, notes",
    [
        ("b.html", ("b.md",)),
        ("guide/b.htm", ("guide/b.md",)),
        ("guide/index.html", ("guide/index.md", "guide/_index.md", "guide/README.md")),
        ("index.html", ("index.md", "_index.md", "README.md")),
        ("guide/", ("guide/index.md", "guide/_index.md", "guide/README.md", "guide.md")),
        ("", ("index.md", "_index.md", "README.md")),
        ("guide/b", ("guide/b.md", "guide/b/index.md", "guide/b/_index.md", "guide/b/README.md")),
        ("guide/b.md", ("guide/b.md",)),
        ("guide/b.mdx", ("guide/b.md",)),
        ("guide/b.MARKDOWN", ("guide/b.md",)),
    ],
)
def test_a_rendered_page_comes_from_the_notes_site_generators_render_it_from(page: str, notes: tuple[str, ...]):
    assert rendered_from(page) == notes


NOTES = frozenset(
    {
        "design/b.md",
        "design/guide/README.md",
        "design/guide.md",
        "index.md",
        "design/tools/index.md",
        "design/how/_index.md",
    }
)
RENDERED = Sites((Site("https://docs.example.org/"), Site(SITE)), "/kb", NOTES.__contains__)


@pytest.mark.parametrize(
    "written, expected",
    [
        ("https://docs.example.org/design/b.html#goals", "b.md#goals"),
        ("https://docs.example.org/design/b", "b.md"),
        ("https://docs.example.org/design/b/", "b.md"),  # MkDocs renders b.md as b/
        ("https://docs.example.org/design/guide/", "guide/README.md"),
        ("https://docs.example.org/design/guide", "guide.md"),
        ("https://docs.example.org/design/tools/", "tools/index.md"),
        ("https://docs.example.org/design/how/", "how/_index.md"),  # a Hugo section's page
        ("https://docs.example.org/", "../index.md"),
        ("https://docs.example.org/design/c.html", None),  # no such note: any other page
        ("https://docs.example.org/design/b.png", None),
        ("https://docs.example.org/design/b?tab=1", None),
        ("https://docs.example.org//design/b", None),
        (f"{SITE}design/b", "b.md"),  # a repository's file view names the note by its file
        (f"{SITE}design/zzz.md", "zzz.md"),  # a .md address is matched by its name alone
        # a path from the root, read against the site's host, when the folder holds the note
        ("/design/b#goals", "b.md#goals"),
        ("/design/guide/", "guide/README.md"),
        ("/design/b.md", "b.md"),
        ("/design/zzz.md", None),  # may be a document path: left to be read as one
        ("/org/repo/blob/main/design/b.md", "b.md"),  # the file, from GitHub's root
        ("/org/other/blob/main/design/b.md", None),  # GitHub's host holds more than the site
        ("//docs.example.org/design/b", None),
    ],
)
def test_a_page_rendered_from_a_note_of_the_folder_names_the_note(written: str, expected: str | None):
    out = local(f"[x]({written})", "/kb/design/a.md", RENDERED)
    assert out == f"[x]({expected or written})"
    assert (RENDERED.document(written) is None) is (expected is None)


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from(list("abcXYZ é()<>,;'&!%?_-.0\t`*#")), min_size=1, max_size=12))
def test_every_link_by_the_sites_address_made_local_leads_to_the_note_it_names(name: str):
    url = f"{SITE}design/{quote(name.strip() or 'x')}.md"
    body = f"# A\n\nSee [it]({url}) here.\n"
    out = local(body)
    links = extract_links(out.encode(), "/kb/design/a.md")
    if out == body:  # left as written: a name no link can hold, or no document path
        return
    assert out.startswith("# A\n\nSee [it](") and out.endswith(") here.\n")
    assert [(link.target, link.fragment) for link in links] == [SITES.document(url)]


@pytest.mark.parametrize("longer_first", [True, False])
def test_of_two_addresses_that_match_the_longer_names_the_note(longer_first: bool):
    shorter, longer = Site("https://x.org/"), parse_site("https://x.org/docs/=manual")
    sites = Sites((longer, shorter) if longer_first else (shorter, longer), "/")
    assert sites.document("https://x.org/docs/b.md") == ("/manual/b.md", "")
    assert sites.document("https://x.org/other/b.md") == ("/other/b.md", "")


# --- links to the pages a site renders ---------------------------------------------------

PAGES = Pages("/kb", {"guide/b.md", "guide/tools/index.md", "README.md", "api/core.md", "my note.md"}.__contains__)


@pytest.mark.parametrize(
    "written, expected",
    [
        ("/kb/guide/b#goals", "b.md#goals"),  # a document path, as VitePress links from the top
        ("./b", "b.md"),
        ("b.html", "b.md"),
        ("../api/core#ref", "../api/core.md#ref"),
        ("tools/", "tools/index.md"),
        ("/kb/", "../README.md"),
        ("/guide/b", None),  # a document path outside the prefix the folder goes under
        ("/kb/my%20note", "<../my note.md>"),
        # not a page of a note of the folder: as written
        ("./c", None),
        ("b.png", None),
        ("b?tab=1", None),
        ("b.md", None),  # a note's own file is a link already
        ("../../outside", None),
        ("https://example.org/guide/b", None),
        ("//example.org/guide/b", None),
        ("mailto:someone@example.org", None),
        ("#goals", None),
    ],
)
def test_a_link_to_the_page_a_site_renders_from_a_note_becomes_a_link_to_the_note(written: str, expected: str | None):
    out = PAGES.localize(f"[x]({written})", "/kb/guide/a.md")
    assert out == f"[x]({expected or written})"


def test_a_page_link_in_code_stays_and_a_definition_and_a_relation_name_the_note():
    raw = (
        b"---\nsuperseded-by: ./b\n---\n# A\n\n`[b](./b)`\n\n    [b](./b)\n\n[b]: /kb/guide/b\n[^b]: b as a footnote\n"
    )
    note = parse_note(raw, "/kb/guide/a.md", links=(PAGES,))
    assert note.metadata["rel-superseded-by"] == "/kb/guide/b.md"
    assert note.body == b"# A\n\n`[b](./b)`\n\n    [b](./b)\n\n[b]: b.md\n[^b]: b as a footnote\n"


@pytest.mark.parametrize(
    "written, expected",
    [
        ('{{< ref "b" >}}', "b.md"),  # from the note's own folder, without `.md`
        ('{{< relref "b.md#goals" >}}', "b.md#goals"),
        ('{{% ref "/api/core.md" %}}', "../api/core.md"),  # from the content folder
        ('{{< ref "api/core" >}}', "../api/core.md"),  # not beside the note: from the content folder
        ('{{< ref "tools/" >}}', "tools/index.md"),
        ('{{<ref "my note.md">}}', "<../my note.md>"),
        # no note of the folder, or not a shortcode of a path: as written
        ('{{< ref "c" >}}', None),
        ('{{< ref "../../outside.md" >}}', None),
        ('{{< ref path="b" >}}', None),
        ('{{< ref "b" %}}', None),
    ],
)
def test_a_hugo_ref_to_a_note_becomes_a_link_to_the_note(written: str, expected: str | None):
    out = PAGES.localize(f'See [x]({written} "the title") and `[y]({written})`.', "/kb/guide/a.md")
    assert out == f'See [x]({expected or written} "the title") and `[y]({written})`.'


def test_a_hugo_ref_after_a_page_link_on_its_line_keeps_out_of_code():
    line = '[a](/kb/guide/tools/index.html) `[y]({{< ref "b" >}}) in code` [c]({{< ref "b" >}})'
    assert PAGES.localize(line, "/kb/guide/a.md") == (  # the first link shrinks: the spans are found again
        '[a](tools/index.md) `[y]({{< ref "b" >}}) in code` [c](b.md)'
    )
