"""Body links: resolution, fragments, labels, the enclosing section, what is not a link."""

from __future__ import annotations

import pytest

from demarkus.errors import BadRequestError
from demarkus.markdown import Link, Target, extract_links, resolve_target

BASE = "/docs/guide/a.md"
URL_BASE = "mark://host.example/docs/guide/a.md"


def targets(body: str, base: str = BASE) -> list[tuple[str, str, bool]]:
    return [(ln.target, ln.fragment, ln.external) for ln in extract_links(body.encode(), base)]


@pytest.mark.parametrize(
    ("destination", "base", "expected"),
    [
        ("b.md", BASE, ("/docs/guide/b.md", "", False)),
        ("../b.md", BASE, ("/docs/b.md", "", False)),
        ("./sub/c.md", BASE, ("/docs/guide/sub/c.md", "", False)),
        ("/top.md", BASE, ("/top.md", "", False)),
        ("b.md#install", BASE, ("/docs/guide/b.md", "install", False)),
        ("mark://other/spec.md#api", BASE, ("mark://other/spec.md", "api", False)),
        ("mark://Other:6309/spec.md", BASE, ("mark://other/spec.md", "", False)),
        ("mark://other:6310/spec.md", BASE, ("mark://other:6310/spec.md", "", False)),
        ("b.md", URL_BASE, ("/docs/guide/b.md", "", False)),
        ("mark://host.example/x.md#y", URL_BASE, ("/x.md", "y", False)),
        ("mark://host.example:6309/x.md", URL_BASE, ("/x.md", "", False)),
        ("mark://host.example:7000/x.md", URL_BASE, ("mark://host.example:7000/x.md", "", False)),
        ("https://example.org/p?q=1#frag", BASE, ("https://example.org/p?q=1", "frag", True)),
        ("mailto:someone@example.org", BASE, ("mailto:someone@example.org", "", True)),
        ("<with space.md>", BASE, ("/docs/guide/with space.md", "", False)),
        ("café.md", BASE, ("/docs/guide/café.md", "", False)),
        ("a%20b.md", BASE, ("/docs/guide/a b.md", "", False)),
        ("caf%C3%A9%2C%20b.md#x%20y", BASE, ("/docs/guide/café, b.md", "x%20y", False)),
        ("mark://host.example/a%20b.md", URL_BASE, ("/a b.md", "", False)),
        ("mark://other/a%20b.md", BASE, ("mark://other/a%20b.md", "", False)),
        ("a\\_b.md", BASE, ("/docs/guide/a_b.md", "", False)),
    ],
    ids=[
        "relative",
        "parent",
        "dot-segment",
        "absolute",
        "fragment-split-off",
        "other-authority",
        "default-port-dropped-host-lowered",
        "other-port-kept",
        "relative-against-url-base-is-bare",
        "same-authority-url-is-bare",
        "same-authority-with-default-port-is-bare",
        "same-host-other-port-is-other-authority",
        "https-external",
        "mailto-external",
        "angle-brackets-allow-spaces",
        "unicode-kept-as-written",
        "percent-escapes-decoded",
        "percent-escapes-decoded-fragment-as-written",
        "same-authority-url-decoded",
        "other-authority-keeps-its-escapes",
        "backslash-escape-decoded",
    ],
)
def test_link_destinations_resolve_against_the_document(
    destination: str, base: str, expected: tuple[str, str, bool]
) -> None:
    assert targets(f"[x]({destination})\n", base) == [expected]


@pytest.mark.parametrize(
    "body",
    [
        "[top](#intro)",
        "[empty]()",
        "![image](pic.png)",
        "`[code](a.md)`",
        "```\n[fenced](a.md)\n```",
        "    [indented](a.md)",
        "[js](javascript:alert(1))",
        "[no host](mark:///x.md)",
        "[undefined reference][nowhere]",
        "<!-- [comment](a.md) -->",
    ],
    ids=[
        "fragment-only",
        "empty-destination",
        "image",
        "code-span",
        "fenced-code",
        "indented-code",
        "unsafe-scheme",
        "mark-url-without-host",
        "undefined-reference",
        "html-comment",
    ],
)
def test_things_that_look_like_links_but_are_not_are_skipped(body: str) -> None:
    assert extract_links(body.encode(), BASE) == []


def test_links_come_in_document_order_with_label_and_enclosing_section() -> None:
    body = (
        "Intro [pre](p.md).\n"
        "\n"
        "# Guide [self](g.md)\n"
        "See [*the* `spec`](spec.md#api) and <https://example.org>.\n"
        "## Install\n"
        "- item [in list](l.md)\n"
        "> quote [in quote][q]\n"
        "\n"
        "[with ![alt](i.png) image](w.md)\n"
        "\n"
        "[q]: mark://other/q.md\n"
        "# Next\n"
        "[soft\nbreak](n.md)\n"
    )
    assert extract_links(body.encode(), BASE) == [
        Link("pre", "/docs/guide/p.md", "", None, False),
        Link("self", "/docs/guide/g.md", "", "guide-self", False),
        Link("the spec", "/docs/guide/spec.md", "api", "guide-self", False),
        Link("https://example.org", "https://example.org", "", "guide-self", True),
        Link("in list", "/docs/guide/l.md", "", "install", False),
        Link("in quote", "mark://other/q.md", "", "install", False),
        Link("with alt image", "/docs/guide/w.md", "", "install", False),
        Link("soft break", "/docs/guide/n.md", "", "next", False),
    ]


def test_links_under_crlf_and_multibyte_text_find_their_section() -> None:
    body = "É\r\n# Ü\r\n\r\n[a](a.md)\r# Ö\r[b](b.md)".encode()
    assert [ln.section for ln in extract_links(body, BASE)] == ["ü", "ö"]


def test_a_malformed_mark_url_base_is_a_bad_request() -> None:
    with pytest.raises(BadRequestError):
        extract_links(b"[a](a.md)\n", "mark:///no-host.md")


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("x.md#s", Target("/docs/guide/x.md", "s", None, False)),
        ("mark://o:6310/x.md", Target("mark://o:6310/x.md", "", "mark://o:6310", False)),
        ("mark://host.example/x.md", Target("/x.md", "", None, False)),
        ("HTTP://Example.org/", Target("HTTP://Example.org/", "", None, True)),
    ],
    ids=["bare", "other-authority", "own-authority", "external-as-written"],
)
def test_resolve_target_reports_authority_and_fragment(reference: str, expected: Target) -> None:
    assert resolve_target(URL_BASE, reference) == expected


def test_resolve_target_rejects_a_mark_url_without_host() -> None:
    with pytest.raises(BadRequestError, match="no host"):
        resolve_target(BASE, "mark:///x.md")
